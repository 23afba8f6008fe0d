#include "startup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <vector>

namespace airlock::agent {
namespace {

void closeRange(unsigned first, unsigned last) {
  if (first > last) return;
  if (::close_range(first, last, 0) == 0) return;
  // Kernels without close_range (gVisor's): close what /proc lists. Trying every number up to
  // 65535 instead cost 1.6 s under gVisor's ptrace platform, where each syscall takes ~25 us.
  if (DIR* d = ::opendir("/proc/self/fd")) {
    const int own = ::dirfd(d);
    std::vector<int> open_fds;
    while (dirent* e = ::readdir(d)) {
      char* end = nullptr;
      unsigned long fd = std::strtoul(e->d_name, &end, 10);
      if (end != e->d_name && *end == '\0' && fd >= first && fd <= last &&
          static_cast<int>(fd) != own)
        open_fds.push_back(static_cast<int>(fd));
    }
    ::closedir(d);
    for (int fd : open_fds) ::close(fd);
    return;
  }
  for (unsigned fd = first; fd <= std::min(last, 65535u); ++fd) ::close(static_cast<int>(fd));
}

}  // namespace

Result<UniqueFd> prepareProcess(int channel_in, int channel_out) {
  // Sandboxed code may run as the agent's uid; it must not read the agent's memory.
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return sysError("prctl(PR_SET_DUMPABLE, 0)");

  // Nothing the launcher leaked may reach sandboxed code.
  std::vector<unsigned> keep{0, 1, 2, static_cast<unsigned>(channel_in),
                             static_cast<unsigned>(channel_out)};
  std::sort(keep.begin(), keep.end());
  unsigned next = 0;
  for (unsigned k : keep) {
    if (k > next) closeRange(next, k - 1);
    next = std::max(next, k + 1);
  }
  closeRange(next, ~0u);

  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) >= 0) continue;
    int null = ::open("/dev/null", O_RDWR);
    if (null < 0) return sysError("open", "/dev/null");
    if (null != fd) {
      if (::dup2(null, fd) < 0) return sysError("dup2", "/dev/null");
      ::close(null);
    }
  }
  // Executions with a control pipe get it as fd 3; keeping 3 taken here means no pipe of the
  // agent's (sync, stdio) ever lands on 3 and is replaced by the child's dup2.
  if (::fcntl(3, F_GETFD) < 0) {
    int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null < 0) return sysError("open", "/dev/null");
    if (null != 3) {
      if (::dup3(null, 3, O_CLOEXEC) < 0) return sysError("dup3", "/dev/null onto fd 3");
      ::close(null);
    }
  }
  for (int fd : {channel_in, channel_out}) {
    if (::fcntl(fd, F_GETFD) < 0)
      return sysError("fcntl(F_GETFD) agent channel", std::to_string(fd));
    if (::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0)
      return sysError("fcntl(FD_CLOEXEC) agent channel", std::to_string(fd));
    // Sends wait in poll so the agent can keep reading while the supervisor is slow.
    int fl = ::fcntl(fd, F_GETFL);
    if (fl < 0 || ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0)
      return sysError("fcntl(O_NONBLOCK) agent channel", std::to_string(fd));
  }

  // Launchers may hand over ignored signals and any mask (the namespaces backend execs the agent
  // with every signal blocked): dispositions and the mask are set here, before anything else.
  // The raw syscall, because glibc's sigaction() refuses the two signals it reserves (32, 33),
  // and one ignored by whoever started the supervisor would reach every program (musl and Go
  // use them). A zeroed kernel sigaction is SIG_DFL, no flags, no mask, on every architecture.
  const unsigned long dfl[4] = {};
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    ::syscall(SYS_rt_sigaction, sig, dfl, nullptr, sizeof(uint64_t));
  }
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  if (::sigaction(SIGPIPE, &ign, nullptr) != 0) return sysError("sigaction(SIGPIPE, SIG_IGN)");
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  if (::sigprocmask(SIG_SETMASK, &mask, nullptr) != 0) return sysError("sigprocmask(SIGCHLD)");
  UniqueFd sfd(::signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!sfd) return sysError("signalfd(SIGCHLD)");

  // Outside a pid namespace, orphans would go to the host's init; keep them ours to reap/kill.
  if (::getpid() != 1 && ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
    return sysError("prctl(PR_SET_CHILD_SUBREAPER)");
  ::umask(022);
  return sfd;
}

}  // namespace airlock::agent
