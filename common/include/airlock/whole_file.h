// Small whole files (configs, journals, /proc entries) read and written with O_CLOEXEC.
// std::ifstream and std::ofstream open without it: in a supervisor that starts processes from
// other threads, a file open at that moment would be inherited by the child.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <string_view>

#include "airlock/result.h"
#include "airlock/unique_fd.h"

namespace airlock {

// The file's bytes; more than `max_bytes` is an error (EFBIG) rather than a partial read.
inline Result<std::string> readWholeFile(const std::string& path, size_t max_bytes = 64u << 20) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd) return sysError("open", path);
  std::string out;
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sysError("read", path);
    if (n == 0) return out;
    if (out.size() + static_cast<size_t>(n) > max_bytes)
      return Unexpected(Error("larger than " + std::to_string(max_bytes) + " bytes", path, EFBIG));
    out.append(buf, static_cast<size_t>(n));
  }
}

// Replaces the file's contents (created with `mode` when missing).
inline Result<> writeWholeFile(const std::string& path, std::string_view data, mode_t mode = 0644) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, mode));
  if (!fd) return sysError("open", path);
  while (!data.empty()) {
    ssize_t n = ::write(fd.get(), data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sysError("write", path);
    data.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

}  // namespace airlock
