// The sandbox's mount namespace: its root, the host paths bound into it, pivot_root.
//
// Everything is decided in the parent: which optional sources exist, which host top-level
// directories are merged-/usr symlinks, where mount points must be created. The child only runs
// the resulting steps (fsStepInChild).
#pragma once

#include <string>

#include <airlock/plugin_abi_v1.h>
#include <airlock/result.h>

#include "plan.h"

namespace airlock::isolation {

struct RootLayout {
  std::string root;   // the new root as the child sees it before pivot_root (the scratch dir)
  std::string image;  // the image directory, or empty for the synthesized root
};

// mount_setattr attributes of a read-only view of the host.
inline constexpr uint64_t kReadOnlyAttrs = 0x1 | 0x2 | 0x4;  // RDONLY | NOSUID | NODEV

// Stage rootfs: private propagation, the root (a small tmpfs, or the image bound read-only),
// the standard directories, and the /home/user and /tmp tmpfs.
Result<RootLayout> planRootfs(const airlock_sandbox_spec_v1& spec, Plan& plan);

// Stage mounts: spec.mounts (plus, without an image, the host's /bin, /sbin, /lib* as symlinks
// on merged-/usr hosts), sorted parents first, redundant entries dropped.
Result<void> planSpecMounts(const airlock_sandbox_spec_v1& spec, const RootLayout& layout,
                            Plan& plan);

// Stage pivot_root: the synthesized root becomes read-only, then "/" and the old root detached.
void planPivotRoot(const RootLayout& layout, Plan& plan);

// Runs one filesystem step in the child. Returns 0 or an errno value. Async-signal-safe.
int fsStepInChild(const Step& step);

// Lexically clean absolute path: no empty or "." components, no trailing slash; ".." refused.
Result<std::string> cleanAbsolutePath(std::string_view path, std::string_view what);

}  // namespace airlock::isolation
