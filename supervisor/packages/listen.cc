// listenInNetns and boundPort (proxy.h).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>

#include <thread>

#include "supervisor/packages/proxy.h"

namespace airlock::packages {
namespace {

Result<UniqueFd> listenHere(uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return sysError("socket", "127.0.0.1:" + std::to_string(port));
  const int one = 1;
  (void)::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0)
    return sysError("bind", "127.0.0.1:" + std::to_string(port));
  if (::listen(fd.get(), 128) != 0) return sysError("listen", "127.0.0.1:" + std::to_string(port));
  return fd;
}

}  // namespace

Result<UniqueFd> listenInNetns(int netns_fd, uint16_t port) {
  if (netns_fd < 0) return listenHere(port);
  // setns() changes only the calling thread's namespace, and this thread ends right after: the
  // socket stays in the namespace it was made in, and no other thread ever moves.
  Result<UniqueFd> result = fail("packages: listener thread did not run");
  std::thread([&] {
    if (::setns(netns_fd, CLONE_NEWNET) != 0) {
      result = sysError("setns(CLONE_NEWNET)", "packages listener");
      return;
    }
    result = listenHere(port);
  }).join();
  return result;
}

Result<uint16_t> boundPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return sysError("getsockname", "packages listener");
  if (addr.ss_family == AF_INET)
    return ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  return fail("packages: not a TCP socket");
}

}  // namespace airlock::packages
