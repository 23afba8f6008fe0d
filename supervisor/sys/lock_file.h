// flock()ed files that let several airlock processes (a `serve`, one-shot `run`s, tests) share
// host-wide state: the network's table and address slots, the pinned audit engine's slots.
// A lock dies with its holder, so a process killed with -9 never leaves a slot taken.
#pragma once

#include <string>

#include "airlock/result.h"
#include "airlock/unique_fd.h"

namespace airlock::sys {

// Opens (creating it, and its directory, root-only; never through a symlink) `dir`/`name` and
// waits until `operation` (LOCK_EX or LOCK_SH) is held. The lock lasts as long as the fd.
Result<UniqueFd> lockFileIn(const std::string& dir, const std::string& name, int operation);
// The same with an exclusive lock, without waiting: an invalid fd when another holder has it.
Result<UniqueFd> tryLockFileIn(const std::string& dir, const std::string& name);

}  // namespace airlock::sys
