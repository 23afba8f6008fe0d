// The result of one execution, as `airlock run` reports it (exit code, --json record).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "supervisor/review/verdict.h"

namespace airlock::sandbox {

// Exit codes of `airlock run` that are not the program's own (documented in README.md).
inline constexpr int kExitMemoryLimit = 122;   // the sandbox hit its memory limit (OOM kill)
inline constexpr int kExitRefused = 123;       // the policy refused the request
inline constexpr int kExitTimeout = 124;       // the execution hit its wall-clock limit
inline constexpr int kExitAirlockError = 125;  // airlock itself failed (usage, policy, sandbox)

enum class Status { kExited, kSignaled, kTimeout, kMemoryLimit, kRefused, kError };
const char* statusName(Status s);

struct FileOutcome {
  std::string sandbox_path;
  std::string local_path;
  uint64_t bytes = 0;
  std::string error;  // empty on success
};

// One transfer: an archive moved in (unpacked) or a directory out (packed) through a transfer
// plugin (transfer_job.h): the record in a run's result, on the API and in the audit log.
struct TransferOutcome {
  std::string id;         // "tr-<n>" on the API; empty in a run's result
  std::string direction;  // "in" or "out"
  std::string plugin;     // the transfer plugin's short name ("archive", "http", "hostdir")
  std::string location;   // the source (in) or destination (out), credentials removed
  std::string sandbox_path;
  uint64_t files = 0, dirs = 0, links = 0;
  uint64_t bytes = 0;        // extracted or packed
  uint64_t moved_bytes = 0;  // the archive's
  std::string sha256;        // of the archive's bytes
  double ms = 0;
  std::string error;  // empty on success
  // "ok", "error", "denied" (a rule or the review chain refused it; nothing was left in the
  // sandbox) or "cancelled"
  std::string status = "ok";
  nlohmann::json review;  // the review chain's last verdict (Verdict::toJson); null: none ran
};

nlohmann::json transferJson(const TransferOutcome& t);

struct RunResult {
  static constexpr int kSchema = 1;
  Status status = Status::kError;
  int exit_code = -1;   // the program's, when status is kExited
  int signal = 0;       // the terminating signal, when kSignaled (or a kill on timeout/OOM)
  std::string message;  // what happened, for anything but a plain exit

  std::string sandbox_id, language, profile, policy_source, policy_hash;
  std::string stdout_data, stderr_data;
  bool stdout_truncated = false, stderr_truncated = false;
  uint64_t stdout_bytes = 0, stderr_bytes = 0;

  double total_ms = 0, prepare_ms = 0, create_ms = 0, exec_ms = 0, teardown_ms = 0;
  std::vector<std::pair<std::string, double>> create_steps;  // the parts of create_ms
  uint64_t user_us = 0, sys_us = 0, max_rss_kb = 0;
  uint64_t memory_peak_bytes = 0, oom_kills = 0;

  std::vector<FileOutcome> files_in, files_out;
  std::vector<TransferOutcome> transfers;
  std::vector<std::string> relaxations;
  // The review chain's verdict ("review" in the record; null when the profile reviews nothing).
  // A deny (or a hold, which `airlock run` cannot wait out) makes the status kRefused.
  std::optional<review::Verdict> review;
  // The execution's audit summary (docs/audit.md) as JSON ("audit" in the record; null when the
  // profile audits nothing or no sandbox ran).
  nlohmann::json audit;

  // What `airlock run` exits with: the program's code, 128+signal, or one of kExit*.
  int processExitCode() const;
  // What `airlock run` exits with: processExitCode(), but 125 when the program succeeded and a
  // file or a transfer out failed (the run did not do its job).
  int airlockExitCode() const;
  nlohmann::json toJson() const;
};

// The record of a run that could not be attempted at all (bad policy, unknown language, no
// sandbox): {"schema", "status": "error", "airlock_exit_code": 125, "message"}.
nlohmann::json errorRecord(const std::string& message);

// Bytes as a JSON string: valid UTF-8 kept, each invalid byte replaced by U+FFFD.
std::string toValidUtf8(const std::string& bytes);

}  // namespace airlock::sandbox
