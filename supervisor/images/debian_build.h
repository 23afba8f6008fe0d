// `airlock image build SPEC.toml`: a root filesystem from the Debian archive, made by
// mmdebstrap (root mode) in a staging directory of the store.
//
// mmdebstrap runs in a private mount namespace (unshare -m): the /proc, /sys and /dev it mounts
// in the tree, and the bind of the package cache, vanish with it however it ends, so removing a
// failed build never walks into a host mount. Packages come from the host's apt cache
// (/var/cache/apt/archives, bound into the tree while apt runs and unbound before mmdebstrap's
// cleanup), and what a build downloads stays there for the next one.
#pragma once

#include <string>
#include <vector>

#include "airlock/result.h"
#include "supervisor/images/spec.h"
#include "supervisor/images/tool_run.h"

namespace airlock::images {

struct BuildOptions {
  std::string apt_cache = "/var/cache/apt/archives";  // "": download every package afresh
  Progress progress;
};

struct BuildResult {
  std::string digest;                 // sha256 of canonicalSpec + the installed packages
  std::vector<std::string> packages;  // "name version arch", sorted: what dpkg installed
  ImageSpec resolved;                 // the spec with the host's suite and mirror filled in
};

// The spec with suite and mirror defaulted from the host (/etc/os-release, apt's sources).
Result<ImageSpec> resolveSpec(ImageSpec spec);

// Builds `spec` into `rootfs` (which must not exist yet) and finishes it for sandboxes.
Result<BuildResult> buildDebianRootfs(const ImageSpec& spec, const std::string& rootfs,
                                      const BuildOptions& options);

}  // namespace airlock::images
