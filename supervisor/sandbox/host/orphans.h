// Sandboxes whose supervisor died (kill -9, crash, power loss of the process).
//
// Every live sandbox holds an flock() on <state_dir>/sandboxes/<id>.lock for its whole life; the
// kernel drops the lock when the holder dies, however it dies. Any later airlock process that
// can take such a lock knows the sandbox is orphaned and removes what is left of it: its
// processes and cgroup (mounts and namespaces die with its processes), and the host mount of its
// persistent workspace, if it had one.
#pragma once

#include <set>
#include <string>

#include "airlock/result.h"
#include "airlock/unique_fd.h"

namespace airlock::sandbox {

// The scratch directory every isolation backend is given (airlock_sandbox_spec_v1::scratch_dir);
// a backend may keep a sandbox's files in <scratch>/<id>, removed when the orphan is reclaimed.
inline std::string backendScratchDir(const std::string& state_dir) { return state_dir + "/rootfs"; }

// Creates and locks <state_dir>/sandboxes/<id>.lock. The file appears only once it is locked
// (created under a temporary name, then renamed), so a concurrent reclaim never mistakes a
// sandbox being born for an orphan.
Result<UniqueFd> lockSandbox(const std::string& state_dir, const std::string& id);

// Removes the lock file (and journal) of a sandbox that has been fully torn down.
void unlockSandbox(const std::string& state_dir, const std::string& id, UniqueFd lock);

// Which orphans to reclaim. A sandbox of `airlock serve` (one with a journal, <id>.json) keeps
// its agent alive for a while after its supervisor dies, so that the next supervisor can adopt
// it (Sandbox::adopt): other airlock processes leave such a sandbox alone while its agent lives
// (kSparingAdoptable); the restarted supervisor, once it has adopted what it could, reclaims
// the rest (kAll).
enum class Reclaim { kSparingAdoptable, kAll };

// The ids of sandboxes whose lock is held, by any process (this one included): those alive.
std::set<std::string> liveSandboxes(const std::string& state_dir);

// Reclaims orphaned sandboxes. Returns how many were removed; errors name the sandbox.
Result<int> reclaimOrphans(const std::string& state_dir,
                           Reclaim which = Reclaim::kSparingAdoptable);

}  // namespace airlock::sandbox
