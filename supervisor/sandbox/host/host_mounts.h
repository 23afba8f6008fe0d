// Operators' host directories inside a sandbox (HostMount, rootfs_view.h). The backends take
// mount sources as paths, and a path can be swapped for a symlink between a check and the
// mount. So each directory, already opened with openat2 beneath its root, is bound through its
// fd (/proc/self/fd/N names the open inode, not a path) onto a private staging point of the
// supervisor's own, <state_dir>/sandboxes/<id>.mnt<N>, which no sandbox can reach; the backend
// binds that. Once the sandbox has started it holds its own copy, and the staging points go.
#pragma once

#include <string>
#include <vector>

#include "airlock/result.h"
#include "supervisor/sandbox/host/rootfs_view.h"

namespace airlock::sandbox {

class StagedMounts {
 public:
  StagedMounts() = default;
  // Binds each mount's directory onto its staging point: private (nothing propagates to or
  // from it), read-only unless writable.
  static Result<StagedMounts> stage(const std::string& state_dir, const std::string& id,
                                    const std::vector<HostMount>& mounts);
  StagedMounts(StagedMounts&& other) noexcept : entries_(std::move(other.entries_)) {
    other.entries_.clear();
  }
  StagedMounts& operator=(StagedMounts&& other) noexcept;
  ~StagedMounts() { release(); }

  // What the backend binds: the staging points at the mounts' targets.
  const std::vector<MountEntry>& entries() const { return entries_; }
  // Detaches and removes the staging points (the sandbox keeps its copies).
  void release();

 private:
  std::vector<MountEntry> entries_;
};

// Removes what a dead supervisor left staged for sandbox `id` (orphans.h).
void releaseStagedMounts(const std::string& state_dir, const std::string& id);

}  // namespace airlock::sandbox
