#include "supervisor/sandbox/host/host_mounts.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace airlock::sandbox {
namespace {

// At most this many per sandbox (the API's limit is lower); the reclaim of an orphan looks no
// further.
constexpr size_t kMaxStaged = 64;

std::string stagingPoint(const std::string& state_dir, const std::string& id, size_t n) {
  return state_dir + "/sandboxes/" + id + ".mnt" + std::to_string(n);
}

void unstage(const std::string& point) {
  if (::umount2(point.c_str(), MNT_DETACH) != 0 && errno != EINVAL && errno != ENOENT) return;
  ::rmdir(point.c_str());
}

}  // namespace

Result<StagedMounts> StagedMounts::stage(const std::string& state_dir, const std::string& id,
                                         const std::vector<HostMount>& mounts) {
  if (mounts.size() > kMaxStaged)
    return fail("at most " + std::to_string(kMaxStaged) + " host directories per sandbox");
  StagedMounts staged;
  for (size_t n = 0; n < mounts.size(); ++n) {
    const HostMount& m = mounts[n];
    const std::string point = stagingPoint(state_dir, id, n);
    if (::mkdir(point.c_str(), 0700) != 0 && errno != EEXIST) return sysError("mkdir", point);
    const std::string via = "/proc/self/fd/" + std::to_string(m.dir->get());
    if (::mount(via.c_str(), point.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      const int e = errno;
      ::rmdir(point.c_str());
      errno = e;
      return sysError("bind " + m.target + " from its host directory", point);
    }
    staged.entries_.push_back(
        {.source = point, .target = m.target, .optional = false, .writable = m.writable});
    // Private: the host's shared /run would otherwise carry its unmount into the sandbox.
    if (::mount(nullptr, point.c_str(), nullptr, MS_PRIVATE, nullptr) != 0)
      return sysError("make private", point);
    if (!m.writable &&
        ::mount(nullptr, point.c_str(), nullptr,
                MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0)
      return sysError("remount read-only", point);
  }
  return staged;
}

StagedMounts& StagedMounts::operator=(StagedMounts&& other) noexcept {
  if (this != &other) {
    release();
    entries_ = std::move(other.entries_);
    other.entries_.clear();
  }
  return *this;
}

void StagedMounts::release() {
  for (const auto& e : entries_) unstage(e.source);
  entries_.clear();
}

void releaseStagedMounts(const std::string& state_dir, const std::string& id) {
  for (size_t n = 0; n < kMaxStaged; ++n) {
    const std::string point = stagingPoint(state_dir, id, n);
    struct stat st {};
    if (::lstat(point.c_str(), &st) != 0) break;
    unstage(point);
  }
}

}  // namespace airlock::sandbox
