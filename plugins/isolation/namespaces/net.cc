#include "net.h"

#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace airlock::isolation {

void planNetwork(Plan& plan) {
  plan.add({.stage = Stage::kNetwork, .kind = StepKind::kUnshareNetIpc},
           "unshare(CLONE_NEWNET|CLONE_NEWIPC)", "network and IPC namespaces");
  plan.add({.stage = Stage::kNetwork, .kind = StepKind::kLoopbackUp}, "ioctl(SIOCSIFFLAGS)", "lo");
}

int unshareNetIpcInChild() {
  // CAP_SYS_ADMIN over the child's new user namespace, which then owns both namespaces, exactly
  // as if clone3 had made them. Until here the child runs only our code and touches no network.
  return ::unshare(CLONE_NEWNET | CLONE_NEWIPC) == 0 ? 0 : errno;
}

int loopbackUpInChild() {
  int sock = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (sock < 0) return errno;
  struct ifreq ifr;
  std::memset(&ifr, 0, sizeof ifr);
  std::memcpy(ifr.ifr_name, "lo", 3);
  ifr.ifr_flags = IFF_UP | IFF_RUNNING;
  // CAP_NET_ADMIN over the new netns (owned by the new user namespace).
  int rc = ::ioctl(sock, SIOCSIFFLAGS, &ifr);
  int err = rc == 0 ? 0 : errno;
  ::close(sock);
  return err;
}

}  // namespace airlock::isolation
