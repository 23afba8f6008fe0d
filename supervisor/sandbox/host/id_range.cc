#include "supervisor/sandbox/host/id_range.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <string>

namespace airlock::sandbox {

Result<IdRangeLease> IdRangeLease::acquire(const std::string& lock_dir) {
  if (mkdir(lock_dir.c_str(), 0700) != 0 && errno != EEXIST) return sysError("mkdir", lock_dir);
  // Start at a random slot so concurrent runs rarely contend for the same lock.
  uint32_t start = 0;
  if (getrandom(&start, sizeof start, GRND_NONBLOCK) != sizeof start) start = getpid();
  for (uint32_t i = 0; i < kIdRangeSlots; ++i) {
    uint32_t slot = (start + i) % kIdRangeSlots;
    std::string path = lock_dir + "/" + std::to_string(slot) + ".lock";
    UniqueFd fd(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) return sysError("open", path);
    if (flock(fd.get(), LOCK_EX | LOCK_NB) == 0) return IdRangeLease(slot, std::move(fd));
    if (errno != EWOULDBLOCK) return sysError("flock", path);
  }
  return fail(
      "no free sandbox uid range: all " + std::to_string(kIdRangeSlots) + " slots are in use",
      lock_dir);
}

Result<IdRangeLease> IdRangeLease::acquireSlot(const std::string& lock_dir, uint32_t slot) {
  if (slot >= kIdRangeSlots) return fail("uid range slot out of range", std::to_string(slot));
  if (mkdir(lock_dir.c_str(), 0700) != 0 && errno != EEXIST) return sysError("mkdir", lock_dir);
  std::string path = lock_dir + "/" + std::to_string(slot) + ".lock";
  UniqueFd fd(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return sysError("open", path);
  if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) return sysError("flock", path);
  return IdRangeLease(slot, std::move(fd));
}

}  // namespace airlock::sandbox
