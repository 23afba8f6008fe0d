// The sandbox's network namespace (network_mode 0): loopback only.
#pragma once

#include "plan.h"

namespace airlock::isolation {

// Stage network, which the child runs first, before it waits for the parent: a new network and
// IPC namespace (made here rather than by clone3, so that building them overlaps the parent's id
// map and cgroup writes), then "lo" up (127.0.0.1/::1 come with it; a new netns has it down).
void planNetwork(Plan& plan);

// unshare(CLONE_NEWNET | CLONE_NEWIPC) in the child. Returns 0 or an errno value.
int unshareNetIpcInChild();
// Runs the loopback step in the child. Returns 0 or an errno value. Async-signal-safe.
int loopbackUpInChild();

}  // namespace airlock::isolation
