#include "clone.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "child.h"

namespace airlock::isolation {
namespace {

constexpr uint64_t kCloneIntoCgroup = 0x200000000ULL;  // linux/sched.h CLONE_INTO_CGROUP

// struct clone_args of linux/sched.h (VER2, with cgroup); declared here because that header
// clashes with glibc's <sched.h>.
struct CloneArgs {
  uint64_t flags;
  uint64_t pidfd;
  uint64_t child_tid;
  uint64_t parent_tid;
  uint64_t exit_signal;
  uint64_t stack;
  uint64_t stack_size;
  uint64_t tls;
  uint64_t set_tid;
  uint64_t set_tid_size;
  uint64_t cgroup;
};
static_assert(sizeof(CloneArgs) == 88);

}  // namespace

void ChildProcess::killAndReap() noexcept {
  if (!pidfd_) return;
  ::syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
  siginfo_t info;
  while (::waitid(P_PIDFD, static_cast<id_t>(pidfd_.get()), &info, WEXITED) != 0 &&
         errno == EINTR) {
  }
  pidfd_.reset();
}

uint64_t sandboxCloneFlags() {
  // The network and IPC namespaces come from the child's first stage (net.h): a netns costs
  // ~0.8 ms of kernel work, which there runs while the parent writes id maps and cgroups.
  return CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWCGROUP;
}

Result<SpawnedChild> spawnChild(const Plan& plan, ChildContext ctx, int cgroup_fd) {
  int sync[2];
  int err[2];
  if (::pipe2(sync, O_CLOEXEC) != 0) return sysError("pipe2", "sync pipe");
  UniqueFd sync_read(sync[0]), sync_write(sync[1]);
  if (::pipe2(err, O_CLOEXEC) != 0) return sysError("pipe2", "error pipe");
  UniqueFd error_read(err[0]), error_write(err[1]);
  ctx.sync_fd = sync_read.get();
  ctx.error_fd = error_write.get();

  int pidfd = -1;
  CloneArgs args = {};
  args.flags = sandboxCloneFlags() | CLONE_PIDFD;
  args.pidfd = reinterpret_cast<uintptr_t>(&pidfd);
  args.exit_signal = SIGCHLD;
  if (cgroup_fd >= 0) {
    // Born in the sandbox's cgroup: limits and eBPF apply from the first instruction.
    args.flags |= kCloneIntoCgroup;
    args.cgroup = static_cast<uint64_t>(cgroup_fd);
  }

  // No handler of ours may run in the child; it resets dispositions before unblocking.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  // New namespaces need CAP_SYS_ADMIN (the supervisor is root); fork-like since stack is 0.
  long pid = ::syscall(SYS_clone3, &args, sizeof args);
  if (pid == 0) runChild(plan.steps(), ctx);
  int clone_errno = errno;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0) {
    errno = clone_errno;
    return sysError("clone3", cgroup_fd >= 0 ? "namespaces, into cgroup" : "namespaces");
  }
  return SpawnedChild{ChildProcess(static_cast<pid_t>(pid), UniqueFd(pidfd)), std::move(sync_write),
                      std::move(error_read)};
}

}  // namespace airlock::isolation
