// `"mounts"` of a created sandbox (docs/transfer.md, "Mounts"): `hostdir:ROOT/sub` directories
// the operator declared in [transfer] roots, checked against the profile's transfer policy and
// opened beneath their root with openat2 (no `..`, no symlink, no other file system on the way)
// before the sandbox starts. Read-only unless the root is in [transfer] writable_roots and the
// request asks for writes.
#pragma once

#include <vector>

#include "airlock/policy/policy.h"
#include "supervisor/sandbox/host/rootfs_view.h"
#include "supervisor/sandbox/service.h"

namespace airlock::sandbox {

// The mounts, opened; `specs` get their default paths (/mnt/ROOT[/sub]) filled in. Errors name
// the mount ("mounts[1]") and the rule.
SResult<std::vector<HostMount>> openHostdirMounts(const policy::Profile& profile,
                                                  const policy::TransferSettings& host,
                                                  std::vector<MountSpec>& specs);

}  // namespace airlock::sandbox
