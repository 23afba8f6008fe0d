#include "supervisor/sandbox/host/workspace_mount.h"

#include <ftw.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "supervisor/sandbox/host/id_range.h"
#include "supervisor/sandbox/host/sandbox.h"
#include "supervisor/sys/loop_mount.h"

namespace airlock::sandbox {

namespace {

constexpr uint64_t kRangesEnd = uint64_t{kIdRangeBase} + uint64_t{kIdRangeSlots} * kIdRangeSize;

// nftw has no context argument; one walk runs at a time per thread.
thread_local uint32_t walk_base = 0;
thread_local int walk_errno = 0;

uint32_t remap(uint32_t id) {
  if (id < kIdRangeBase || id >= kRangesEnd) return id;  // root, or not a sandbox's id: kept
  return walk_base + (id - kIdRangeBase) % kIdRangeSize;
}

int reownEntry(const char* path, const struct stat* st, int type, FTW*) {
  if (type == FTW_NS || type == FTW_DNR) {
    walk_errno = EACCES;
    return 1;
  }
  uid_t uid = remap(st->st_uid);
  gid_t gid = remap(st->st_gid);
  if (uid == st->st_uid && gid == st->st_gid) return 0;
  // FTW_PHYS: symlinks are entries of their own, never followed; lchown changes the link only.
  if (lchown(path, uid, gid) != 0) {
    walk_errno = errno;
    return 1;
  }
  return 0;
}

}  // namespace

Result<> mountWorkspace(int image_fd, const std::string& mountpoint, uint32_t host_base) {
  if (auto r = sys::mountImage(image_fd, mountpoint, "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME); !r)
    return r;
  struct stat root {};
  if (stat(mountpoint.c_str(), &root) != 0) {
    auto e = sysError("stat", mountpoint);
    unmountWorkspace(mountpoint);
    return e;
  }
  // mkfs makes an empty lost+found owned by host root, which the sandbox could neither use nor
  // remove; a workspace does not need it (e2fsck recreates it if ever run).
  (void)rmdir((mountpoint + "/lost+found").c_str());
  uint32_t user = host_base + kSandboxUid;
  if (root.st_uid == user && root.st_gid == user) return {};
  walk_base = host_base;
  walk_errno = 0;
  // Post-order (FTW_DEPTH): the root comes last, so an interrupted walk is redone next time.
  int rc = nftw(mountpoint.c_str(), reownEntry, 32, FTW_PHYS | FTW_MOUNT | FTW_DEPTH);
  if (rc == 0 && (root.st_uid < kIdRangeBase || root.st_uid >= kRangesEnd) &&
      lchown(mountpoint.c_str(), user, user) != 0)
    rc = -1;
  if (rc != 0) {
    int e = walk_errno != 0 ? walk_errno : errno;
    unmountWorkspace(mountpoint);
    errno = e;
    return sysError("re-owning the workspace's files", mountpoint);
  }
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
