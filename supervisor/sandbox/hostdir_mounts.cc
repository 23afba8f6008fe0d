#include "supervisor/sandbox/hostdir_mounts.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "supervisor/sandbox/paths.h"

namespace airlock::sandbox {
namespace {

constexpr std::string_view kPrefix = "hostdir:";

bool listed(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// `sub` beneath `root_fd`, as the hostdir transfer plugin resolves it: never a `..`, a
// symlink (the last component included), a magic link or another file system.
Result<UniqueFd> openBeneath(int root_fd, const std::string& sub) {
  open_how how{};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
  const std::string p = sub.empty() ? "." : sub;
  for (int attempt = 0;; ++attempt) {
    const long fd = ::syscall(SYS_openat2, root_fd, p.c_str(), &how, sizeof how);
    if (fd >= 0) return UniqueFd(static_cast<int>(fd));
    const int e = errno;
    if ((e == EAGAIN || e == EINTR) && attempt < 16) continue;  // a rename raced the lookup
    switch (e) {
      case EXDEV:
        return fail("escapes its root (or crosses a mount point)");
      case ELOOP:
        return fail("a symlink on the way (symlinks are never followed)");
      case ENOENT:
        return fail("'" + p + "' does not exist in the root");
      case ENOTDIR:
        return fail("'" + p + "' is not a directory");
      default:
        return fail("'" + p + "': " + std::strerror(e));
    }
  }
}

}  // namespace

SResult<std::vector<HostMount>> openHostdirMounts(const policy::Profile& profile,
                                                  const policy::TransferSettings& host,
                                                  std::vector<MountSpec>& specs) {
  std::vector<HostMount> out;
  std::set<std::string> targets;
  const auto& plugins = profile.transfer.plugins;
  const bool may_use = listed(plugins, "hostdir") || listed(plugins, "airlock.transfer.hostdir");
  const auto& allowed = profile.transfer.hostdir.roots;
  for (size_t i = 0; i < specs.size(); ++i) {
    MountSpec& m = specs[i];
    const std::string at = "mounts[" + std::to_string(i) + "] '" + m.source + "': ";
    auto bad = [&](const std::string& why) {
      return serviceError(ErrorCode::kBadRequest, at + why);
    };
    auto forbidden = [&](const std::string& why) {
      return serviceError(ErrorCode::kForbidden, at + why);
    };
    if (!m.source.starts_with(kPrefix))
      return bad("not a hostdir: source (hostdir:ROOT or hostdir:ROOT/sub/dir)");
    if (!may_use)
      return forbidden("profile '" + profile.name + "': transfer.plugins does not list 'hostdir'");
    const std::string rest = m.source.substr(kPrefix.size());
    const size_t slash = rest.find('/');
    const std::string root = rest.substr(0, slash);
    std::string sub = slash == std::string::npos ? "" : rest.substr(slash + 1);
    while (!sub.empty() && sub.back() == '/') sub.pop_back();
    if (root.empty()) return bad("names no root (hostdir:ROOT/sub/dir)");
    for (size_t from = 0; from <= sub.size();) {
      const size_t to = std::min(sub.find('/', from), sub.size());
      if (sub.compare(from, to - from, "..") == 0 && to - from == 2)
        return bad("escapes its root (a '..' component)");
      from = to + 1;
    }
    auto declared = host.roots.find(root);
    if (declared == host.roots.end()) {
      std::string names;
      for (const auto& [n, p] : host.roots) names += (names.empty() ? "" : ", ") + n;
      return bad("no root '" + root + "' (" +
                 (names.empty() ? "none declared in [transfer] roots" : "declared: " + names) +
                 ")");
    }
    if (!listed(allowed, "*") && !listed(allowed, root))
      return forbidden("profile '" + profile.name + "': transfer.hostdir.roots does not list '" +
                       root + "'");
    if (m.writable && !listed(host.writable_roots, root))
      return forbidden("root '" + root +
                       "' is not in [transfer] writable_roots: it is mounted "
                       "read-only only");
    // Where the sandbox sees it: under /mnt, one mount per place.
    if (m.path.empty()) m.path = "/mnt/" + root + (sub.empty() ? "" : "/" + sub);
    auto target = normalizePath(m.path, "path", Relative::kRefuse);
    if (!target) return bad(target.error().message());
    if (!target->starts_with("/mnt/"))
      return bad("path '" + m.path + "': host directories are shown under /mnt");
    m.path = *target;
    if (!targets.insert(m.path).second) return bad("path '" + m.path + "' is mounted twice");

    UniqueFd root_fd(::open(declared->second.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!root_fd)
      return serviceError(ErrorCode::kInternal, at + "root '" + root + "' (" + declared->second +
                                                    "): " + std::strerror(errno));
    auto dir = openBeneath(root_fd.get(), sub);
    if (!dir) return bad(dir.error().message());
    out.push_back({std::make_shared<UniqueFd>(std::move(*dir)), m.path, m.writable});
  }
  return out;
}

}  // namespace airlock::sandbox
