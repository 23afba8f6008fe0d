// How reviewers that run a program to judge (python_ast's checker, the operator's `command`) get
// a throwaway sandbox. The review library never runs such programs in the supervisor or on the
// host: whoever builds a chain injects a runner. The sandbox manager injects its own
// (sandbox/review_runner.h): each check is a one-shot program in a fresh sandbox of the reviewed
// profile.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "airlock/result.h"

namespace airlock::review {

struct SandboxJob {
  std::string language = "python";  // a language the profile allows
  std::string code;                 // the program (the checker script), run as inline code
  // Instead of `code`: a program run as is, no language (the operator's review command; its
  // directory is bound read-only into the sandbox).
  std::vector<std::string> argv;
  std::string stdin_data;                    // its standard input (the request)
  std::chrono::milliseconds timeout{10000};  // everything included; then the job is killed
};

struct SandboxJobResult {
  int exit_code = -1;  // the program's exit code; -1 when it did not exit by itself
  bool timed_out = false;
  std::string stdout_data, stderr_data;
  int signal = 0;  // the signal that killed it, if one did
};

class SandboxRunner {
 public:
  virtual ~SandboxRunner() = default;
  // Runs the job in a sandbox that holds nothing else and keeps nothing afterwards. An Error
  // when no sandbox could run it. Thread-safe: chains call it from many threads.
  virtual Result<SandboxJobResult> run(const SandboxJob& job) = 0;
};

}  // namespace airlock::review
