// Files of a sandbox, through its agent; and persistent workspaces.
#include "supervisor/sandbox/manager.h"

#include "supervisor/audit/lifecycle_records.h"
#include "supervisor/sandbox/agent/file_ops.h"
#include "supervisor/sandbox/live_sandbox.h"

namespace airlock::sandbox {

// Every file operation: a running sandbox of the caller's, a checked path, then the agent.
// The sandbox counts as busy meanwhile, so a long transfer never idles it out.
template <typename Op>
auto Manager::fileOp(const Caller& caller, const std::string& sb, const std::string& path, Op&& op)
    -> decltype(op(std::declval<AgentConnection&>(), path)) {
  auto s = findRunning(caller, sb);
  if (!s) return std::unexpected(s.error());
  auto p = files::checkPath(path);
  if (!p) return std::unexpected(p.error());
  metrics_.file_ops++;
  ++(*s)->busy;
  auto r = op(*(*s)->conn, *p);
  --(*s)->busy;
  (*s)->last_active_at = nowMs();
  return r;
}

SResult<FileEntry> Manager::writeFile(const Caller& caller, const std::string& sb,
                                      const std::string& path, uint32_t mode,
                                      const ByteSource& source) {
  if (mode > 07777) return serviceError(ErrorCode::kBadRequest, "mode must be at most 07777");
  // Counted and hashed on the way, for the audit trail's transfer record.
  audit::Sha256Stream hash;
  uint64_t bytes = 0;
  const auto t0 = Clock::now();
  ByteSource counted = [&](char* buf, size_t cap) -> SResult<size_t> {
    auto n = source(buf, cap);
    if (n && *n > 0) hash.update({buf, *n}), bytes += *n;
    return n;
  };
  auto r = fileOp(caller, sb, path, [&](AgentConnection& c, const std::string& p) {
    return files::write(c, p, mode, counted);
  });
  recordFileTransfer(caller, sb, "in", path, bytes, hash.hex(), r ? "" : r.error().message, t0);
  return r;
}

SResult<> Manager::readFile(const Caller& caller, const std::string& sb, const std::string& path,
                            const std::function<void(uint64_t)>& on_size, const ByteSink& sink) {
  audit::Sha256Stream hash;
  uint64_t bytes = 0;
  const auto t0 = Clock::now();
  ByteSink counted = [&](std::string_view chunk) {
    hash.update(chunk);
    bytes += chunk.size();
    return sink(chunk);
  };
  auto r = fileOp(caller, sb, path, [&](AgentConnection& c, const std::string& p) {
    return files::read(c, p, 0, on_size, counted);
  });
  recordFileTransfer(caller, sb, "out", path, bytes, hash.hex(), r ? "" : r.error().message, t0);
  return r;
}

SResult<std::vector<FileEntry>> Manager::listFiles(const Caller& caller, const std::string& sb,
                                                   const std::string& path) {
  return fileOp(caller, sb, path,
                [](AgentConnection& c, const std::string& p) { return files::list(c, p); });
}

SResult<FileEntry> Manager::statFile(const Caller& caller, const std::string& sb,
                                     const std::string& path) {
  return fileOp(caller, sb, path,
                [](AgentConnection& c, const std::string& p) { return files::stat(c, p); });
}

SResult<> Manager::makeDirectory(const Caller& caller, const std::string& sb,
                                 const std::string& path, bool parents) {
  return fileOp(caller, sb, path, [&](AgentConnection& c, const std::string& p) {
    return files::mkdir(c, p, parents);
  });
}

SResult<> Manager::removeFile(const Caller& caller, const std::string& sb, const std::string& path,
                              bool recursive) {
  return fileOp(caller, sb, path, [&](AgentConnection& c, const std::string& p) {
    return files::remove(c, p, recursive);
  });
}

SResult<> Manager::renameFile(const Caller& caller, const std::string& sb, const std::string& from,
                              const std::string& to) {
  // Both named as the request names them ("from", "to") when they are not absolute.
  if (auto f = files::checkPath(from, "from"); !f) return std::unexpected(f.error());
  auto t = files::checkPath(to, "to");
  if (!t) return std::unexpected(t.error());
  return fileOp(caller, sb, from,
                [&](AgentConnection& c, const std::string& f) { return files::rename(c, f, *t); });
}

SResult<std::vector<WorkspaceInfo>> Manager::listWorkspaces(const Caller& caller) {
  auto list = workspaces_.list(caller.tenant);
  if (!list) return serviceError(ErrorCode::kInternal, list.error().message());
  return *list;
}

SResult<> Manager::deleteWorkspace(const Caller& caller, const std::string& name) {
  if (!validName(name))
    return serviceError(ErrorCode::kBadRequest,
                        "workspace '" + name + "': use 1 to 63 of A-Z a-z 0-9 . _ -");
  auto r = workspaces_.remove(caller.tenant, name);
  if (r) return {};
  int e = r.error().errnum();
  if (e == ENOENT) return serviceError(ErrorCode::kNotFound, "workspace '" + name + "' not found");
  if (e == EBUSY)
    return serviceError(ErrorCode::kConflict,
                        "workspace '" + name + "' is in use by a running sandbox");
  return serviceError(ErrorCode::kInternal, r.error().message());
}

}  // namespace airlock::sandbox
