// Looking up a path inside the sandbox's new root without ever leaving it.
//
// The root is assembled from directories others may write to (an image directory, a host
// directory bound writable and shared with another sandbox), so any component of a mount point
// can become a symlink between the supervisor's checks and the mount. A mount point is therefore
// resolved once, with openat2 beneath a descriptor of the root, refusing `..` out of it, every
// symlink and every magic link, and the mount is made on the descriptor that lookup returned.
// Async-signal-safe: the child (after clone) uses these.
#pragma once

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace airlock::isolation {

// An O_PATH descriptor of `rel` ("" for dir_fd itself) beneath dir_fd, or -1 with errno:
// EXDEV when the path leaves dir_fd (`..`, an absolute path), ELOOP when a symlink is on the
// way, the last component included. Mount points inside dir_fd are crossed (they are part of
// the root being built).
inline int openBeneath(int dir_fd, const char* rel) {
  open_how how = {};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  const char* path = rel[0] == '\0' ? "." : rel;
  for (int attempt = 0;; ++attempt) {
    long fd = ::syscall(SYS_openat2, dir_fd, path, &how, sizeof how);
    if (fd >= 0) return static_cast<int>(fd);
    // EAGAIN: a rename elsewhere raced the lookup, and the kernel would rather not guess.
    if (errno != EAGAIN || attempt == 16) return -1;
  }
}

// "/proc/self/fd/<fd>" in buf: how mount(2), which takes paths, is pointed at what a descriptor
// holds. The kernel follows that magic link to the very mount and inode, without looking any
// path up again.
inline const char* procSelfFd(int fd, char (&buf)[32]) {
  constexpr char kPrefix[] = "/proc/self/fd/";
  char digits[12];
  int n = 0;
  unsigned v = static_cast<unsigned>(fd);
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0 && n < 11);
  int i = 0;
  for (; kPrefix[i] != '\0'; ++i) buf[i] = kPrefix[i];
  while (n > 0) buf[i++] = digits[--n];
  buf[i] = '\0';
  return buf;
}

}  // namespace airlock::isolation
