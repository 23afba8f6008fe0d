// The sandbox's network namespace (network_mode 0): loopback only.
#pragma once

#include "plan.h"

namespace airlock::isolation {

// Stage network: a new netns has "lo" down; bring it up (127.0.0.1/::1 come with it).
void planNetwork(Plan& plan);

// Runs the loopback step in the child. Returns 0 or an errno value. Async-signal-safe.
int loopbackUpInChild();

}  // namespace airlock::isolation
