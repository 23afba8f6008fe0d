// A persistent workspace as one sandbox sees it: an ext4 image, loop-mounted on the host for the
// sandbox's lifetime and bound read-write at /home/user.
//
// Files in the image belong to host ids of whichever uid range its last sandbox leased
// (id_range.h). Before a sandbox starts, every file owned by any sandbox range is re-owned to the
// same id in this sandbox's range, so the sandbox user owns its files whatever slot it got. The
// workspace root is re-owned last: when it already has the right owner the walk is skipped.
#pragma once

#include <functional>
#include <string>

#include "airlock/result.h"

namespace airlock::sandbox {

// Mounts image_fd (ext4, opened O_RDWR and flock()ed by the caller) at mountpoint (an existing
// empty directory) and re-owns its files to the range starting at host_base.
Result<> mountWorkspace(int image_fd, const std::string& mountpoint, uint32_t host_base);

// Re-owns every entry beneath the open directory `dir`, and it, from any sandbox range to the
// same id in the range at host_base, by fd: the sandbox wrote this tree and chose every name in
// it, so the walk (as root) opens each directory beneath its parent's fd without following a
// symlink, checks it is the inode it just saw, and sets owners relative to it. Symlinks are
// re-owned themselves; other file systems mounted inside are skipped; deeper than 512 levels
// is an error. `descended` (tests) is called with each directory's path once it is open.
Result<> reownTree(int dir, uint32_t host_base,
                   const std::function<void(const std::string&)>& descended = {});

// Lazily unmounts and removes mountpoint; quiet when it is not there. Call once every process of
// the sandbox is gone.
void unmountWorkspace(const std::string& mountpoint);

}  // namespace airlock::sandbox
