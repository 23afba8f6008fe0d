#include "supervisor/sandbox/agent/file_ops.h"

#include <cerrno>

#include "supervisor/sandbox/paths.h"

namespace airlock::sandbox::files {

namespace proto = airlock::protocol;

namespace {

constexpr auto kStepTimeout = std::chrono::seconds(30);

// The agent's errno, in the API's terms.
ServiceError fromAgentError(const proto::ErrorMsg& m, const std::string& path) {
  ErrorCode code = ErrorCode::kBadRequest;
  switch (m.errnum) {
    case ENOENT:
    case ENOTDIR:
      code = ErrorCode::kNotFound;
      break;
    case EEXIST:
    case ENOTEMPTY:
    case EISDIR:
      code = ErrorCode::kConflict;
      break;
    case EACCES:
    case EPERM:
    case EROFS:
      code = ErrorCode::kForbidden;
      break;
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
      code = ErrorCode::kPayloadTooLarge;
      break;
    case EPIPE:
      code = ErrorCode::kConflict;  // the sandbox stopped under us
      break;
    default:
      break;
  }
  std::string msg = m.message.empty() ? path : m.message;
  if (m.errnum != 0 && msg.find(Error::errnoName(m.errnum)) == std::string::npos)
    msg += std::string(": ") + Error::errnoName(m.errnum);
  return ServiceError{code, msg};
}

// Sends one request and collects its answer frames until `is_last`.
class Exchange {
 public:
  Exchange(AgentConnection& conn, std::function<bool(const proto::FrameHeader&)> is_last)
      : conn_(conn), box_(conn.mailbox()) {
    id_ = conn_.open(box_->handler([is_last = std::move(is_last)](const proto::FrameHeader& h) {
      return h.type == proto::MsgType::kError || is_last(h);
    }));
  }
  ~Exchange() { conn_.close(id_); }
  uint32_t id() const { return id_; }
  SResult<> send(const std::string& frame) {
    if (auto r = conn_.send(frame); !r)
      return serviceError(ErrorCode::kConflict, "sandbox agent: " + r.error().message());
    return {};
  }
  SResult<Mailbox::Frame> next(const std::string& path) {
    auto f = box_->pop(Clock::now() + kStepTimeout);
    if (!f)
      return serviceError(ErrorCode::kInternal, "the sandbox did not answer for 30 s: " + path);
    if (f->header.type == proto::MsgType::kError) {
      auto m = proto::decodeError(f->payload);
      if (!m) return serviceError(ErrorCode::kInternal, "agent: " + m.error().message());
      return std::unexpected(fromAgentError(*m, path));
    }
    return std::move(*f);
  }
  // Waits for the request's Ok.
  SResult<> ok(const std::string& path) {
    auto f = next(path);
    if (!f) return std::unexpected(f.error());
    if (f->header.type != proto::MsgType::kOk)
      return serviceError(ErrorCode::kInternal,
                          "agent answered " + std::string(proto::msgTypeName(f->header.type)) +
                              " where Ok was due: " + path);
    return {};
  }

