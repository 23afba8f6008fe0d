// The child half: runs a prepared Plan after clone3, then execs the agent.
#pragma once

#include <span>

#include "plan.h"

namespace airlock::isolation {

// Stages wait_parent, and fds, exec (last), around the concern-specific stages.
//
// The child runs with every signal blocked, from before the clone (the cloning thread blocks
// them) through execveat, so no handler of the supervisor's ever runs in it; execveat resets
// every handled signal to SIG_DFL, and the agent sets its own mask and dispositions first thing
// (agent/startup.cc). So there is no stage that resets 64 dispositions one syscall at a time.
void planWaitParent(Plan& plan);
void planHostname(const char* hostname, Plan& plan);
void planExec(Plan& plan);

// Walks steps in order. On the first failure writes a FailureRecord to ctx.error_fd and
// _exits with kChildExitStageFailed; on success the last step execs the agent. Only
// async-signal-safe calls: the child of a raw clone3 of a possibly multi-threaded process.
[[noreturn]] void runChild(std::span<const Step> steps, const ChildContext& ctx);

}  // namespace airlock::isolation
