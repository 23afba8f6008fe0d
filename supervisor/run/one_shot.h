// `airlock run`: one sandbox, one execution, then nothing left behind.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "airlock/result.h"
#include "supervisor/run/run_result.h"

namespace airlock::run {

struct FileCopy {
  std::string local;    // host path
  std::string sandbox;  // sandbox path; relative paths are under /home/user
};

struct RunRequest {
  std::string language;  // name or alias; empty: chosen by the script's extension
  bool inline_code = true;
  std::string code;    // inline program text
  std::string script;  // host path of a program file (inline_code == false)
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  std::vector<FileCopy> files_in;
  std::vector<FileCopy> files_out;
  int stdin_fd = -1;   // forwarded to the program when >= 0
  int cancel_fd = -1;  // readable when airlock is asked to stop: the run is torn down

  // false: the profile's review chain is not run (the reviewers' own checker sandboxes).
  bool review = true;
  // false: no eBPF audit even when the profile asks (the reviewers' checker sandboxes).
  bool audit = true;

  std::string policy_file;  // empty: the built-in default policy
  std::string profile;      // empty: the policy's default profile
  std::optional<uint32_t> timeout_s;
  std::optional<uint64_t> memory_mb;

  // Live output: the program's stdout/stderr are written here as they arrive (-1: collect only).
  int live_stdout_fd = -1;
  int live_stderr_fd = -1;
  // Where each policy relaxation of the chosen profile is logged before the run (-1: nowhere;
  // the result record lists them either way).
  int log_fd = -1;
};

struct RunPaths {
  std::string plugin_dir;
  std::string agent_path;
  std::string state_dir = "/run/airlock";
};

// Runs the request: the profile's review chain first (docs/review.md), then the sandbox. Returns
// an Error only when nothing could be attempted (bad policy file, unknown language, a review
// chain that cannot be built, no sandbox); everything else, including policy and review
// refusals, timeouts and OOM kills, is a RunResult.
Result<RunResult> runOnce(const RunRequest& request, const RunPaths& paths);

// Where a sandbox path given by the user lands: relative → /home/user/<p>. Rejects empty paths
// and paths with NUL. Exposed for tests.
Result<std::string> sandboxPath(const std::string& p);

}  // namespace airlock::run
