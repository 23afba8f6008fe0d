// The user namespace: id maps written from the parent, root identity taken in the child.
#pragma once

#include <sys/types.h>

#include <airlock/plugin_abi_v1.h>
#include <airlock/result.h>

#include "plan.h"

namespace airlock::isolation {

// Sandbox ids 0..id_count-1 → host_uid_base.. / host_gid_base.., written by the supervisor (root
// in the parent user namespace) while the child waits, so no setgroups "deny" is needed.
Result<void> writeIdMapsFromParent(pid_t pid, const airlock_sandbox_spec_v1& spec);

// Child steps: uid/gid 0 inside, no supplementary groups.
void planIdentity(Plan& plan);

// Runs one identity step in the child. Returns 0 or an errno value. Async-signal-safe.
int identityInChild(const Step& step);

}  // namespace airlock::isolation
