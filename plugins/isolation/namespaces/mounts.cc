#include "mounts.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <set>
#include <vector>

#include "beneath.h"
#include "etc_files.h"

namespace airlock::isolation {
namespace {

static_assert(kReadOnlyAttrs == (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV));

// The host's top-level system directories: symlinks into /usr on merged-/usr hosts.
constexpr const char* kCompatDirs[] = {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};

// Mount points the image must provide (created in the synthesized root).
constexpr const char* kImageDirs[] = {"/dev", "/proc", "/tmp", "/home/user"};

bool isUnder(const std::string& path, const std::string& dir) {
  if (dir == "/") return true;
  return path == dir ||
         (path.size() > dir.size() && path.starts_with(dir) && path[dir.size()] == '/');
}

std::string parentOf(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

std::string joinRoot(const std::string& root, const std::string& path) {
  return path == "/" ? root : root + path;
}

// The child looks up the scratch dir as an unprivileged host uid: every directory on the way
// must let others search it.
Result<void> checkReachable(const std::string& path, const std::string& what) {
  for (std::string dir = parentOf(path);; dir = parentOf(dir)) {
    struct stat st;
    if (::stat(dir.c_str(), &st) != 0) return sysError("stat(" + what + " parent)", dir);
    if ((st.st_mode & S_IXOTH) == 0)
      return fail(
          what + " '" + path + "' is not reachable by the sandbox's uid: a parent lacks o+x", dir);
    if (dir == "/") return {};
  }
}

enum class Kind { kDir, kFile, kSymlink };

struct Entry {
  std::string source;
  std::string target;
  bool readonly = true;
  bool optional = false;
  Kind kind = Kind::kDir;
  std::string link;  // kSymlink: the link's contents
  dev_t dev = 0;     // of the source, for sharedRootKey
  ino_t ino = 0;
};

Result<std::string> readLink(const std::string& path) {
  char buf[PATH_MAX];
  ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
  if (n < 0) return sysError("readlink", path);
  if (static_cast<size_t>(n) == sizeof buf) return fail("symlink target too long", path);
  return std::string(buf, static_cast<size_t>(n));
}

// Refuses symlinks on the way from the image root to path: before pivot_root they would resolve
// against the host's root, and the image is not trusted to point the mounts anywhere. This is
// the early, clear refusal of an image that ships one; the child's lookup beneath the root
// (beneath.h) is what enforces it against one swapped in after this check.
Result<void> checkNoSymlinkInImage(const std::string& image, const std::string& path) {
  std::string at = image;
  size_t i = 1;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    at += "/" + path.substr(i, j - i);
    struct stat st;
    if (::lstat(at.c_str(), &st) != 0) return {};  // missing: the child will name it
    if (S_ISLNK(st.st_mode)) return fail("image path is a symlink", path);
    i = j + 1;
  }
  return {};
}

// Turns spec entries into resolved entries: missing optional sources dropped, host symlinks
// kept as symlinks, sorted parents first, redundant entries removed.
Result<std::vector<Entry>> resolveEntries(const airlock_sandbox_spec_v1& spec,
                                          const RootLayout& layout) {
  const bool image = !layout.image.empty();
  std::vector<Entry> entries;
  for (size_t i = 0; i < spec.mounts_len; ++i) {
    const airlock_mount_v1& m = spec.mounts[i];
    if (m.source == nullptr || m.source[0] == '\0')
      return fail("mount entry " + std::to_string(i) + " has no source");
    auto source = cleanAbsolutePath(m.source, "mount source");
    if (!source) return Unexpected(source.error());
    auto target = cleanAbsolutePath(
        m.target != nullptr && m.target[0] != '\0' ? m.target : m.source, "mount target");
    if (!target) return Unexpected(target.error());
    if (*target == "/" || isUnder(*target, "/proc") || isUnder(*target, "/dev"))
      return fail("mount target is reserved by the sandbox (/, /proc, /dev)", *target);
    entries.push_back({.source = *source,
                       .target = *target,
                       .readonly = (m.flags & AIRLOCK_MOUNT_READONLY) != 0,
                       .optional = (m.flags & AIRLOCK_MOUNT_OPTIONAL) != 0});
  }
  if (!image) {
    for (const char* dir : kCompatDirs) {
      bool listed = std::any_of(entries.begin(), entries.end(),
                                [&](const Entry& e) { return e.target == dir; });
      if (!listed) entries.push_back({.source = dir, .target = dir, .optional = true});
    }
  }

  std::vector<Entry> resolved;
  // Most entries share a parent (a dozen files of /etc): each realpath() is a readlink per
  // component, so it is asked once per parent. A syscall is dear in a VM and this runs for
  // every sandbox.
  std::map<std::string, std::string> real_parents;
  for (Entry& e : entries) {
    struct stat st;
    if (::lstat(e.source.c_str(), &st) != 0) {
      if (errno == ENOENT && e.optional) continue;
      return sysError("stat(mount source for " + e.target + ")", e.source);
    }
    if (S_ISLNK(st.st_mode) && !image && e.source == e.target) {
      // Merged /usr: /bin → usr/bin is recreated as a symlink instead of a second bind.
      auto link = readLink(e.source);
      if (!link) return Unexpected(link.error());
      e.kind = Kind::kSymlink;
      e.link = *link;
    } else {
      // Only a symlink needs following: for anything else lstat already said what it is.
      if (S_ISLNK(st.st_mode) && ::stat(e.source.c_str(), &st) != 0) {
        if (errno == ENOENT && e.optional) continue;
        return sysError("stat(mount source for " + e.target + ")", e.source);
      }
      e.kind = S_ISDIR(st.st_mode) ? Kind::kDir : Kind::kFile;
      if (!image && e.source == e.target && e.target != "/") {
        // A path under a symlinked directory (/lib/x on merged /usr) is mounted where it
        // really is, so that it dedups against /usr and never resolves through a host link.
        std::string parent = parentOf(e.source);
        auto known = real_parents.find(parent);
        if (known == real_parents.end()) {
          char real[PATH_MAX];
          if (::realpath(parent.c_str(), real) == nullptr)
            return sysError("realpath(mount source)", parent);
          known = real_parents.emplace(parent, real).first;
        }
        const std::string& dir = known->second;
        e.source = e.target = (dir == "/" ? "" : dir) + e.source.substr(e.source.rfind('/'));
      }
    }
    e.dev = st.st_dev;
    e.ino = st.st_ino;
    resolved.push_back(std::move(e));
  }

  std::stable_sort(resolved.begin(), resolved.end(),
                   [](const Entry& a, const Entry& b) { return a.target < b.target; });
  std::vector<Entry> kept;
  for (Entry& e : resolved) {
    bool redundant = std::any_of(kept.begin(), kept.end(), [&](const Entry& k) {
      if (k.target == e.target) return true;  // first entry for a target wins
      // The same host path already visible through a parent bind with the same access.
      return k.kind != Kind::kSymlink && k.source == k.target && e.source == e.target &&
             k.readonly == e.readonly && isUnder(e.target, k.target);
    });
    if (!redundant) kept.push_back(std::move(e));
  }
  return kept;
}

// A tiny tmpfs that holds the mount points and /etc; it is made read-only before pivot_root.
void planRootTmpfs(const std::string& root, Plan& plan) {
  constexpr Stage s = Stage::kRootfs;
  plan.mount(s, "tmpfs", root, MS_NOSUID | MS_NODEV, "size=1m,mode=0755", "/");
  if (!root.empty()) plan.openRoot(s, root);  // the template's ("") is a detached tree
  for (const char* dir : {"/etc", "/home", "/proc", "/dev", "/tmp"})
    plan.mkdir(s, root + dir, 0755, dir);
  plan.mkdir(s, root + "/home/user", 0700, "/home/user");
}

}  // namespace

Result<std::string> cleanAbsolutePath(std::string_view path, std::string_view what) {
  if (path.empty() || path[0] != '/')
    return fail(std::string(what) + " is not absolute", std::string(path));
  std::string out;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string_view comp = path.substr(i, j - i);
    if (comp == "..") return fail(std::string(what) + " contains '..'", std::string(path));
    if (!comp.empty() && comp != ".") {
      out += '/';
      out += comp;
    }
    i = j + 1;
  }
  return out.empty() ? std::string("/") : out;
}

