#include "file_ops.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

namespace airlock::agent {
namespace {

// Deeper trees are refused rather than holding one directory fd per level without bound.
constexpr int kMaxRemoveDepth = 256;
// Passes over one directory while something inside the sandbox keeps adding entries.
constexpr int kMaxRemovePasses = 64;

// Sets the umask for its lifetime: modes given by the supervisor are applied exactly.
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask) : old_(::umask(mask)) {}
  ~ScopedUmask() { ::umask(old_); }
  ScopedUmask(const ScopedUmask&) = delete;
  ScopedUmask& operator=(const ScopedUmask&) = delete;

 private:
  mode_t old_;
};

protocol::FileType typeOf(mode_t mode) {
  if (S_ISREG(mode)) return protocol::FileType::kFile;
  if (S_ISDIR(mode)) return protocol::FileType::kDir;
  if (S_ISLNK(mode)) return protocol::FileType::kSymlink;
  return protocol::FileType::kOther;
}

protocol::FileEntry entryOf(std::string name, const struct stat& st) {
  protocol::FileEntry e;
  e.name = std::move(name);
  e.type = typeOf(st.st_mode);
  e.size = static_cast<uint64_t>(st.st_size);
  e.mode = st.st_mode & 07777;
  e.mtime_ms = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
  return e;
}

// "/a/b/" → "/a/b": a trailing slash would make the kernel follow a final symlink.
std::string stripTrailingSlashes(const std::string& path) {
  size_t end = path.size();
  while (end > 1 && path[end - 1] == '/') --end;
  return path.substr(0, end);
}

struct SplitPath {
  std::string parent;
  std::string name;
};

