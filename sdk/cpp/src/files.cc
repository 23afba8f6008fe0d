#include "airlock/client/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "airlock/client/http.h"
#include "airlock/unique_fd.h"
#include "json_fields.h"

namespace airlock::sdk {

namespace {

using Unexpected = std::unexpected<Error>;

std::string octal(uint32_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04o", mode & 07777);
  return buf;
}

EntryInfo entryFrom(const Json& e, const std::string& dir) {
  EntryInfo info;
  info.name = fields::str(e, "name");
  info.path = fields::str(e, "path");
  if (info.path.empty()) info.path = (dir.ends_with('/') ? dir : dir + "/") + info.name;
  info.type = fields::str(e, "type");
  info.size = static_cast<uint64_t>(fields::integer(e, "size"));
  info.mode = static_cast<uint32_t>(fields::integer(e, "mode"));
  info.mtime_ms = fields::integer(e, "mtime_ms");
  return info;
}

Unexpected localError(const std::string& op, const std::string& path) {
  int e = errno;
  return failWith(ErrorKind::kInvalidArgument, op + " '" + path + "': " + std::strerror(e));
}

}  // namespace

Files::Files(std::shared_ptr<const Http> http, std::string sandbox_target)
    : http_(std::move(http)), sandbox_target_(std::move(sandbox_target)) {}

std::string Files::target(const std::string& route, const std::string& path) const {
  return sandbox_target_ + "/files" + route + "?path=" + percentEncode(path);
}

Result<> Files::write(const std::string& path, std::string_view bytes, uint32_t mode) const {
  auto r = http_->upload(target("", path) + "&mode=" + octal(mode), bytes);
  if (!r) return Unexpected(r.error());
  return {};
}

Result<std::string> Files::read(const std::string& path) const {
  std::string out;
  auto r = http_->download(target("", path), [&](std::string_view piece) -> Result<> {
    out.append(piece);
    return {};
  });
  if (!r) return Unexpected(r.error());
  return out;
}

Result<> Files::upload(const std::string& local_path, const std::string& path) const {
  UniqueFd fd(::open(local_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return localError("open", local_path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return localError("fstat", local_path);
  auto r = http_->upload(target("", path) + "&mode=" + octal(st.st_mode), fd.get(),
                         static_cast<uint64_t>(st.st_size));
  if (!r) return Unexpected(r.error());
  return {};
}

Result<> Files::download(const std::string& path, const std::string& local_path) const {
  // Into a temporary beside the destination, renamed on success: a failed download never
  // leaves a truncated file under the final name.
  std::string partial = local_path + ".airlock-partial";
  UniqueFd fd(::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) return localError("open", partial);
  auto r = http_->download(target("", path), fd.get());
  if (!r) {
    ::unlink(partial.c_str());
    return Unexpected(r.error());
  }
  if (::rename(partial.c_str(), local_path.c_str()) != 0) {
    auto err = localError("rename", local_path);
    ::unlink(partial.c_str());
    return err;
  }
  return {};
}

Result<std::vector<EntryInfo>> Files::list(const std::string& path) const {
  auto r = http_->call("GET", target("/list", path));
  if (!r) return Unexpected(r.error());
  auto it = r->find("entries");
  if (it == r->end() || !it->is_array())
    return failWith(ErrorKind::kProtocol, "list '" + path + "': answer has no 'entries' array");
  std::vector<EntryInfo> out;
  for (const auto& e : *it) out.push_back(entryFrom(e, path));
  return out;
}

Result<EntryInfo> Files::stat(const std::string& path) const {
  auto r = http_->call("GET", target("/stat", path));
  if (!r) return Unexpected(r.error());
  auto info = entryFrom(*r, path);
  if (info.path.empty()) info.path = path;
  return info;
}

Result<bool> Files::exists(const std::string& path) const {
  auto r = stat(path);
  if (r) return true;
  if (r.error().kind() == ErrorKind::kNotFound) return false;
  return Unexpected(r.error());
}

Result<> Files::mkdir(const std::string& path, bool parents) const {
  auto r = http_->call("POST", sandbox_target_ + "/files/mkdir",
                       Json{{"path", path}, {"parents", parents}});
  if (!r) return Unexpected(r.error());
  return {};
}

Result<> Files::remove(const std::string& path, bool recursive) const {
  auto r = http_->call("POST", sandbox_target_ + "/files/remove",
                       Json{{"path", path}, {"recursive", recursive}});
  if (!r) return Unexpected(r.error());
  return {};
}

Result<> Files::rename(const std::string& from, const std::string& to) const {
  auto r = http_->call("POST", sandbox_target_ + "/files/rename", Json{{"from", from}, {"to", to}});
  if (!r) return Unexpected(r.error());
  return {};
}

}  // namespace airlock::sdk
