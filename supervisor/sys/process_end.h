// Ending a process for good, by its pidfd: a sandbox's PID 1 at teardown. The cgroup's kill
// normally ends it with the rest; should that fail (no cgroup.kill and no freezer, a cgroup
// already removed), nothing else would, and an unbounded wait would hang the supervisor's
// teardown, and with it every request waiting on that sandbox.
#pragma once

#include <chrono>

#include "airlock/result.h"

namespace airlock::sys {

// SIGKILLs the process behind `pidfd` (a pidfd cannot name a reused pid), waits up to `bound`
// for it to exit and, when `reap` (it is our child), reaps it. Fails, naming the pid and the
// bound, when it has not exited by then (stuck in the kernel): the caller keeps what it must
// not free yet. The pidfd stays open; the caller closes it.
Result<> killAndAwaitExit(int pidfd, bool reap, std::chrono::milliseconds bound);

}  // namespace airlock::sys
