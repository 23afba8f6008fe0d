// Sandboxes whose supervisor died (kill -9, crash, power loss of the process).
//
// Every live sandbox holds an flock() on <state_dir>/sandboxes/<id>.lock for its whole life; the
// kernel drops the lock when the holder dies, however it dies. Any later airlock process that
// can take such a lock knows the sandbox is orphaned and removes what is left of it: its
// processes and cgroup (mounts and namespaces die with its processes), and the host mount of its
// persistent workspace, if it had one.
#pragma once

#include <string>

#include "airlock/result.h"
#include "airlock/unique_fd.h"

namespace airlock::sandbox {

// Creates and locks <state_dir>/sandboxes/<id>.lock. The file appears only once it is locked
// (created under a temporary name, then renamed), so a concurrent reclaim never mistakes a
// sandbox being born for an orphan.
Result<UniqueFd> lockSandbox(const std::string& state_dir, const std::string& id);

// Removes the lock file of a sandbox that has been fully torn down.
void unlockSandbox(const std::string& state_dir, const std::string& id, UniqueFd lock);

// Reclaims every orphaned sandbox. Returns how many were removed; errors name the sandbox.
Result<int> reclaimOrphans(const std::string& state_dir);

}  // namespace airlock::sandbox
