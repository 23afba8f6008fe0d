// flock()ed files that let several airlock processes (a `serve`, one-shot `run`s, tests) share
// host-wide state: the network's table and address slots, the pinned audit engine's slots.
// A lock dies with its holder, so a process killed with -9 never leaves a slot taken.
#pragma once

#include <string>

#include "airlock/result.h"
#include "airlock/unique_fd.h"

namespace airlock::sys {

// Opens (creating it, and its directory, root-only) `dir`/`name`. Never follows a symlink.
Result<UniqueFd> openLockFile(const std::string& dir, const std::string& name);
// Blocks until the lock (LOCK_EX or LOCK_SH) is held; `what` names the file in errors.
Result<> lockFile(int fd, int operation, const std::string& what);
// An exclusive lock without waiting: true when now held, false when another holder has it.
Result<bool> tryLockFile(int fd, const std::string& what);

}  // namespace airlock::sys
