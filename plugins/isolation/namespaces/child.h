// The child half: runs a prepared Plan after clone3, then execs the agent.
#pragma once

#include <span>

#include "plan.h"

namespace airlock::isolation {

// Stages reset_signals (first), wait_parent, and fds, exec (last), around the concern-specific
// stages.
void planResetSignals(Plan& plan);
void planWaitParent(Plan& plan);
void planHostname(const char* hostname, Plan& plan);
void planExec(Plan& plan);

// Walks steps in order. On the first failure writes a FailureRecord to ctx.error_fd and
// _exits with kChildExitStageFailed; on success the last step execs the agent. Only
// async-signal-safe calls: the child of a raw clone3 of a possibly multi-threaded process.
[[noreturn]] void runChild(std::span<const Step> steps, const ChildContext& ctx);

}  // namespace airlock::isolation
