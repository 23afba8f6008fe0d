// Persistent workspaces on disk: one ext4 image per tenant and sandbox name, at
// <state_dir>/workspaces/<tenant>/<name>.ext4. A sandbox created with `persistent: true` mounts
// its name's image at /home/user (sandbox/workspace_mount.h), so files survive the sandbox, the
// supervisor and the host rebooting; the image's size is the workspace quota, fixed when the
// image is made (the profile's workspace_mb at that time).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "airlock/result.h"
#include "supervisor/sandbox/service.h"

namespace airlock::sandbox {

class WorkspaceStore {
 public:
  explicit WorkspaceStore(std::string root) : root_(std::move(root)) {}

  // The image of (tenant, name); made (sparse file, mkfs.ext4) when it does not exist yet.
  Result<std::string> imageFor(const std::string& tenant, const std::string& name,
                               uint64_t size_bytes);
  Result<std::vector<WorkspaceInfo>> list(const std::string& tenant) const;
  // Deletes the image; refuses one a sandbox has mounted. ENOENT when there is none.
  Result<> remove(const std::string& tenant, const std::string& name);
  // Deletes the half-made images of processes that died while making them (a supervisor killed
  // during mkfs.ext4 leaves its temporary file); returns how many.
  int removeHalfMade() const;

 private:
  std::string tenantDir(const std::string& tenant) const;
  std::string root_;
};

}  // namespace airlock::sandbox
