#include "supervisor/sys/process_end.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

namespace airlock::sys {

Result<> killAndAwaitExit(int pidfd, bool reap, std::chrono::milliseconds bound) {
  // ESRCH: it has exited already (a zombie still reads as readable below).
  if (::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0) != 0 && errno != ESRCH)
    return sysError("pidfd_send_signal(SIGKILL)", "PID 1");
  const auto deadline = std::chrono::steady_clock::now() + bound;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{pidfd, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (n > 0) break;  // it exited
    if (n < 0 && errno != EINTR) return sysError("poll(pidfd)", "PID 1");
    if (n == 0)
      return fail("PID 1 did not exit within " + std::to_string(bound.count()) +
                  " ms of SIGKILL (stuck in the kernel?)");
  }
  if (reap) {
    siginfo_t info{};
    while (::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd), &info,
                    WEXITED | WNOHANG) != 0) {
      if (errno != EINTR) return sysError("waitid(P_PIDFD)", "PID 1");
    }
  }
  return {};
}

}  // namespace airlock::sys