Result<RootLayout> planRootfs(const airlock_sandbox_spec_v1& spec, Plan& plan, RootPart part,
                              UniqueFd shared_root) {
  constexpr Stage s = Stage::kRootfs;
  if (part == RootPart::kShared) {
    // The template's own tmpfs, at "" (the root of the detached tree).
    planRootTmpfs("", plan);
    return RootLayout{};
  }
  if (spec.scratch_dir == nullptr) return fail("scratch_dir is not set");
  auto root = cleanAbsolutePath(spec.scratch_dir, "scratch_dir");
  if (!root) return Unexpected(root.error());
  struct stat st;
  if (::stat(root->c_str(), &st) != 0) return sysError("stat(scratch_dir)", *root);
  if (!S_ISDIR(st.st_mode)) return fail("scratch_dir is not a directory", *root);
  if (auto ok = checkReachable(*root, "scratch_dir"); !ok) return Unexpected(ok.error());
  RootLayout layout{.root = *root};

  // Our mounts must never propagate into the host's namespace, nor the host's into ours.
  plan.add({.stage = s, .kind = StepKind::kMakePrivate, .path = plan.keep("/")},
           "mount(MS_REC|MS_PRIVATE)", "/");
  if (part == RootPart::kPerSandbox) {
    plan.attachTree(s, std::move(shared_root), layout.root, "/");
    plan.openRoot(s, layout.root);
  } else if (spec.image_dir != nullptr && spec.image_dir[0] != '\0') {
    auto image = cleanAbsolutePath(spec.image_dir, "image_dir");
    if (!image) return Unexpected(image.error());
    layout.image = *image;
    if (::stat(image->c_str(), &st) != 0) return sysError("stat(image_dir)", *image);
    if (!S_ISDIR(st.st_mode)) return fail("image_dir is not a directory", *image);
    // The child walks into the image to its mount points with the sandbox's unprivileged uid.
    for (const char* dir : {"", "/home"}) {
      std::string host = *image + dir;
      if (::stat(host.c_str(), &st) == 0 && (st.st_mode & S_IXOTH) == 0)
        return fail("image directory is not searchable by the sandbox's uid (needs o+x)", host);
    }
    for (const char* dir : kImageDirs) {
      auto ok = checkNoSymlinkInImage(*image, dir);
      if (!ok) return Unexpected(ok.error());
      std::string host = *image + dir;
      if (::lstat(host.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        return fail("image '" + *image +
                        "' lacks a directory the sandbox mounts on (it needs /dev, /proc, /tmp "
                        "and /home/user)",
                    dir);
      }
    }
    // The image is the root, read-only: recursive so its own submounts come along.
    auto bound = plan.bindHost(s, *image, layout.root, true, kReadOnlyAttrs, "/");
    if (!bound) return Unexpected(bound.error());
    plan.openRoot(s, layout.root);
  } else {
    planRootTmpfs(layout.root, plan);
  }
  plan.mount(s, "tmpfs", layout.root + "/home/user", MS_NOSUID | MS_NODEV,
             "size=" + std::to_string(spec.workspace_bytes) + ",mode=0700,uid=" +
                 std::to_string(spec.user_uid) + ",gid=" + std::to_string(spec.user_gid),
             "/home/user");
  plan.mount(s, "tmpfs", layout.root + "/tmp", MS_NOSUID | MS_NODEV,
             "size=" + std::to_string(spec.tmp_bytes) + ",mode=1777", "/tmp");
  return layout;
}

Result<void> planSpecMounts(const airlock_sandbox_spec_v1& spec, const RootLayout& layout,
                            Plan& plan) {
  auto entries = resolveEntries(spec, layout);
  if (!entries) return Unexpected(entries.error());
  const bool image = !layout.image.empty();

  // Mounts so far and whether new mount points may be created inside them (our tmpfs: yes;
  // host binds and the image: never, that would write to the host).
  std::vector<std::pair<std::string, bool>> mounts = {
      {"/", !image}, {"/home/user", true}, {"/tmp", true}};
  std::set<std::string> existing = {"/", "/etc", "/home", "/home/user", "/proc", "/dev", "/tmp"};
  constexpr Stage s = Stage::kMounts;

  for (const Entry& e : *entries) {
    const std::pair<std::string, bool>* host = nullptr;
    for (const auto& m : mounts) {
      if (isUnder(e.target, m.first) && (host == nullptr || m.first.size() > host->first.size()))
        host = &m;
    }
    bool creatable = host->second && e.target != host->first;
    std::string at = joinRoot(layout.root, e.target);
    if (creatable) {
      std::vector<std::string> missing;
      for (std::string p = parentOf(e.target); !existing.contains(p) && p != host->first;
           p = parentOf(p))
        missing.push_back(p);
      for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
        plan.mkdir(s, joinRoot(layout.root, *it), 0755, *it);
        existing.insert(*it);
      }
      if (e.kind == Kind::kSymlink) {
        plan.symlink(s, e.link, at, e.target);
        continue;
      }
      if (e.kind == Kind::kDir) {
        if (!existing.contains(e.target)) plan.mkdir(s, at, 0755, e.target);
      } else {
        plan.mkfile(s, at, e.target);
      }
    } else {
      if (e.kind == Kind::kSymlink)
        return fail("cannot create a symlink inside host mount '" + host->first + "'", e.target);
      if (image && host->first == "/") {
        auto ok = checkNoSymlinkInImage(layout.image, e.target);
        if (!ok) return Unexpected(ok.error());
      }
    }
    existing.insert(e.target);
    // nosuid/nodev on writable binds too: a host file's setuid bit or device node gives nothing.
    auto bound = plan.bindHost(s, e.source, at, true,
                               e.readonly ? kReadOnlyAttrs : (MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV),
                               e.target);
    if (!bound) return Unexpected(bound.error());
    mounts.emplace_back(e.target, false);
  }
  return {};
}

