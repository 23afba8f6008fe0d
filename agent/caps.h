// Capability handling for executions. Probes run in the agent; the rest is async-signal-safe
// and runs in the forked child before execve.
#pragma once

#include <cstdint>

namespace airlock::agent {

// Highest capability number the kernel knows (/proc/sys/kernel/cap_last_cap).
int lastCap();

// Whether the agent may drop bounding-set bits (CAP_SETPCAP in its effective set).
bool canDropBoundingSet();

// Drops every bounding-set capability not in keep. Returns 0, or -1/errno with *failed_cap set.
int dropBoundingSet(uint64_t keep, int last_cap, int* failed_cap);

// Clears the ambient set and sets effective, permitted and inheritable to caps.
int setCapabilities(uint64_t caps);

}  // namespace airlock::agent
