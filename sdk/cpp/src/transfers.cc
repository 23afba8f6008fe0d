// Sandbox's transfer calls (sandbox.h, transfers.h): POST/GET/DELETE .../transfers and
// PUT/GET .../archive (docs/transfer.md).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "airlock/client/http.h"
#include "airlock/client/sandbox.h"
#include "airlock/unique_fd.h"
#include "api_error.h"
#include "json_fields.h"

namespace airlock::sdk {

namespace {

using Unexpected = std::unexpected<Error>;

TransferRecord recordFrom(const Json& doc) {
  TransferRecord t;
  t.id = fields::str(doc, "id");
  t.direction = fields::str(doc, "direction");
  t.plugin = fields::str(doc, "plugin");
  t.location = fields::str(doc, "location");
  t.sandbox_path = fields::str(doc, "sandbox_path");
  t.files = static_cast<uint64_t>(fields::integer(doc, "files"));
  t.dirs = static_cast<uint64_t>(fields::integer(doc, "dirs"));
  t.links = static_cast<uint64_t>(fields::integer(doc, "links"));
  t.bytes = static_cast<uint64_t>(fields::integer(doc, "bytes"));
  t.archive_bytes = static_cast<uint64_t>(fields::integer(doc, "archive_bytes"));
  t.sha256 = fields::str(doc, "sha256");
  t.ms = fields::number(doc, "ms");
  t.status = fields::str(doc, "status");
  t.error = fields::str(doc, "error");
  if (auto it = doc.find("review"); it != doc.end() && it->is_object())
    t.review = reviewFromJson(*it);
  return t;
}

// The record, or kTransferFailed when it did not end ok.
Result<TransferRecord> checked(TransferRecord t, const std::string& what) {
  if (t.ok()) return t;
  const std::string status = t.status.empty() ? "no status" : t.status;
  return Unexpected(Error(
      ErrorKind::kTransferFailed,
      what + ": " + status + ": " + (t.error.empty() ? "no reason given" : t.error), 0, t.status));
}

bool knownFormat(const std::string& format) {
  return format == "tar" || format == "tar.gz" || format == "tar.zst" || format == "zip";
}

Unexpected localError(const std::string& op, const std::string& path) {
  int e = errno;
  return failWith(ErrorKind::kInvalidArgument, op + " '" + path + "': " + std::strerror(e));
}

Result<TransferRecord> startTransfer(const Http& http, const std::string& sandbox_target, bool in,
                                     const std::string& location, const std::string& path,
                                     const TransferOptions& o) {
  const char* key = in ? "source" : "dest";
  if (location.empty())
    return failWith(ErrorKind::kInvalidArgument,
                    std::string("transfer ") + (in ? "in" : "out") + ": " + key + " is empty");
  const std::string what = std::string("transfer ") + (in ? "in '" : "out '") + location + "' " +
                           (in ? "into " : "from ") + path;
  Json body = {{"direction", in ? "in" : "out"}, {key, location}, {"path", path}};
  std::optional<TransferRecord> record;
  auto r = http.stream("POST", sandbox_target + "/transfers", body, [&](const Json& ev) {
    const std::string type = fields::str(ev, "type");
    if (type == "progress" && o.on_progress) {
      o.on_progress({fields::str(ev, "transfer_id"),
                     static_cast<uint64_t>(fields::integer(ev, "bytes")),
                     static_cast<uint64_t>(fields::integer(ev, "rate_bps"))});
    } else if (type == "transfer") {
      record = recordFrom(ev);
    }
  });
  if (!r) return Unexpected(std::move(r.error()).wrap(what));
  if (!record)
    return failWith(ErrorKind::kProtocol, what + ": the stream ended without a 'transfer' event");
  return checked(std::move(*record), what);
}

std::string archiveTarget(const std::string& sandbox_target, const std::string& path) {
  return sandbox_target + "/archive?path=" + percentEncode(path);
}

}  // namespace

Result<TransferRecord> Sandbox::transferIn(const std::string& source, const std::string& path,
                                           const TransferOptions& options) const {
  return startTransfer(*http_, target(), true, source, path, options);
}

Result<TransferRecord> Sandbox::transferOut(const std::string& dest, const std::string& path,
                                            const TransferOptions& options) const {
  return startTransfer(*http_, target(), false, dest, path, options);
}

Result<std::vector<TransferRecord>> Sandbox::listTransfers() const {
  auto doc = http_->call("GET", target() + "/transfers");
  if (!doc) return Unexpected(doc.error());
  auto it = doc->find("transfers");
  if (it == doc->end() || !it->is_array())
    return failWith(ErrorKind::kProtocol, "list transfers: answer has no 'transfers' array");
  std::vector<TransferRecord> out;
  for (const auto& t : *it)
    if (t.is_object()) out.push_back(recordFrom(t));
  return out;
}

Result<bool> Sandbox::cancelTransfer(const std::string& transfer_id) const {
  auto r = http_->call("DELETE", target() + "/transfers/" + percentEncode(transfer_id));
  if (r) return true;
  if (r.error().kind() == ErrorKind::kNotFound || r.error().kind() == ErrorKind::kConflict)
    return false;
  return Unexpected(r.error());
}

Result<TransferRecord> Sandbox::uploadArchive(const std::string& path,
                                              std::string_view archive) const {
  auto doc = http_->upload(archiveTarget(target(), path), archive);
  if (!doc) return Unexpected(doc.error());
  return checked(recordFrom(*doc), "upload archive into " + path);
}

Result<TransferRecord> Sandbox::uploadArchiveFrom(const std::string& local_path,
                                                  const std::string& path) const {
  UniqueFd fd(::open(local_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return localError("open", local_path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return localError("fstat", local_path);
  auto doc =
      http_->upload(archiveTarget(target(), path), fd.get(), static_cast<uint64_t>(st.st_size));
  if (!doc) return Unexpected(doc.error());
  return checked(recordFrom(*doc), "upload archive into " + path);
}

Result<std::string> Sandbox::downloadArchive(const std::string& path,
                                             const std::string& format) const {
  if (!knownFormat(format))
    return failWith(ErrorKind::kInvalidArgument,
                    "archive format '" + format + "': expected tar, tar.gz, tar.zst or zip");
  std::string out;
  auto r = http_->download(archiveTarget(target(), path) + "&format=" + percentEncode(format),
                           [&](std::string_view piece) -> Result<> {
                             out.append(piece);
                             return {};
                           });
  if (!r) return Unexpected(r.error());
  return out;
}

Result<uint64_t> Sandbox::downloadArchiveTo(const std::string& path, const std::string& local_path,
                                            const std::string& format) const {
  if (!knownFormat(format))
    return failWith(ErrorKind::kInvalidArgument,
                    "archive format '" + format + "': expected tar, tar.gz, tar.zst or zip");
  // As Files::download: into a temporary beside the destination, renamed on success.
  std::string partial = local_path + ".airlock-partial";
  UniqueFd fd(::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) return localError("open", partial);
  auto r =
      http_->download(archiveTarget(target(), path) + "&format=" + percentEncode(format), fd.get());
  if (!r) {
    ::unlink(partial.c_str());
    return Unexpected(r.error());
  }
  if (::rename(partial.c_str(), local_path.c_str()) != 0) {
    auto err = localError("rename", local_path);
    ::unlink(partial.c_str());
    return err;
  }
  return *r;
}

}  // namespace airlock::sdk
