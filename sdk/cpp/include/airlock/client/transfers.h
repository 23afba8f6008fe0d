// Archives in and out of a sandbox (docs/transfer.md): a URL or an operator's host directory
// unpacked into a sandbox directory, a directory packed and sent out, or an archive moved through
// the request itself. Sandbox::transferIn, transferOut, uploadArchive and downloadArchive
// (sandbox.h) answer with these records.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "airlock/client/error.h"

namespace airlock::sdk {

// One transfer as the supervisor records it (docs/transfer.md, The record).
struct TransferRecord {
  std::string id;         // tr-<n>; empty for the archive routes
  std::string direction;  // in or out
  std::string plugin;     // http, hostdir, archive; upload/download for the archive routes
  std::string location;   // the source or destination with credentials removed
  std::string sandbox_path;
  uint64_t files = 0;
  uint64_t dirs = 0;
  uint64_t links = 0;
  uint64_t bytes = 0;          // unpacked (in) or packed (out)
  uint64_t archive_bytes = 0;  // the archive's bytes that crossed
  std::string sha256;          // "" when nothing crossed
  double ms = 0;
  std::string status;            // ok, error, denied, cancelled; running while it runs
  std::string error;             // what was wrong, naming the entry, URL or rule; "" when ok
  std::optional<Review> review;  // the review chain's verdict, when the profile reviews transfers

  bool ok() const { return status == "ok"; }
};

// A progress event of a running transfer, about four a second.
struct TransferProgress {
  std::string transfer_id;
  uint64_t bytes = 0;  // archive bytes moved so far
  uint64_t rate_bps = 0;
};

struct TransferOptions {
  std::function<void(const TransferProgress&)> on_progress;
};

}  // namespace airlock::sdk
