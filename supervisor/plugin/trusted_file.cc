#include "supervisor/plugin/trusted_file.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "airlock/unique_fd.h"

namespace airlock::plugin {
namespace {

std::string octalMode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

std::string mustBeOwnedBy(uid_t owner, bool root_allowed) {
  if (owner == 0) return "must be owned by root";
  return "must be owned by uid " + std::to_string(owner) + (root_allowed ? " or root" : "");
}

// `is_parent`: the directory holding the file, where even a sticky bit is not enough.
Result<> checkDirectory(const struct stat& st, const std::string& dir, uid_t owner,
                        bool is_parent) {
  if (st.st_uid != 0 && st.st_uid != owner)
    return fail("directory '" + dir + "' is owned by uid " + std::to_string(st.st_uid) + ", " +
                mustBeOwnedBy(owner, true));
  bool shared = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
  if (shared && (is_parent || (st.st_mode & S_ISVTX) == 0))
    return fail("directory '" + dir + "' is writable by group or others (mode " +
                octalMode(st.st_mode) + ")");
  return {};
}

// The file's O_PATH fd once every check passed.
Result<UniqueFd> checkResolved(const std::string& real, uid_t owner) {
  // O_PATH: we only fstat; O_NOFOLLOW on every step: a component swapped for a symlink after
  // realpath() fails the walk instead of redirecting it.
  UniqueFd dir(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dir) return sysError("open", "/");
  std::string walked;  // "" stands for "/"
  size_t pos = 1;
  while (true) {
    size_t slash = real.find('/', pos);
    bool last = slash == std::string::npos;
    std::string component = real.substr(pos, last ? std::string::npos : slash - pos);
    struct stat st {};
    if (::fstat(dir.get(), &st) != 0) return sysError("fstat", walked.empty() ? "/" : walked);
    if (auto ok = checkDirectory(st, walked.empty() ? "/" : walked, owner, last); !ok)
      return Unexpected(std::move(ok.error()));
    walked += "/" + component;
    int flags = O_PATH | O_NOFOLLOW | O_CLOEXEC | (last ? 0 : O_DIRECTORY);
    UniqueFd next(::openat(dir.get(), component.c_str(), flags));
    if (!next) return sysError("open", walked);
    if (last) {
      if (::fstat(next.get(), &st) != 0) return sysError("fstat", walked);
      if (!S_ISREG(st.st_mode)) return fail("not a regular file");
      if (st.st_uid != owner)
        return fail("owned by uid " + std::to_string(st.st_uid) + ", " +
                    mustBeOwnedBy(owner, false));
      if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
        return fail("writable by group or others (mode " + octalMode(st.st_mode) + ")");
      return next;
    }
    dir = std::move(next);
    pos = slash + 1;
  }
}

}  // namespace

Result<TrustedFile> checkTrustedFile(const std::string& path, uid_t owner) {
  std::unique_ptr<char, decltype(&std::free)> resolved(::realpath(path.c_str(), nullptr),
                                                       &std::free);
  if (!resolved) return sysError("realpath", path);
  std::string real = resolved.get();
  if (real == "/") return fail("not a regular file");
  auto file = checkResolved(real, owner);
  if (!file) {
    if (real != path) return Unexpected(std::move(file.error()).wrap("resolves to '" + real + "'"));
    return Unexpected(std::move(file.error()));
  }
  return TrustedFile{std::move(real), std::move(*file)};
}

}  // namespace airlock::plugin
