// /dev: a small tmpfs with only the harmless devices, a private devpts and /dev/shm.
#pragma once

#include "mounts.h"
#include "plan.h"

namespace airlock::isolation {

// Stage dev: null, zero, full, random, urandom, tty bound from the host (no mknod in a user
// namespace), devpts newinstance, /dev/shm, the fd symlinks; then /dev itself read-only.
void planDev(const RootLayout& layout, Plan& plan);

}  // namespace airlock::isolation