void planPivotRoot(const RootLayout& layout, Plan& plan, RootPart part) {
  constexpr Stage s = Stage::kPivotRoot;
  if (part != RootPart::kPerSandbox && layout.image.empty())
    plan.setAttr(s, layout.root, kReadOnlyAttrs, false, "/");
  if (part == RootPart::kShared) return;
  plan.add({.stage = s, .kind = StepKind::kPivotRoot, .path = plan.keep(layout.root)}, "pivot_root",
           layout.root);
}

Result<std::string> sharedRootKey(const airlock_sandbox_spec_v1& spec) {
  if (spec.image_dir != nullptr && spec.image_dir[0] != '\0') return std::string();
  auto entries = resolveEntries(spec, RootLayout{});
  if (!entries) return Unexpected(entries.error());
  std::string key;
  for (const Entry& e : *entries) {
    if (isUnder(e.target, "/home/user") || isUnder(e.target, "/tmp")) return std::string();
    key += e.target + '\0' + e.source + '\0' + e.link + '\0' +
           std::to_string(static_cast<int>(e.kind)) + (e.readonly ? "r" : "w") +
           std::to_string(e.dev) + ':' + std::to_string(e.ino) + '\n';
  }
  // What planEtcFiles writes.
  const char* resolv = resolvConf(spec);
  key += std::to_string(spec.user_uid) + ':' + std::to_string(spec.user_gid) + '\0' +
         (spec.hostname != nullptr ? spec.hostname : "") + '\0' +
         std::to_string(spec.network_mode) + '\0' + (resolv != nullptr ? resolv : "") + '\n';
  return key;
}

