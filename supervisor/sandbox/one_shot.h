// One-shot programs: one sandbox, one program, then nothing left behind. What `airlock run` asks
// of the manager (Manager::runProgram), and what reviewers' checker programs run as.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/protocol/messages.h"
#include "airlock/result.h"
#include "supervisor/sandbox/run_result.h"

namespace airlock::sandbox {

struct FileCopy {
  std::string local;    // host path
  std::string sandbox;  // sandbox path; relative paths are under /home/user
};

// The archive format a local file's name asks for: "tar", "tar.gz", "tar.zst", "zip"; "" when
// it names none.
std::string archiveFormatOf(const std::string& name);
// Whether a location names a transfer rather than a local file: a scheme a transfer plugin
// takes ("https://", "hostdir:"), as opposed to a plain local path.
bool namesTransfer(const std::string& location);

struct RunRequest {
  std::string language;  // name or alias; empty: chosen by the script's extension
  bool inline_code = true;
  std::string code;    // inline program text
  std::string script;  // host path of a program file (inline_code == false)
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  std::vector<FileCopy> files_in;
  std::vector<FileCopy> files_out;
  // `--in SOURCE:DIR`: archives unpacked into sandbox directories by the agent's helper before
  // the program, SOURCE a location a transfer plugin takes (a local archive, a URL,
  // hostdir:NAME/path; transfer_job.h). A files_out entry whose local side names a transfer
  // (a URL, hostdir:...), or a directory whose local name ends in .tar, .tar.gz, .tgz, .tar.zst
  // or .zip, is packed and sent through its plugin.
  std::vector<FileCopy> transfers_in;
  // An API caller (POST /v1/runs): transfers may not name the supervisor's local files.
  bool remote_caller = false;
  // The program's stdin: this fd's bytes as they come (>= 0), or stdin_data (has_stdin_data),
  // or nothing (/dev/null).
  int stdin_fd = -1;
  std::string stdin_data;
  bool has_stdin_data = false;

  // false: the profile's review chain is not run (the reviewers' own checker sandboxes).
  bool review = true;
  // false: no eBPF audit even when the profile asks (the reviewers' checker sandboxes).
  bool audit = true;
  // A reviewer's checker program (review_runner.cc): `airlock serve` hands it to one of the
  // profile's pre-started checker interpreters (review.python_ast.pool_size), ended fast.
  bool checker = false;
  // A program run as is instead of `code` in a language (the `command` reviewer's): argv[0] an
  // absolute path, whose directory is bound read-only into the sandbox; no review, no language.
  std::vector<std::string> argv;

  std::string profile;  // empty: the policy's default profile
  std::optional<uint32_t> timeout_s;
  std::optional<uint64_t> memory_mb;
  std::optional<std::string> isolation;  // `airlock run --isolation`: the profile's backend
  // Bytes of each stream kept in the result (and forwarded by the agent); 0: the profile's
  // limits.output_bytes.
  uint64_t output_cap = 0;
  // Everything included (sandbox, files, program): past it the run ends as a timeout.
  std::optional<std::chrono::steady_clock::time_point> deadline;

  // Live output: the program's stdout/stderr are written here as they arrive (-1: collect only).
  int live_stdout_fd = -1;
  int live_stderr_fd = -1;
  // Where each policy relaxation of the chosen profile is logged before the run (-1: nowhere;
  // the result record lists them either way).
  int log_fd = -1;
  // Set (`airlock run` without -v): log_fd gets one summary line of the relaxations
  // (policy::relaxationSummary) instead of one line each.
  bool summarize_relaxations = false;

  // Runs served by `airlock serve` (POST /v1/runs, run_service.cc) set these four.
  // Live output as a callback: called on the thread that runs runProgram, once for each chunk
  // of stdout or stderr the agent forwards, in order, before the chunk is appended to the
  // result; as well as (not instead of) live_stdout_fd/live_stderr_fd. Empty: not called.
  std::function<void(protocol::Stream, std::string_view)> on_output;
  // Set: called exactly once, when the run's sandbox is gone (or was never made). A served run
  // then returns as soon as its result is complete and a pre-started sandbox is destroyed in
  // the background (the caller's quota reservation is released here); unset, runProgram
  // destroys it before returning.
  std::function<void()> on_destroyed;
  // The API tenant asking: written into the run's audit records (its sandbox's, and the review
  // record's) as the sandbox's tenant. Empty: none (`airlock run`, checker programs).
  std::string tenant;
  // Readable (an eventfd or pipe with data) when the caller has gone and the run is to stop:
  // every wait of this run ends, the sandbox is torn down, and runProgram returns (an Error or
  // a result; the caller discards it). -1: only the deadline and the timeout stop it. The
  // manager never reads from it.
  int cancel_fd = -1;
  // The largest file copied out (files_out), bytes: a larger one is not copied (nothing is
  // left at its local path) and its outcome's error says so. 0: the profile's workspace_mb.
  uint64_t file_out_limit = 0;
};

// What a one-shot run says of a hold: there is no operator to ask.
inline constexpr const char* kHoldNeedsServe = "held for approval, which needs airlock serve";

}  // namespace airlock::sandbox
