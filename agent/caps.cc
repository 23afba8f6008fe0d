#include "caps.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace airlock::agent {

int lastCap() {
  int fd = ::open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return CAP_LAST_CAP;
  char buf[16] = {};
  ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return CAP_LAST_CAP;
  int v = std::atoi(buf);
  return v > 0 && v < 64 ? v : CAP_LAST_CAP;
}

bool canDropBoundingSet() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &hdr, data) != 0) return false;
  return (data[0].effective & (1U << CAP_SETPCAP)) != 0;
}

int dropBoundingSet(uint64_t keep, int last_cap, int* failed_cap) {
  for (int cap = 0; cap <= last_cap; ++cap) {
    if ((keep >> cap) & 1) continue;
    // Dropping a bit already gone succeeds, so no PR_CAPBSET_READ first (a syscall costs ~1 us
    // in a paravirtualized guest). Without this, a uid-0 sandbox process would regain every
    // capability at execve.
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
      // A kernel whose cap_last_cap overstates what it implements (gVisor reports the host's
      // 40 but knows only up to CAP_AUDIT_READ) refuses the unknown numbers with EINVAL: a
      // capability the kernel does not know cannot be held, so there is nothing left to drop.
      if (errno == EINVAL && cap > 0) return 0;
      *failed_cap = cap;
      return -1;
    }
  }
  return 0;
}

int setCapabilities(uint64_t caps) {
  // Ambient capabilities survive execve of unprivileged binaries; none may leak in.
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) return -1;
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  for (int i = 0; i < 2; ++i) {
    auto word = static_cast<uint32_t>(caps >> (32 * i));
    data[i].effective = word;
    data[i].permitted = word;
    data[i].inheritable = word;
  }
  return static_cast<int>(::syscall(SYS_capset, &hdr, data));
}

}  // namespace airlock::agent