// Splits an absolute path into its parent directory and last component, refusing "/", "." and
// ".." as the component to act on.
Result<SplitPath> splitPath(const std::string& raw, const char* op) {
  std::string path = stripTrailingSlashes(raw);
  if (path == "/") return Unexpected(Error(std::string(op) + ": the root directory", raw, EBUSY));
  size_t slash = path.rfind('/');
  SplitPath sp{slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
  if (sp.name == "." || sp.name == "..")
    return Unexpected(
        Error(std::string(op) + ": path must not end in '" + sp.name + "'", raw, EINVAL));
  return sp;
}

// Names in a directory (without . and ..), read from the start of fd.
Result<std::vector<std::string>> readNames(int fd, const std::string& path) {
  std::vector<std::string> names;
  if (::lseek(fd, 0, SEEK_SET) != 0) return sysError("lseek", path);
  alignas(8) char buf[32 * 1024];
  for (;;) {
    ssize_t n = ::getdents64(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return sysError("getdents64", path);
    }
    if (n == 0) return names;
    for (ssize_t at = 0; at < n;) {
      auto* d = reinterpret_cast<struct dirent64*>(buf + at);
      at += d->d_reclen;
      if (std::strcmp(d->d_name, ".") == 0 || std::strcmp(d->d_name, "..") == 0) continue;
      names.emplace_back(d->d_name);
    }
  }
}

// Empties the directory `name` in parent_fd (which the caller then removes).
Result<> removeContents(int parent_fd, const std::string& name, const std::string& path,
                        int depth) {
  if (depth >= kMaxRemoveDepth)
    return Unexpected(Error(
        "remove: directory tree deeper than " + std::to_string(kMaxRemoveDepth) + " levels at",
        path, ELOOP));
  UniqueFd fd(::openat(parent_fd, name.c_str(),
                       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY));
  if (!fd) return sysError("openat(O_DIRECTORY|O_NOFOLLOW)", path);
  for (int pass = 0;; ++pass) {
    auto names = readNames(fd.get(), path);
    if (!names) return Unexpected(names.error());
    if (names->empty()) return {};
    if (pass >= kMaxRemovePasses)
      return Unexpected(Error("remove: directory keeps gaining entries", path, EAGAIN));
    for (const auto& child : *names) {
      std::string child_path = path + "/" + child;
      struct stat st {};
      if (::fstatat(fd.get(), child.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) continue;  // removed meanwhile
        return sysError("fstatat(AT_SYMLINK_NOFOLLOW)", child_path);
      }
      if (S_ISDIR(st.st_mode)) {
        auto r = removeContents(fd.get(), child, child_path, depth + 1);
        // Replaced by a symlink or a file since the fstatat: remove that instead of entering.
        if (!r && (r.error().errnum() == ELOOP || r.error().errnum() == ENOTDIR) &&
            r.error().subject() == child_path) {
          if (::unlinkat(fd.get(), child.c_str(), 0) != 0 && errno != ENOENT)
            return sysError("unlinkat", child_path);
          continue;
        }
        if (!r) return r;
        if (::unlinkat(fd.get(), child.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
          return sysError("unlinkat(AT_REMOVEDIR)", child_path);
      } else if (::unlinkat(fd.get(), child.c_str(), 0) != 0 && errno != ENOENT) {
        return sysError("unlinkat", child_path);
      }
    }
  }
}

}  // namespace

namespace {

// gVisor has no setfsuid/setfsgid (ENOSYS). Asked once: the answer is the kernel's.
bool haveFsuid() {
  static const bool have = [] {
    errno = 0;
    long r = ::syscall(SYS_setfsuid, -1);  // an invalid id only reports the current one
    return !(r == -1 && errno == ENOSYS);
  }();
  return have;
}

}  // namespace

FsCredentials::FsCredentials(uid_t uid, gid_t gid) {
  // Permission checks and ownership of created files follow fsuid/fsgid; the agent's own
  // filesystem capabilities are dropped while fsuid is not 0.
  if (haveFsuid()) {
    old_gid_ = static_cast<gid_t>(::setfsgid(gid));
    old_uid_ = static_cast<uid_t>(::setfsuid(uid));
    return;
  }
  // Without them (gVisor), the effective ids do the same: their raw syscalls change only this
  // thread (the agent has one), the saved uid 0 lets the destructor switch back, and the
  // effective capabilities are cleared while euid is not 0 and restored with it.
  setfs_ = false;
  old_gid_ = ::getegid();
  old_uid_ = ::geteuid();
  ::syscall(SYS_setresgid, -1, gid, -1);
  ::syscall(SYS_setresuid, -1, uid, -1);
}

FsCredentials::~FsCredentials() {
  const int saved = errno;  // the caller reads errno of the call made under these credentials
  if (setfs_) {
    ::setfsuid(old_uid_);
    ::setfsgid(old_gid_);
  } else {
    ::syscall(SYS_setresuid, -1, old_uid_, -1);
    ::syscall(SYS_setresgid, -1, old_gid_, -1);
  }
  errno = saved;
}

Result<bool> FileWriter::write(uint32_t request_id, const protocol::FileWrite& m, uid_t uid,
                               gid_t gid) {
  auto it = open_.find(request_id);
  if (m.first) {
    if (it != open_.end()) open_.erase(it);
    if (open_.size() >= kMaxOpen)
      return Unexpected(
          Error("open: " + std::to_string(kMaxOpen) + " file writes already in progress", m.path,
                EMFILE));
    int fd;
    {
      FsCredentials creds(uid, gid);
      // The mode is applied exactly (no umask); set-id bits are never granted.
      mode_t old_umask = ::umask(0);
      fd = ::open(m.path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY,
                  m.mode & 01777);
      int saved = errno;
      ::umask(old_umask);
      errno = saved;
    }
    if (fd < 0) return sysError("open(O_CREAT|O_TRUNC|O_NOFOLLOW)", m.path);
    UniqueFd owned(fd);
    struct stat st {};
    if (::fstat(fd, &st) != 0) return sysError("fstat", m.path);
    if (!S_ISREG(st.st_mode)) return Unexpected(Error("open: not a regular file", m.path, EINVAL));
    it = open_.emplace(request_id, OpenFile{std::move(owned), m.path}).first;
  } else if (it == open_.end()) {
    return Unexpected(Error("write: no file write in progress for request " +
                                std::to_string(request_id) + " (first chunk missing)",
                            m.path, EBADF));
  } else if (it->second.path != m.path) {
    std::string was = it->second.path;
    open_.erase(it);
    return fail("write: path changed mid-transfer from '" + was + "' to", m.path);
  }

  size_t done = 0;
  while (done < m.data.size()) {
    ssize_t n = ::write(it->second.fd.get(), m.data.data() + done, m.data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      auto err = sysError("write", m.path);
      open_.erase(it);
      return err;
    }
    done += static_cast<size_t>(n);
  }
  if (!m.last) return false;
  int fd = it->second.fd.release();
  open_.erase(it);
  if (::close(fd) != 0) return sysError("close", m.path);
  return true;
}

Result<> readFile(const protocol::FileRead& m, uid_t uid, gid_t gid,
                  const std::function<bool(const protocol::FileData&)>& send) {
  int raw;
  {
    FsCredentials creds(uid, gid);
    // O_NONBLOCK: opening a FIFO must not hang the agent; only regular files are read below.
    raw = ::open(m.path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  }
  if (raw < 0) return sysError("open(O_RDONLY|O_NOFOLLOW)", m.path);
  UniqueFd fd(raw);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return sysError("fstat", m.path);
  if (S_ISDIR(st.st_mode)) return Unexpected(Error("read: is a directory", m.path, EISDIR));
  if (!S_ISREG(st.st_mode)) return Unexpected(Error("read: not a regular file", m.path, EINVAL));
  uint64_t size = static_cast<uint64_t>(st.st_size);
  if (m.max_bytes != 0 && size > m.max_bytes)
    return Unexpected(Error("read: file of " + std::to_string(size) + " bytes exceeds max_bytes " +
                                std::to_string(m.max_bytes),
                            m.path, EFBIG));

  std::string buf;
  uint64_t total = 0;
  bool first = true;
  for (;;) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(protocol::kMaxChunk, size - total));
    buf.resize(want);
    size_t got = 0;
    while (got < want) {
      ssize_t n = ::read(fd.get(), buf.data() + got, want - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return sysError("read", m.path);
      if (n == 0) break;  // shrank while reading: send what there is
      got += static_cast<size_t>(n);
    }
    buf.resize(got);
    total += got;
    protocol::FileData chunk;
    chunk.data = std::move(buf);
    chunk.last = got < want || total >= size;
    chunk.size = first ? size : 0;
    first = false;
    bool last = chunk.last;
    if (!send(chunk)) return fail("send FileData", m.path);
    buf.clear();
    if (last) return {};
  }
}

Result<> listDirectory(const protocol::FileList& m, uid_t uid, gid_t gid,
                       const std::function<bool(const protocol::FileEntries&)>& send) {
  FsCredentials creds(uid, gid);
  // O_NOFOLLOW: a symlink to a directory is not listed through (ELOOP/ENOTDIR).
  UniqueFd fd(::open(m.path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY));
  if (!fd) return sysError("open(O_DIRECTORY|O_NOFOLLOW)", m.path);
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::fdopendir(fd.get()), ::closedir);
  if (!dir) return sysError("fdopendir", m.path);
  (void)fd.release();  // owned by dir now
  int dfd = ::dirfd(dir.get());

  protocol::FileEntries frame;
  size_t bytes = 0;
  for (;;) {
    errno = 0;
    dirent* de = ::readdir(dir.get());
    if (de == nullptr) {
      if (errno != 0) return sysError("readdir", m.path);
      break;
    }
    if (std::strcmp(de->d_name, ".") == 0 || std::strcmp(de->d_name, "..") == 0) continue;
    struct stat st {};
    if (::fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;  // removed since readdir
      return sysError("fstatat(AT_SYMLINK_NOFOLLOW)", m.path + "/" + de->d_name);
    }
    auto entry = entryOf(de->d_name, st);
    size_t size = protocol::encodedEntrySize(entry);
    if (frame.entries.size() >= protocol::kMaxListItems ||
        bytes + size > protocol::kMaxFileEntriesPayload) {
      frame.last = false;
      if (!send(frame)) return fail("send FileEntries", m.path);
      frame.entries.clear();
      bytes = 0;
    }
    frame.entries.push_back(std::move(entry));
    bytes += size;
  }
  frame.last = true;
  if (!send(frame)) return fail("send FileEntries", m.path);
  return {};
}

Result<protocol::FileEntry> statPath(const protocol::FileStat& m, uid_t uid, gid_t gid) {
  FsCredentials creds(uid, gid);
  struct stat st {};
  if (::fstatat(AT_FDCWD, stripTrailingSlashes(m.path).c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return sysError("lstat", m.path);
  return entryOf(m.path, st);
}

Result<> makeDirectory(const protocol::FileMkdir& m, uid_t uid, gid_t gid) {
  FsCredentials creds(uid, gid);
  ScopedUmask umask0(0);
  mode_t mode = m.mode & 01777;  // set-id bits are never granted
  std::string path = stripTrailingSlashes(m.path);
  if (!m.parents) {
    if (::mkdir(path.c_str(), mode) != 0) return sysError("mkdir", m.path);
    return {};
  }
  // Like mkdir -p: each missing prefix is created; parents stay usable by their owner.
  size_t at = 1;
  for (;;) {
    size_t slash = path.find('/', at);
    bool final = slash == std::string::npos;
    std::string prefix = final ? path : path.substr(0, slash);
    at = final ? path.size() : slash + 1;
    if (prefix.empty() || prefix.back() == '/') {  // "//" inside the path
      if (final) return {};
      continue;
    }
    if (::mkdir(prefix.c_str(), final ? mode : (mode | 0700)) != 0) {
      if (errno != EEXIST) return sysError("mkdir", prefix);
      struct stat st {};
      if (::stat(prefix.c_str(), &st) != 0) return sysError("stat", prefix);
      if (!S_ISDIR(st.st_mode))
        return Unexpected(Error("mkdir: exists and is not a directory", prefix, EEXIST));
    }
    if (final) return {};
  }
}

Result<> removePath(const protocol::FileRemove& m, uid_t uid, gid_t gid) {
  FsCredentials creds(uid, gid);
  auto sp = splitPath(m.path, "remove");
  if (!sp) return Unexpected(sp.error());
  UniqueFd parent(::open(sp->parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOCTTY));
  if (!parent) return sysError("open(O_DIRECTORY)", sp->parent);
  struct stat st {};
  if (::fstatat(parent.get(), sp->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return sysError("lstat", m.path);
  if (!S_ISDIR(st.st_mode)) {
    if (::unlinkat(parent.get(), sp->name.c_str(), 0) != 0) return sysError("unlink", m.path);
    return {};
  }
  if (m.recursive) {
    auto r = removeContents(parent.get(), sp->name, stripTrailingSlashes(m.path), 0);
    if (!r) return r;
  }
  if (::unlinkat(parent.get(), sp->name.c_str(), AT_REMOVEDIR) != 0)
    return sysError("rmdir", m.path);
  return {};
}

Result<> renamePath(const protocol::FileRename& m, uid_t uid, gid_t gid) {
  FsCredentials creds(uid, gid);
  auto from = splitPath(m.from, "rename");
  if (!from) return Unexpected(from.error());
  auto to = splitPath(m.to, "rename");
  if (!to) return Unexpected(to.error());
  std::string src = stripTrailingSlashes(m.from), dst = stripTrailingSlashes(m.to);
  if (::renameat2(AT_FDCWD, src.c_str(), AT_FDCWD, dst.c_str(), 0) != 0)
    return sysError("rename to '" + m.to + "' from", m.from);
  return {};
}

}  // namespace airlock::agent
