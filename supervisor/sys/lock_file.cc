// flock()ed lock files.
#include "supervisor/sys/lock_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <cerrno>

namespace airlock::sys {

Result<UniqueFd> openLockFile(const std::string& dir, const std::string& name) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return sysError("mkdir", dir);
  std::string path = dir + "/" + name;
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return sysError("open", path);
  return fd;
}

Result<> lockFile(int fd, int operation, const std::string& what) {
  while (::flock(fd, operation) != 0)
    if (errno != EINTR) return sysError("flock", what);
  return {};
}

Result<bool> tryLockFile(int fd, const std::string& what) {
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
  if (errno == EWOULDBLOCK) return false;
  return sysError("flock", what);
}

}  // namespace airlock::sys
