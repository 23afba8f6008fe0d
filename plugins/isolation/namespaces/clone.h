// clone3 into fresh namespaces, and the pipes that order parent and child.
#pragma once

#include <sys/types.h>

#include <airlock/result.h>
#include <airlock/unique_fd.h>

#include "plan.h"

namespace airlock::isolation {

// The cloned child, owned through its pidfd: killed and reaped on destruction unless released.
class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(pid_t pid, UniqueFd pidfd) : pid_(pid), pidfd_(std::move(pidfd)) {}
  ChildProcess(ChildProcess&&) = default;
  ChildProcess& operator=(ChildProcess&&) = default;
  ~ChildProcess() { killAndReap(); }

  pid_t pid() const { return pid_; }
  int pidfd() const { return pidfd_.get(); }
  // Hands the pidfd to the caller; the process is no longer killed here.
  [[nodiscard]] UniqueFd release() { return std::move(pidfd_); }
  void killAndReap() noexcept;

 private:
  pid_t pid_ = -1;
  UniqueFd pidfd_;
};

struct SpawnedChild {
  ChildProcess process;
  UniqueFd sync_write;  // one byte releases the child; closing it makes the child give up
  UniqueFd error_read;  // EOF: the agent was exec'd; a FailureRecord: a child stage failed
};

// The namespaces clone3 makes; the child adds network and IPC itself (stage network, net.h).
uint64_t sandboxCloneFlags();

// clone3 (fork-like: no new stack) with sandboxCloneFlags(), CLONE_PIDFD, SIGCHLD, and
// CLONE_INTO_CGROUP when cgroup_fd >= 0. The child runs runChild(plan.steps(), ctx) with its
// sync/error fds filled in. Signals stay blocked in the child until just before exec.
Result<SpawnedChild> spawnChild(const Plan& plan, ChildContext ctx, int cgroup_fd);

}  // namespace airlock::isolation
