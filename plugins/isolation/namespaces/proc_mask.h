// /proc: a new instance for the sandbox's pid namespace, with the kernel's revealing or
// dangerous entries masked and the tunables read-only.
#pragma once

#include "mounts.h"
#include "plan.h"

namespace airlock::isolation {

// Stage proc. Which masked entries exist is read from the host's /proc (same kernel) now.
void planProc(const RootLayout& layout, Plan& plan);

}  // namespace airlock::isolation
