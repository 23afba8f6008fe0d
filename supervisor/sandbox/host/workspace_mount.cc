#include "supervisor/sandbox/host/workspace_mount.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <vector>

#include "airlock/unique_fd.h"

#include "supervisor/sandbox/host/id_range.h"
#include "supervisor/sandbox/host/sandbox.h"
#include "supervisor/sys/loop_mount.h"

namespace airlock::sandbox {

namespace {

constexpr uint64_t kRangesEnd = uint64_t{kIdRangeBase} + uint64_t{kIdRangeSlots} * kIdRangeSize;

// One open directory per level: deeper trees are refused rather than allowed to use up the
// supervisor's fds (the sandbox chose the depth).
constexpr size_t kMaxDepth = 512;

uint32_t remap(uint32_t id, uint32_t host_base) {
  if (id < kIdRangeBase || id >= kRangesEnd) return id;  // root, or not a sandbox's id: kept
  return host_base + (id - kIdRangeBase) % kIdRangeSize;
}

struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};
using OpenDir = std::unique_ptr<DIR, DirCloser>;

}  // namespace

Result<> reownTree(int dir, uint32_t host_base,
                   const std::function<void(const std::string&)>& descended) {
  struct stat top {};
  if (::fstat(dir, &top) != 0) return sysError("fstat", "the workspace's root");
  struct Level {
    OpenDir d;
    std::string path;  // for errors: relative to the root
  };
  std::vector<Level> stack;
  auto enter = [&](int fd, std::string path) -> Result<> {
    DIR* d = ::fdopendir(fd);
    if (d == nullptr) {
      auto e = sysError("fdopendir", path);
      ::close(fd);
      return e;
    }
    stack.push_back({OpenDir(d), std::move(path)});
    return {};
  };
  int root = ::fcntl(dir, F_DUPFD_CLOEXEC, 0);
  if (root < 0) return sysError("dup", "the workspace's root");
  if (auto r = enter(root, "."); !r) return r;
  while (!stack.empty()) {
    Level& level = stack.back();
    const int at = ::dirfd(level.d.get());
    errno = 0;
    const dirent* e = ::readdir(level.d.get());
    if (e == nullptr) {
      if (errno != 0) return sysError("readdir", level.path);
      // Post-order: a directory after its entries, so an interrupted walk is redone next time
      // (the root last; its owner says whether a walk is needed).
      struct stat st {};
      if (::fstat(at, &st) != 0) return sysError("fstat", level.path);
      const uid_t uid = remap(st.st_uid, host_base);
      const gid_t gid = remap(st.st_gid, host_base);
      if ((uid != st.st_uid || gid != st.st_gid) && ::fchown(at, uid, gid) != 0)
        return sysError("fchown", level.path);
      stack.pop_back();
      continue;
    }
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = level.path + "/" + name;
    struct stat st {};
    if (::fstatat(at, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return sysError("stat", path);
    if (S_ISDIR(st.st_mode)) {
      if (st.st_dev != top.st_dev) continue;  // another file system mounted there: not ours
      if (stack.size() >= kMaxDepth)
        return fail("deeper than " + std::to_string(kMaxDepth) + " directories", path);
      // O_NOFOLLOW, and the same inode as just seen: a name swapped for a symlink (or anything
      // else) in between fails the walk instead of leading it off the workspace.
      int fd = ::openat(at, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) return sysError("open", path);
      struct stat opened {};
      if (::fstat(fd, &opened) != 0 || opened.st_dev != st.st_dev || opened.st_ino != st.st_ino) {
        ::close(fd);
        return fail("changed while its owners were being set", path);
      }
      if (descended) descended(path);
      if (auto r = enter(fd, path); !r) return r;
      continue;
    }
    const uid_t uid = remap(st.st_uid, host_base);
    const gid_t gid = remap(st.st_gid, host_base);
    if (uid == st.st_uid && gid == st.st_gid) continue;
    // Relative to the open directory, never following a symlink (which is re-owned itself).
    if (::fchownat(at, name.c_str(), uid, gid, AT_SYMLINK_NOFOLLOW) != 0)
      return sysError("fchownat", path);
  }
  return {};
}

Result<> mountWorkspace(int image_fd, const std::string& mountpoint, uint32_t host_base) {
  if (auto r = sys::mountImage(image_fd, mountpoint, "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME); !r)
    return r;
  auto failed = [&](Error e) -> Result<> {
    unmountWorkspace(mountpoint);
    return Unexpected(std::move(e));
  };
  UniqueFd root(::open(mountpoint.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root) return failed(sysError("open", mountpoint).error());
  struct stat st {};
  if (::fstat(root.get(), &st) != 0) return failed(sysError("fstat", mountpoint).error());
  // mkfs makes an empty lost+found owned by host root, which the sandbox could neither use nor
  // remove; a workspace does not need it (e2fsck recreates it if ever run).
  (void)::unlinkat(root.get(), "lost+found", AT_REMOVEDIR);
  uint32_t user = host_base + kSandboxUid;
  if (st.st_uid == user && st.st_gid == user) return {};
  if (auto r = reownTree(root.get(), host_base); !r)
    return failed(std::move(r.error()).wrap("re-owning the workspace's files in " + mountpoint));
  if ((st.st_uid < kIdRangeBase || st.st_uid >= kRangesEnd) &&
      ::fchown(root.get(), user, user) != 0)
    return failed(sysError("fchown", mountpoint).error());
  return {};
}

void unmountWorkspace(const std::string& mountpoint) {
  // MNT_DETACH: the filesystem goes once its last user does; the loop device follows (autoclear).
  if (umount2(mountpoint.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0 && errno != EINVAL &&
      errno != ENOENT)
    return;  // still mounted: keep the directory so a later reclaim finds it
  (void)rmdir(mountpoint.c_str());
}

}  // namespace airlock::sandbox