int fsStepInChild(const Step& step, int root_fd) {
  // A mount point inside the new root, looked up once beneath it (beneath.h); closed on return.
  struct Beneath {
    int fd = -1;
    ~Beneath() {
      if (fd >= 0) ::close(fd);
    }
  } target, source;
  if (step.rel != nullptr && (target.fd = openBeneath(root_fd, step.rel)) < 0) return errno;
  if (step.source_rel != nullptr && (source.fd = openBeneath(root_fd, step.source_rel)) < 0)
    return errno;

  int rc = 0;
  switch (step.kind) {
    case StepKind::kMakePrivate:
      rc = ::mount(nullptr, step.path, nullptr, MS_REC | MS_PRIVATE, nullptr);
      break;
    case StepKind::kMount: {
      // CAP_SYS_ADMIN in the new user namespace, which owns this mount namespace. mount(2)
      // takes paths: it is given the descriptors' /proc/self/fd links, which the kernel follows
      // to what they hold without another lookup (the host's /proc, before pivot_root).
      char at[32], from[32];
      const char* path = target.fd >= 0 ? procSelfFd(target.fd, at) : step.path;
      const char* src = source.fd >= 0 ? procSelfFd(source.fd, from) : step.source;
      rc = ::mount(src, path, step.fstype, step.flags, step.data);
      break;
    }
    case StepKind::kMoveMount:
      rc = target.fd >= 0
               ? static_cast<int>(::syscall(SYS_move_mount, step.fd, "", target.fd, "",
                                            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH))
               : static_cast<int>(::syscall(SYS_move_mount, step.fd, "", AT_FDCWD, step.path,
                                            MOVE_MOUNT_F_EMPTY_PATH));
      break;
    case StepKind::kSetAttr: {
      struct mount_attr attr = {};
      attr.attr_set = step.flags;
      unsigned flags = step.mode != 0 ? AT_RECURSIVE : 0;
      rc = target.fd >= 0 ? static_cast<int>(::syscall(SYS_mount_setattr, target.fd, "",
                                                       flags | AT_EMPTY_PATH, &attr, sizeof attr))
                          : static_cast<int>(::syscall(SYS_mount_setattr, AT_FDCWD, step.path,
                                                       flags, &attr, sizeof attr));
      break;
    }
    case StepKind::kMkdir:
      rc = ::mkdir(step.path, step.mode);
      if (rc != 0 && errno == EEXIST) rc = 0;
      break;
    case StepKind::kMkfile: {
      int fd = ::open(step.path, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, step.mode);
      if (fd < 0) return errno;
      ::close(fd);
      break;
    }
    case StepKind::kSymlink:
      rc = ::symlink(step.source, step.path);
      break;
    case StepKind::kWriteFile: {
      int fd = ::open(step.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, step.mode);
      if (fd < 0) return errno;
      size_t done = 0;
      while (done < step.len) {
        ssize_t n = ::write(fd, step.source + done, step.len - done);
        if (n < 0) {
          if (errno == EINTR) continue;
          int e = errno;
          ::close(fd);
          return e;
        }
        done += static_cast<size_t>(n);
      }
      ::close(fd);
      break;
    }
    case StepKind::kPivotRoot:
      // pivot_root(".", ".") stacks the old root on the new one; detaching it leaves no path
      // back to the host's tree.
      if (::chdir(step.path) != 0) return errno;
      if (::syscall(SYS_pivot_root, ".", ".") != 0) return errno;
      if (::umount2(".", MNT_DETACH) != 0) return errno;
      rc = ::chdir("/");
      break;
    default:
      return EINVAL;
  }
  return rc == 0 ? 0 : errno;
}

}  // namespace airlock::isolation
