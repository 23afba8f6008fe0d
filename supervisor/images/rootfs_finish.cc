#include "supervisor/images/rootfs_finish.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>
#include <vector>

#include "airlock/unique_fd.h"

namespace airlock::images {
namespace {

constexpr uid_t kSandboxUid = 1000;  // the sandbox user every backend runs code as

// `rel` beneath root_fd, no symlink or '..' on the way (the last component included).
Result<UniqueFd> openBeneath(int root_fd, const std::string& rel, int flags, mode_t mode = 0) {
  open_how how{};
  how.flags = static_cast<uint64_t>(flags | O_CLOEXEC | O_NOFOLLOW);
  how.mode = (flags & O_CREAT) != 0 ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  long fd = ::syscall(SYS_openat2, root_fd, rel.c_str(), &how, sizeof how);
  if (fd < 0) return sysError("openat2 (beneath the image's root, no symlinks)", "/" + rel);
  return UniqueFd(static_cast<int>(fd));
}

// mkdir -p beneath the root, then sets the mode of the last component.
Result<> ensureDir(int root_fd, const std::string& rel, mode_t mode) {
  std::string at;
  size_t i = 0;
  while (i < rel.size()) {
    size_t j = rel.find('/', i);
    if (j == std::string::npos) j = rel.size();
    const std::string parent = at.empty() ? "." : at;
    at += (at.empty() ? "" : "/") + rel.substr(i, j - i);
    AIRLOCK_TRY_CTX(dir, openBeneath(root_fd, parent, O_PATH | O_DIRECTORY), "image root");
    const std::string name = rel.substr(i, j - i);
    if (::mkdirat(dir.get(), name.c_str(), 0755) != 0 && errno != EEXIST)
      return sysError("mkdir", "/" + at);
    i = j + 1;
  }
  AIRLOCK_TRY_CTX(fd, openBeneath(root_fd, rel, O_RDONLY | O_DIRECTORY), "image root");
  if (::fchmod(fd.get(), mode) != 0) return sysError("chmod", "/" + rel);
  return {};
}

Result<std::string> readBeneath(int root_fd, const std::string& rel) {
  auto fd = openBeneath(root_fd, rel, O_RDONLY);
  if (!fd) {
    if (fd.error().errnum() == ENOENT) return std::string();
    return Unexpected(fd.error());
  }
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0 || !S_ISREG(st.st_mode))
    return fail("not a regular file", "/" + rel);
  std::string out;
  char buf[8192];
  for (ssize_t n; (n = ::read(fd->get(), buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sysError("read", "/" + rel);
    out.append(buf, n);
    if (out.size() > (8u << 20)) return fail("larger than 8 MiB", "/" + rel);
  }
  return out;
}

// True when a passwd/group line has `id` in its third field.
bool hasId(std::string_view text, uid_t id) {
  const std::string want = std::to_string(id);
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    size_t a = line.find(':'), b = a == std::string_view::npos ? a : line.find(':', a + 1);
    size_t c = b == std::string_view::npos ? b : line.find(':', b + 1);
    if (c != std::string_view::npos && line.substr(b + 1, c - b - 1) == want) return true;
    start = end + 1;
  }
  return false;
}

Result<> appendLineIfMissing(int root_fd, const std::string& rel, const std::string& line) {
  AIRLOCK_TRY_CTX(text, readBeneath(root_fd, rel), "image root");
  if (hasId(text, kSandboxUid)) return {};
  std::string add = (text.empty() || text.back() == '\n' ? "" : "\n") + line + "\n";
  AIRLOCK_TRY_CTX(fd, openBeneath(root_fd, rel, O_WRONLY | O_APPEND | O_CREAT, 0644), "image root");
  if (::write(fd.get(), add.data(), add.size()) != static_cast<ssize_t>(add.size()))
    return sysError("write", "/" + rel);
  return {};
}

// mmdebstrap (root mode) leaves the device nodes it made in /dev. Every backend mounts its own
// /dev over the image's, so they would only be dead weight, and a store is safer without any.
Result<> removeDeviceNodes(int root_fd) {
  AIRLOCK_TRY_CTX(dev, openBeneath(root_fd, "dev", O_RDONLY | O_DIRECTORY), "image root");
  DIR* d = ::fdopendir(::fcntl(dev.get(), F_DUPFD_CLOEXEC, 0));
  if (d == nullptr) return sysError("opendir", "/dev");
  std::vector<std::string> nodes;
  while (dirent* e = ::readdir(d)) {
    struct stat st {};
    if (::fstatat(dev.get(), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))
      nodes.push_back(e->d_name);
  }
  ::closedir(d);
  for (const auto& n : nodes)
    if (::unlinkat(dev.get(), n.c_str(), 0) != 0) return sysError("unlink", "/dev/" + n);
  return {};
}

}  // namespace

Result<> finishRootfs(const std::string& rootfs) {
  UniqueFd root(::open(rootfs.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
  if (!root) return sysError("open", rootfs);
  if (::fchmod(root.get(), 0755) != 0) return sysError("chmod", rootfs);
  for (const char* dir : {"dev", "proc", "etc", "home"})
    if (auto r = ensureDir(root.get(), dir, 0755); !r) return r;
  if (auto r = ensureDir(root.get(), "tmp", 01777); !r) return r;
  if (auto r = removeDeviceNodes(root.get()); !r) return r;
  if (auto r = ensureDir(root.get(), "home/user", 0755); !r) return r;
  const std::string shell =
      ::faccessat(root.get(), "bin/bash", X_OK, 0) == 0 ? "/bin/bash" : "/bin/sh";
  const std::string id = std::to_string(kSandboxUid);
  if (auto r = appendLineIfMissing(root.get(), "etc/passwd",
                                   "user:x:" + id + ":" + id + "::/home/user:" + shell);
      !r)
    return r;
  return appendLineIfMissing(root.get(), "etc/group", "user:x:" + id + ":");
}

}  // namespace airlock::images
