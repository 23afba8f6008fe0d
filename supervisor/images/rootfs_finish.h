// What a root filesystem needs to be a sandbox's root, added once when an image is made (the
// sandbox gets it read-only): the mount points every backend mounts on (/dev, /proc, /tmp,
// /home/user), a root and /home the sandbox's uid can walk, and a user for uid 1000 in
// /etc/passwd and /etc/group when the image has none (getpwuid, shells, Python's site). Device
// nodes in /dev are removed: every backend mounts its own /dev.
//
// An imported tree is hostile: every path is resolved beneath the rootfs with no symlink on the
// way, so a symlinked /etc/passwd or /home leads to an error, never to a write on the host.
#pragma once

#include <string>

#include "airlock/result.h"

namespace airlock::images {

Result<> finishRootfs(const std::string& rootfs);

}  // namespace airlock::images
