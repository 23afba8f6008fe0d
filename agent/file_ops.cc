#include "file_ops.h"

#include <fcntl.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace airlock::agent {

FsCredentials::FsCredentials(uid_t uid, gid_t gid) {
  // Permission checks and ownership of created files follow fsuid/fsgid; the agent's own
  // filesystem capabilities are dropped while fsuid is not 0.
  old_gid_ = static_cast<gid_t>(::setfsgid(gid));
  old_uid_ = static_cast<uid_t>(::setfsuid(uid));
}

FsCredentials::~FsCredentials() {
  ::setfsuid(old_uid_);
  ::setfsgid(old_gid_);
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

}  // namespace airlock::agent
