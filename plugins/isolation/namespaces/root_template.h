// The shared part of a synthesized root (mounts.h RootPart::kShared), built once as a detached
// mount tree and cloned for each sandbox of the same spec.
//
// Without it every sandbox rebuilds the same read-only view: a tmpfs, ~60 mkdir/creat/symlink
// calls for /etc and the mount points, ~20 open_tree + mount_setattr in the supervisor and as many
// move_mounts in the child, a /dev tmpfs with six binds. With it the supervisor makes one
// recursive open_tree(OPEN_TREE_CLONE) of the template (~10 us) and the child attaches it with
// one move_mount; /home/user, /tmp, /proc, devpts and /dev/shm are still each sandbox's own.
//
// The template is read-only and never attached anywhere: the host's mount table does not show
// it, and it goes when the last clone and the cache let go of it. Its tmpfs belongs to the host's
// root, not to the sandbox's, so in the sandbox /, /etc's synthesized files and /dev show as
// owned by nobody, like /usr (the sandbox's own root user cannot change them either way). Building
// it needs a kernel that mounts onto a detached tree and clones one (Linux 6.15); older kernels,
// images, and specs that bind into /home/user or /tmp take the full per-sandbox plan.
// AIRLOCK_ROOT_TEMPLATES=off (or 0, false, no) turns it off for the process.
#pragma once

#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <airlock/plugin_abi_v1.h>
#include <airlock/result.h>
#include <airlock/unique_fd.h>

#include "plan.h"

namespace airlock::isolation {

// Builds a detached tree from a RootPart::kShared plan (paths relative to the tree's root). On
// failure *failed_errno (when given) is the errno of the step that failed.
Result<UniqueFd> buildDetachedTree(const Plan& plan, int* failed_errno = nullptr);

class RootTemplates {
 public:
  RootTemplates();

  // A private clone of the template for spec, or an invalid fd when this sandbox builds its
  // root itself (see the top of this file; a spec the planner refuses is refused there, by
  // name). Sets `why` when templates just turned off for good, or AIRLOCK_ROOT_TEMPLATES holds
  // a value that is not on/off: something to log once.
  UniqueFd cloneFor(const airlock_sandbox_spec_v1& spec, std::string& why);

 private:
  static constexpr size_t kMaxTemplates = 4;  // distinct specs kept at once

  bool enabled_;
  std::string setting_error_;  // AIRLOCK_ROOT_TEMPLATES unreadable: said on the first start
  std::once_flag setting_said_;
  std::mutex mu_;
  bool unsupported_ = false;  // the kernel refused once: no more attempts
  // Most recently used first.
  std::list<std::pair<std::string, std::shared_ptr<UniqueFd>>> templates_;
};

}  // namespace airlock::isolation
