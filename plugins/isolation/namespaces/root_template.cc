#include "root_template.h"

#include <fcntl.h>
#include <linux/mount.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>

#include "beneath.h"
#include "dev.h"
#include "etc_files.h"
#include "mounts.h"

namespace airlock::isolation {
namespace {

uint64_t attrsOf(unsigned long ms_flags) {
  uint64_t a = 0;
  if (ms_flags & MS_RDONLY) a |= MOUNT_ATTR_RDONLY;
  if (ms_flags & MS_NOSUID) a |= MOUNT_ATTR_NOSUID;
  if (ms_flags & MS_NODEV) a |= MOUNT_ATTR_NODEV;
  if (ms_flags & MS_NOEXEC) a |= MOUNT_ATTR_NOEXEC;
  return a;
}

// A new, detached tmpfs: fsopen + fsconfig("size=..,mode=..") + fsmount.
UniqueFd newTmpfs(const char* data, unsigned long ms_flags) {
  UniqueFd fs(static_cast<int>(::syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC)));
  if (!fs) return {};
  // As mount(2) names it in mountinfo ("none" otherwise).
  if (::syscall(SYS_fsconfig, fs.get(), FSCONFIG_SET_STRING, "source", "tmpfs", 0) != 0) return {};
  std::string_view opts = data != nullptr ? data : "";
  while (!opts.empty()) {
    size_t comma = opts.find(',');
    std::string opt(opts.substr(0, comma));
    opts = comma == std::string_view::npos ? std::string_view() : opts.substr(comma + 1);
    size_t eq = opt.find('=');
    if (eq == std::string::npos) return {};
    std::string key = opt.substr(0, eq), value = opt.substr(eq + 1);
    if (::syscall(SYS_fsconfig, fs.get(), FSCONFIG_SET_STRING, key.c_str(), value.c_str(), 0) != 0)
      return {};
  }
  if (::syscall(SYS_fsconfig, fs.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0) return {};
  return UniqueFd(
      static_cast<int>(::syscall(SYS_fsmount, fs.get(), FSMOUNT_CLOEXEC, attrsOf(ms_flags))));
}

// Attaches tree at `at` under root. The mount point is looked up beneath root with no symlink
// followed (beneath.h): this runs in the supervisor, in the host's mount namespace, where a
// symlink in a bound host directory would otherwise lead the mount onto the host's own tree.
int attach(int tree, int root, const char* at) {
  UniqueFd target(openBeneath(root, at));
  if (!target) return -1;
  return static_cast<int>(::syscall(SYS_move_mount, tree, "", target.get(), "",
                                    MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH));
}

// One step of a RootPart::kShared plan at `rel` under the detached mount `root`; 0 or an errno.
// Files and directories get their mode with fchmod: the supervisor's umask is not the child's.
int applyStep(int root, const std::string& rel, const Step& step) {
  const char* at = rel.c_str();
  switch (step.kind) {
    case StepKind::kMkdir:
      if (::mkdirat(root, at, step.mode) != 0) return errno == EEXIST ? 0 : errno;
      return ::fchmodat(root, at, step.mode, 0) == 0 ? 0 : errno;
    case StepKind::kMkfile:
    case StepKind::kWriteFile: {
      int flags = O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_CREAT |
                  (step.kind == StepKind::kWriteFile ? O_WRONLY | O_TRUNC : O_RDONLY);
      UniqueFd fd(::openat(root, at, flags, step.mode));
      if (!fd) return errno;
      if (::fchmod(fd.get(), step.mode) != 0) return errno;
      for (size_t done = 0; step.kind == StepKind::kWriteFile && done < step.len;) {
        ssize_t n = ::write(fd.get(), step.source + done, step.len - done);
        if (n < 0 && errno != EINTR) return errno;
        if (n > 0) done += static_cast<size_t>(n);
      }
      return 0;
    }
    case StepKind::kSymlink:
      return ::symlinkat(step.source, root, at) == 0 ? 0 : errno;
    case StepKind::kMoveMount:
      return attach(step.fd, root, at) == 0 ? 0 : errno;
    case StepKind::kMount: {
      UniqueFd tree;
      if (step.flags & MS_BIND) {
        unsigned rec = (step.flags & MS_REC) ? AT_RECURSIVE : 0;
        tree.reset(static_cast<int>(::syscall(SYS_open_tree, AT_FDCWD, step.source,
                                              OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | rec)));
      } else if (step.fstype != nullptr && std::strcmp(step.fstype, "tmpfs") == 0) {
        tree = newTmpfs(step.data, step.flags);
      } else {
        return EINVAL;  // nothing else belongs in the shared part
      }
      if (!tree) return errno;
      return attach(tree.get(), root, at) == 0 ? 0 : errno;
    }
    case StepKind::kSetAttr: {
      UniqueFd target(openBeneath(root, at));
      if (!target) return errno;
      struct mount_attr attr = {};
      attr.attr_set = step.flags;
      unsigned flags = AT_EMPTY_PATH | (step.mode != 0 ? AT_RECURSIVE : 0);
      return ::syscall(SYS_mount_setattr, target.get(), "", flags, &attr, sizeof attr) == 0 ? 0
                                                                                            : errno;
    }
    default:
      return EINVAL;
  }
}

}  // namespace

Result<UniqueFd> buildDetachedTree(const Plan& plan, int* failed_errno) {
  auto steps = plan.steps();
  if (steps.empty() || steps[0].kind != StepKind::kMount || steps[0].path == nullptr ||
      steps[0].path[0] != '\0' || steps[0].fstype == nullptr ||
      std::strcmp(steps[0].fstype, "tmpfs") != 0)
    return fail("root template: the plan does not start with its tmpfs");
  UniqueFd root = newTmpfs(steps[0].data, steps[0].flags);
  if (!root) return sysError("fsmount(tmpfs)", "root template");
  // A tmpfs inside the tree (/dev) is filled and made read-only while still detached on its
  // own, then attached: the kernel refuses mount_setattr on a mount below a detached root.
  struct Sub {
    std::string at;
    UniqueFd fd;
  };
  std::optional<Sub> sub;
  auto attachSub = [&]() -> int {
    if (!sub) return 0;
    int err = attach(sub->fd.get(), root.get(), sub->at.c_str()) == 0 ? 0 : errno;
    sub.reset();
    return err;
  };
  for (uint32_t i = 1; i < steps.size(); ++i) {
    const Step& step = steps[i];
    std::string rel = step.path != nullptr && step.path[0] == '/' ? step.path + 1 : "";
    int err = 0;
    if (step.kind == StepKind::kMount && !(step.flags & MS_BIND) && !rel.empty()) {
      err = attachSub();
      if (err == 0) {
        sub = Sub{rel, newTmpfs(step.data, step.flags)};
        if (!sub->fd) err = errno != 0 ? errno : EINVAL;
      }
    } else if (sub && (rel == sub->at || rel.starts_with(sub->at + "/"))) {
      err = applyStep(sub->fd.get(), rel == sub->at ? "" : rel.substr(sub->at.size() + 1), step);
    } else {
      err = attachSub();
      if (err == 0) err = applyStep(root.get(), rel, step);
    }
    if (err == 0 && i + 1 == steps.size()) err = attachSub();
    if (err != 0) {
      if (failed_errno != nullptr) *failed_errno = err;
      return fail("root template: " + plan.describe({static_cast<int32_t>(step.stage), err, i}));
    }
  }
  return root;
}

RootTemplates::RootTemplates() {
  const std::string env =
      std::getenv("AIRLOCK_ROOT_TEMPLATES") != nullptr ? std::getenv("AIRLOCK_ROOT_TEMPLATES") : "";
  enabled_ = !(env == "off" || env == "0" || env == "false" || env == "no");
  if (enabled_ && !(env.empty() || env == "on" || env == "1" || env == "true" || env == "yes"))
    setting_error_ = "AIRLOCK_ROOT_TEMPLATES='" + env +
                     "' is neither on (on, 1, true, yes) nor off (off, 0, false, no): left on";
}

UniqueFd RootTemplates::cloneFor(const airlock_sandbox_spec_v1& spec, std::string& why) {
  std::call_once(setting_said_, [&] { why = setting_error_; });
  if (!enabled_) return UniqueFd();
  auto key = sharedRootKey(spec);
  if (!key || key->empty()) return UniqueFd();

  std::shared_ptr<UniqueFd> tree;
  {
    std::lock_guard lock(mu_);
    if (unsupported_) return UniqueFd();
    auto it = std::find_if(templates_.begin(), templates_.end(),
                           [&](const auto& t) { return t.first == *key; });
    if (it != templates_.end()) {
      templates_.splice(templates_.begin(), templates_, it);
      tree = it->second;
    } else {
      // Built under the lock: it is rare, and two threads never build the same one. Even the
      // first sandbox of a spec goes through a template (it costs what building the root in the
      // child does), so every sandbox on this kernel sees the same root, owners included.
      Plan plan;
      RootLayout shared;
      bool planned = static_cast<bool>(planRootfs(spec, plan, RootPart::kShared));
      if (planned) {
        planEtcFiles(spec, shared, plan);
        planned = static_cast<bool>(planSpecMounts(spec, shared, plan));
      }
      if (!planned) return UniqueFd();  // the full plan will say what is wrong
      planDev(shared, plan, RootPart::kShared);
      planPivotRoot(shared, plan, RootPart::kShared);
      int err = 0;
      auto built = buildDetachedTree(plan, &err);
      if (!built) {
        // The kernel refusing detached trees (before 6.15: EINVAL) is for good; anything else
        // (a bound source gone between the key and the build) is this sandbox's only.
        if (err == EINVAL || err == EPERM || err == ENOSYS || err == EOPNOTSUPP || err == 0) {
          unsupported_ = true;
          why = built.error().message() + "; every sandbox builds its own root from now on";
        }
        return UniqueFd();
      }
      tree = std::make_shared<UniqueFd>(std::move(*built));
      templates_.emplace_front(*key, tree);
      if (templates_.size() > kMaxTemplates) templates_.pop_back();
    }
  }
  UniqueFd copy(static_cast<int>(
      ::syscall(SYS_open_tree, tree->get(), "",
                OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH)));
  if (!copy) {
    std::lock_guard lock(mu_);
    unsupported_ = true;
    why = sysError("open_tree(OPEN_TREE_CLONE)", "root template").error().message() +
          "; every sandbox builds its own root from now on";
  }
  return copy;
}

}  // namespace airlock::isolation
