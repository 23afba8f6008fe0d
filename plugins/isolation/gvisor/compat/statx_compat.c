/* Preloaded into every dynamically linked program of a gVisor sandbox (/etc/ld.so.preload).
 *
 * The gVisor of Debian 12 (runsc 2022-12) refuses AT_NO_AUTOMOUNT in statx and newfstatat with
 * EINVAL, and coreutils 9 passes it on every statx: `ls`, `stat`, `cp -a` and `du` fail on any
 * path. gVisor has no automount points, so the flag means nothing there: these wrappers clear
 * it and make the same system call. Nothing else changes; errors are the kernel's. */
#define _GNU_SOURCE
#define _LARGEFILE64_SOURCE
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

__attribute__((visibility("default"))) int statx(int dirfd, const char* path, int flags,
                                                 unsigned int mask, struct statx* buf) {
  return (int)syscall(SYS_statx, dirfd, path, flags & ~AT_NO_AUTOMOUNT, mask, buf);
}

__attribute__((visibility("default"))) int fstatat(int dirfd, const char* path, struct stat* st,
                                                   int flags) {
  return (int)syscall(SYS_newfstatat, dirfd, path, st, flags & ~AT_NO_AUTOMOUNT);
}

__attribute__((visibility("default"))) int fstatat64(int dirfd, const char* path, struct stat64* st,
                                                     int flags) {
  return (int)syscall(SYS_newfstatat, dirfd, path, st, flags & ~AT_NO_AUTOMOUNT);
}
