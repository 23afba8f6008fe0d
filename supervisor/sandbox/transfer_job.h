// One transfer from start to end, for `airlock run` and the API alike: the plugin that takes
// the location, the profile's verdict on it, the plugin's open, the bytes streamed to or from
// the agent's helper, and the plugin's finish. The host never parses an archive or touches the
// sandbox's files: the helper unpacks and packs inside, as the sandbox user.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "airlock/policy/policy.h"
#include "supervisor/plugin/registry.h"
#include "supervisor/review/verdict.h"
#include "supervisor/sandbox/agent/connection.h"
#include "supervisor/sandbox/run_result.h"
#include "supervisor/sandbox/transfer.h"

namespace airlock::sandbox {

struct TransferJob {
  bool in = true;
  std::string location;  // the source (in) or the destination (out), as the caller wrote it
  std::string path;      // the sandbox directory, absolute
  // An API client: local paths name the supervisor's own files, so they are refused.
  bool remote_caller = false;
  std::string tenant, sandbox_id;
  std::vector<std::string> env;  // the helper's environment
  std::chrono::steady_clock::time_point deadline;
  // The profile's review chain (Manager::judge), asked once the plugin has opened the location
  // and, for an archive coming in, again with its listing before it moves into place. Empty, or
  // nullopt from it: the profile reviews nothing.
  std::function<std::optional<review::Verdict>(review::Subject)> review;
};

// Cancels a running transfer from another thread: the next chunk stops it, and a source
// blocked in a read (a stalled download) is shut so the read returns at once.
class TransferControl {
 public:
  void cancel() {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
  }
  bool cancelled() const { return cancelled_; }
  // The fd a cancel shuts; -1 before that fd is closed, so a cancel never hits a reused number.
  void watch(int fd) {
    std::lock_guard lock(mu_);
    fd_ = fd;
  }

 private:
  std::mutex mu_;
  std::atomic<bool> cancelled_{false};
  int fd_ = -1;
};

// Copies what moved (counts, bytes, hash, duration) into the outcome.
void recordSummary(TransferOutcome& out, const TransferSummary& summary);

// Runs `job`. Never fails as such: the outcome says what moved, or its status and error.
// `sandbox_moved` is what the sandbox's transfers moved before (its sandbox_max_mb cap).
TransferOutcome runTransfer(plugin::Registry& registry, const policy::Profile& profile,
                            const policy::TransferSettings& host, AgentConnection& conn,
                            const TransferJob& job, uint64_t sandbox_moved,
                            const std::function<void(uint64_t moved_bytes)>& progress = {},
                            TransferControl* control = nullptr);

}  // namespace airlock::sandbox
