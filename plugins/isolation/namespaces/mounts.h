// The sandbox's mount namespace: its root, the host paths bound into it, pivot_root.
//
// Everything is decided in the parent: which optional sources exist, which host top-level
// directories are merged-/usr symlinks, where mount points must be created. The child only runs
// the resulting steps (fsStepInChild), and looks each mount point inside the new root up once,
// beneath it, with no symlink followed (beneath.h): what the parent checked by path may have
// changed by then.
#pragma once

#include <cstdint>
#include <string>

#include <airlock/plugin_abi_v1.h>
#include <airlock/result.h>
#include <airlock/unique_fd.h>

#include "plan.h"

namespace airlock::isolation {

struct RootLayout {
  std::string root;   // the new root as the child sees it before pivot_root (the scratch dir)
  std::string image;  // the image directory, or empty for the synthesized root
};

// mount_setattr attributes of a read-only view of the host.
inline constexpr uint64_t kReadOnlyAttrs = 0x1 | 0x2 | 0x4;  // RDONLY | NOSUID | NODEV

// Which part of the root a plan builds. The synthesized root splits in two: the shared part is
// the same for every sandbox of a spec (the root tmpfs, /etc, the host binds, /dev's devices,
// all read-only), so it can be built once as a detached template (root_template.h) and cloned;
// the per-sandbox part is what each sandbox must own (propagation, /home/user, /tmp, /proc,
// devpts, /dev/shm, pivot_root). kAll is both, in one plan, as without a template.
enum class RootPart : uint8_t { kAll, kShared, kPerSandbox };

// Stage rootfs: private propagation, the root (a small tmpfs, or the image bound read-only),
// the standard directories, and the /home/user and /tmp tmpfs. kShared plans the template's
// tmpfs with paths relative to it (layout.root is ""); kPerSandbox attaches `shared_root` (a
// clone of the template) at the scratch dir instead of building the root.
Result<RootLayout> planRootfs(const airlock_sandbox_spec_v1& spec, Plan& plan,
                              RootPart part = RootPart::kAll, UniqueFd shared_root = {});

// Stage mounts: spec.mounts (plus, without an image, the host's /bin, /sbin, /lib* as symlinks
// on merged-/usr hosts), sorted parents first, redundant entries dropped.
Result<void> planSpecMounts(const airlock_sandbox_spec_v1& spec, const RootLayout& layout,
                            Plan& plan);

// Stage pivot_root: the synthesized root becomes read-only (the shared part), then "/" and the
// old root detached (the per-sandbox part).
void planPivotRoot(const RootLayout& layout, Plan& plan, RootPart part = RootPart::kAll);

// What the shared part of the root is made of, as a key: two specs with the same key get the
// same template. It names every bound source by device and inode, so a host file replaced by
// rename (resolv.conf, a package update) makes a new key. Empty when the spec's root cannot be
// shared: an image, or a spec mount inside /home/user or /tmp (which the per-sandbox tmpfs
// would hide).
Result<std::string> sharedRootKey(const airlock_sandbox_spec_v1& spec);

// Runs one filesystem step in the child. Returns 0 or an errno value. Async-signal-safe.
// root_fd is the new root once a kOpenRoot step has opened it (-1 before): steps with
// Step::rel are resolved beneath it.
int fsStepInChild(const Step& step, int root_fd);

// Lexically clean absolute path: no empty or "." components, no trailing slash; ".." refused.
Result<std::string> cleanAbsolutePath(std::string_view path, std::string_view what);

}  // namespace airlock::isolation
