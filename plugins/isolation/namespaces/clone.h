// clone3 into fresh namespaces, and the pipes that order parent and child.
#pragma once

#include <sys/types.h>

#include <memory>
#include <thread>

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

struct SharedMemoryClone;  // clone.cc

// Where the clone shares the supervisor's memory (x86-64), the thread that made it waits in
// clone3 until the child execs or dies, and the child runs on a stack of its own. Destruction
// joins that thread, then frees the stack: so it must outlive the child's setup.
class CloneWaiter {
 public:
  CloneWaiter();
  explicit CloneWaiter(std::unique_ptr<SharedMemoryClone> clone);
  CloneWaiter(CloneWaiter&&) noexcept;
  CloneWaiter& operator=(CloneWaiter&&) noexcept;
  ~CloneWaiter();

  // Whether the helper thread is back from clone3 (the child exec'd or died), so destruction
  // no longer waits for the child, only for the thread's own exit. Always true without one.
  bool returned() const;

 private:
  std::unique_ptr<SharedMemoryClone> clone_;
};

struct SpawnedChild {
  CloneWaiter waiter;  // first: destroyed last, after process has killed and reaped the child
  ChildProcess process;
  UniqueFd sync_write;  // one byte releases the child; closing it makes the child give up
  UniqueFd error_read;  // EOF: the agent was exec'd; a FailureRecord: a child stage failed
};

// The namespaces clone3 makes; the child adds network and IPC itself (stage network, net.h).
uint64_t sandboxCloneFlags();

// clone3 with sandboxCloneFlags(), CLONE_PIDFD, SIGCHLD, and CLONE_INTO_CGROUP when
// cgroup_fd >= 0. The child runs runChild(plan.steps(), ctx) with its sync/error fds filled in;
// plan must outlive its setup (until error_read reports exec or failure). Signals stay blocked
// in the child until just before exec.
//
// On x86-64 the child shares the supervisor's memory until it execs (CLONE_VM|CLONE_VFORK, as
// posix_spawn does), so neither side pays for copying the supervisor's page tables, for
// copy-on-write faults, or for tearing the copy down at exec: in `perf record` of the service's
// create/run/destroy loop (bench B4) those were ~11 % of all CPU. A helper thread makes the clone
// and is the one suspended; the calling thread goes on to write the id maps the child waits for.
// Elsewhere the clone is fork-like.
Result<SpawnedChild> spawnChild(const Plan& plan, ChildContext ctx, int cgroup_fd);

}  // namespace airlock::isolation