 private:
  AgentConnection& conn_;
  std::shared_ptr<Mailbox> box_;
  uint32_t id_ = 0;
};

FileEntry toEntry(const proto::FileEntry& e) {
  static constexpr const char* kTypes[] = {"other", "file", "dir", "symlink", "other"};
  auto t = static_cast<size_t>(e.type);
  return FileEntry{e.name, kTypes[t < 5 ? t : 0], e.size, e.mode, e.mtime_ms};
}

}  // namespace

SResult<std::string> checkPath(const std::string& path, const char* field) {
  auto p = normalizePath(path, field);
  if (!p) return serviceError(ErrorCode::kBadRequest, p.error().message());
  return *p;
}

SResult<FileEntry> write(AgentConnection& conn, const std::string& path, uint32_t mode,
                         const ByteSource& source) {
  Exchange ex(conn, [](const proto::FrameHeader& h) { return h.type == proto::MsgType::kOk; });
  std::string buf(proto::kMaxChunk, '\0');
  uint64_t total = 0;
  bool first = true;
  // Read one chunk ahead so the last chunk can carry last=true.
  auto n = source(buf.data(), buf.size());
  if (!n) return std::unexpected(n.error());
  std::string current = buf.substr(0, *n);
  for (;;) {
    std::string next;
    bool last = current.empty();
    if (!last) {
      auto m = source(buf.data(), buf.size());
      if (!m) return std::unexpected(m.error());
      next = buf.substr(0, *m);
      last = next.empty();
    }
    proto::FileWrite fw;
    fw.path = path;
    fw.mode = mode;
    fw.data = std::move(current);
    fw.first = first;
    fw.last = last;
    total += fw.data.size();
    std::string frame;
    proto::encode(frame, ex.id(), fw);
    if (auto r = ex.send(frame); !r) return std::unexpected(r.error());
    first = false;
    if (last) break;
    current = std::move(next);
  }
  if (auto r = ex.ok(path); !r) return std::unexpected(r.error());
  return FileEntry{path, "file", total, mode, 0};
}

SResult<> read(AgentConnection& conn, const std::string& path, uint64_t max_bytes,
               const std::function<void(uint64_t)>& on_size, const ByteSink& sink) {
  Exchange ex(conn, [](const proto::FrameHeader& h) {
    return h.type == proto::MsgType::kFileData && false;  // last is decided from the payload
  });
  proto::FileRead fr;
  fr.path = path;
  fr.max_bytes = max_bytes;
  std::string frame;
  proto::encode(frame, ex.id(), fr);
  if (auto r = ex.send(frame); !r) return std::unexpected(r.error());
  bool first = true;
  uint64_t got = 0;
  for (;;) {
    auto f = ex.next(path);
    if (!f) return std::unexpected(f.error());
    if (f->header.type != proto::MsgType::kFileData)
      return serviceError(ErrorCode::kInternal,
                          "agent sent " + std::string(proto::msgTypeName(f->header.type)) +
                              " while reading " + path);
    auto d = proto::decodeFileData(f->payload);
    if (!d) return serviceError(ErrorCode::kInternal, "agent: " + d.error().message());
    if (first) on_size(d->size);
    first = false;
    got += d->data.size();
    if (max_bytes != 0 && got > max_bytes)
      return serviceError(ErrorCode::kInternal, "agent sent more than the size limit: " + path);
    if (!d->data.empty() && !sink(d->data))
      return serviceError(ErrorCode::kBadRequest, "client went away while reading " + path);
    if (d->last) return {};
  }
}

SResult<std::vector<FileEntry>> list(AgentConnection& conn, const std::string& path,
                                     size_t max_entries) {
  Exchange ex(conn, [](const proto::FrameHeader&) { return false; });
  std::string frame;
  proto::encode(frame, ex.id(), proto::FileList{path});
  if (auto r = ex.send(frame); !r) return std::unexpected(r.error());
  std::vector<FileEntry> out;
  for (;;) {
    auto f = ex.next(path);
    if (!f) return std::unexpected(f.error());
    auto m = proto::decodeFileEntries(f->payload);
    if (f->header.type != proto::MsgType::kFileEntries || !m)
      return serviceError(ErrorCode::kInternal, "agent sent a malformed listing of " + path);
    for (const auto& e : m->entries) {
      // A listing names entries of the directory asked for, nothing else (hostile agent).
      if (e.name.empty() || e.name.find('/') != std::string::npos || e.name == "." ||
          e.name == "..")
        return serviceError(ErrorCode::kInternal, "agent protocol violation: listing of " + path +
                                                      " names '" + e.name + "', not a plain name");
      out.push_back(toEntry(e));
    }
    if (out.size() > max_entries)
      return serviceError(ErrorCode::kPayloadTooLarge,
                          "more than " + std::to_string(max_entries) + " entries in " + path);
    if (m->last) return out;
  }
}

SResult<FileEntry> stat(AgentConnection& conn, const std::string& path) {
  Exchange ex(conn,
              [](const proto::FrameHeader& h) { return h.type == proto::MsgType::kFileEntries; });
  std::string frame;
  proto::encode(frame, ex.id(), proto::FileStat{path});
  if (auto r = ex.send(frame); !r) return std::unexpected(r.error());
  auto f = ex.next(path);
  if (!f) return std::unexpected(f.error());
  auto m = proto::decodeFileEntries(f->payload);
  if (f->header.type != proto::MsgType::kFileEntries || !m || m->entries.size() != 1)
    return serviceError(ErrorCode::kInternal, "agent sent a malformed stat of " + path);
  FileEntry e = toEntry(m->entries.front());
  e.name = path;
  return e;
}

namespace {

template <typename Msg>
SResult<> simple(AgentConnection& conn, const Msg& msg, const std::string& subject) {
  Exchange ex(conn, [](const proto::FrameHeader& h) { return h.type == proto::MsgType::kOk; });
  std::string frame;
  proto::encode(frame, ex.id(), msg);
  if (auto r = ex.send(frame); !r) return std::unexpected(r.error());
  return ex.ok(subject);
}

}  // namespace

SResult<> mkdir(AgentConnection& conn, const std::string& path, bool parents) {
  proto::FileMkdir m;
  m.path = path;
  m.parents = parents;
  return simple(conn, m, path);
}

SResult<> remove(AgentConnection& conn, const std::string& path, bool recursive) {
  if (path == "/" || path == "/home/user" || path == "/tmp")
    return serviceError(ErrorCode::kForbidden, "refusing to remove '" + path + "' itself");
  proto::FileRemove m;
  m.path = path;
  m.recursive = recursive;
  return simple(conn, m, path);
}

SResult<> rename(AgentConnection& conn, const std::string& from, const std::string& to) {
  return simple(conn, proto::FileRename{from, to}, from + " -> " + to);
}

}  // namespace airlock::sandbox::files
