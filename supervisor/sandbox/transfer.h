// Transfers through the agent's helper (agent/transfer_helper.h): an archive streamed into a
// sandbox and unpacked there, or a sandbox directory packed there and streamed out. The host only
// moves bytes: it never parses an archive or touches the sandbox's files. It counts what moved
// and hashes it (sha256), caps the bytes it sends, and frames the stream so the helper commits
// only a complete one.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/result.h"
#include "supervisor/sandbox/agent/connection.h"

namespace airlock::sandbox {

struct TransferLimits {
  uint64_t max_bytes = 1ull << 30;  // archive bytes moved, and bytes extracted or packed
  uint64_t max_files = 100000;      // entries extracted or packed
  uint64_t max_depth = 64;          // path components of an entry
  uint64_t max_ratio = 200;         // extracted bytes per archive byte (unpack)
};

struct TransferSummary {
  uint64_t files = 0, dirs = 0, links = 0;
  uint64_t bytes = 0;        // extracted or packed (uncompressed)
  uint64_t moved_bytes = 0;  // the archive's bytes that crossed the channel
  std::string sha256;        // of those bytes
  double seconds = 0;
};

// The next chunk of the archive; an empty string ends it; an error aborts the transfer (the
// helper then removes what it staged).
using ChunkSource = std::function<Result<std::string>()>;
// Takes each chunk of the packed archive; an error aborts.
using ChunkSink = std::function<Result<>(std::string_view)>;

// An archive's entries as the helper listed them once it was staged, for the review chain.
struct ArchiveListing {
  struct Entry {
    std::string type;   // "file", "dir", "symlink", "hardlink"
    uint64_t size = 0;  // a file's size from its header
    std::string name;   // "name -> target" for a link; control bytes as \xHH
  };
  std::vector<Entry> entries;  // the first kListingCap bytes' worth
  uint64_t total = 0;          // every entry, listed or not
  bool truncated = false;
};

// How much of an archive's listing the helper sends (the rest is counted, not listed).
inline constexpr uint64_t kListingCap = 1 << 20;

// What a caller watches or decides while the bytes move; every member may be empty.
struct TransferHooks {
  std::function<void(uint64_t moved_bytes)> progress;  // after each chunk
  std::function<bool()> cancelled;                     // asked before each chunk
  // In: after the source's last byte and before the helper may commit; an error (a download
  // cut short) makes the helper discard everything instead.
  std::function<Result<>()> complete;
  // In: once the whole archive is staged inside the sandbox and before it moves into place;
  // an error refuses it (the helper removes the staged tree). Only for unpackInto.
  std::function<Result<>(const ArchiveListing&)> review;
};

// Unpacks the archive `source` yields into `dir` (absolute, inside the sandbox). `env` is the
// execution's environment.
Result<TransferSummary> unpackInto(AgentConnection& conn, const std::string& dir,
                                   const ChunkSource& source, const TransferLimits& limits,
                                   const std::vector<std::string>& env,
                                   std::chrono::steady_clock::time_point deadline,
                                   const TransferHooks& hooks = {});

// Packs `dir` as `format` (tar, tar.gz, tar.zst, zip) into `sink`.
Result<TransferSummary> packFrom(AgentConnection& conn, const std::string& dir,
                                 const std::string& format, const ChunkSink& sink,
                                 const TransferLimits& limits, const std::vector<std::string>& env,
                                 std::chrono::steady_clock::time_point deadline,
                                 const TransferHooks& hooks = {});

// The error of a transfer stopped by TransferHooks::cancelled.
inline constexpr const char* kTransferCancelled = "the transfer was cancelled";

// A ChunkSource over an open file descriptor (a local archive, a pipe from a download).
ChunkSource fdChunks(int fd, std::string what);

}  // namespace airlock::sandbox
