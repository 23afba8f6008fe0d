// flock()ed lock files.
#include "supervisor/sys/lock_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <cerrno>

namespace airlock::sys {

namespace {

Result<UniqueFd> openLockFile(const std::string& dir, const std::string& path) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return sysError("mkdir", dir);
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return sysError("open", path);
  return fd;
}

}  // namespace

Result<UniqueFd> lockFileIn(const std::string& dir, const std::string& name, int operation) {
  const std::string path = dir + "/" + name;
  auto opened = openLockFile(dir, path);
  if (!opened) return opened;
  UniqueFd fd = std::move(*opened);
  while (::flock(fd.get(), operation) != 0)
    if (errno != EINTR) return sysError("flock", path);
  return fd;
}

Result<UniqueFd> tryLockFileIn(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name;
  auto opened = openLockFile(dir, path);
  if (!opened) return opened;
  UniqueFd fd = std::move(*opened);
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) return fd;
  if (errno == EWOULDBLOCK) return UniqueFd();
  return sysError("flock", path);
}

}  // namespace airlock::sys
