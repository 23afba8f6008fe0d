// /dev: a small tmpfs with only the harmless devices, a private devpts and /dev/shm.
#pragma once

#include "mounts.h"
#include "plan.h"

namespace airlock::isolation {

// Stage dev: null, zero, full, random, urandom, tty bound from the host (no mknod in a user
// namespace), devpts newinstance, /dev/shm, the fd symlinks; then /dev itself read-only. The
// devices, links and the read-only tmpfs are the shared part; devpts and /dev/shm, each
// sandbox's own.
void planDev(const RootLayout& layout, Plan& plan, RootPart part = RootPart::kAll);

}  // namespace airlock::isolation
