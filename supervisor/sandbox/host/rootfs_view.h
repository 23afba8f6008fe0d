// What of the host a sandbox sees: the read-only system view every language shares.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "airlock/unique_fd.h"

namespace airlock::sandbox {

struct MountEntry {
  std::string source;  // host path
  std::string target;  // sandbox path
  bool optional = true;
  bool writable = false;  // only the persistent workspace (sandbox.h) is bound read-write
  bool image = false;     // source is the workspace's ext4 image (AIRLOCK_MOUNT_IMAGE)
};

// An operator's host directory (a `hostdir` root or a directory beneath it) shown inside the
// sandbox: `dir` was opened O_PATH with openat2 beneath its root, no symlink on the way, so the
// sandbox gets exactly that directory whatever is renamed on the host meanwhile. Sandbox::create
// binds it through the fd onto a private staging point for the backend (which takes paths) and
// drops that point once the sandbox holds its own copy.
struct HostMount {
  std::shared_ptr<UniqueFd> dir;
  std::string target;  // sandbox path
  bool writable = false;
};

// /usr (which holds the interpreters and libraries) plus the few /etc entries programs read
// at start. Deliberately not the whole of /etc: no shadow, no host credentials or configs.
std::vector<MountEntry> systemView();

// The system view plus what the languages need and the profile adds, without duplicates.
// Every entry is bound read-only.
std::vector<MountEntry> composeView(const std::vector<std::string>& language_paths,
                                    const std::vector<std::string>& profile_paths);

}  // namespace airlock::sandbox
