// Shared machinery of the hostile suite: the isolation guard, sandbox and bare runners, probes,
// host-side observers (process scans, cgroup sampling, free space) and the per-case fixture.
//
// Every case is tagged with its class (docs/security-tests.md) in its name (Escape, HostLeak,
// Exfil, Lateral, HostDoS, PeerDoS) and pairs the attack with a positive control that shows the
// probe detects the attack where it is harmless. Before any case runs, IsolationGuard checks that
// `airlock run` really gives an unprivileged uid map and a private pid namespace, and aborts the
// whole binary otherwise: the attacks must never run against the machine itself.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "test_support.h"

namespace airlock::hostile {

using airlock::testing::ProcResult;

inline constexpr uint64_t kSandboxUidBase = 1ull << 28;

// airlock exit codes (see `airlock run --help`).
inline constexpr int kExitMemory = 122;
inline constexpr int kExitRefused = 123;
inline constexpr int kExitTimeout = 124;
inline constexpr int kExitAirlockError = 125;

// One `airlock run --json` and its parsed record.
struct SandboxRun {
  ProcResult proc;
  nlohmann::json result;  // discarded (is_discarded()) when stdout was not one JSON object
  bool parsed() const { return !result.is_discarded() && result.is_object(); }
  std::string status() const;
  std::string out() const;  // the program's stdout as recorded in the JSON
  std::string err() const;
  // Everything needed to understand a failure, bounded in size.
  std::string describe() const;
};

struct RunOptions {
  std::vector<std::string> flags;  // extra airlock flags (--policy, --timeout, --env, ...)
  std::vector<std::string> args;   // program arguments after "--"
  int timeout_s = 120;             // kill airlock itself after this long (a hang is a failure)
};

// airlock run --json --no-stdin --lang LANG -c CODE FLAGS... [-- ARGS...]
SandboxRun runSandbox(const std::string& lang, const std::string& code,
                      const RunOptions& opts = {});

// A hostile-suite probe script (tests/hostile/probes/NAME), read from the source tree.
std::string probe(const std::string& name);

// The same code without airlock: a plain child of the test (real root on the host). Only for
// probes that are harmless there.
ProcResult runBarePython(const std::string& code, const std::vector<std::string>& args = {},
                         int timeout_s = 60);
// Bare, in a throwaway user+pid+mount+net+uts+ipc+cgroup namespace with root mapped (the
// unrestricted namespace control of docs/security-tests.md).
ProcResult runUnsharedPython(const std::string& code, const std::vector<std::string>& args = {},
                             int timeout_s = 60);

// A policy file with one "default" profile whose [limits] are the given TOML lines
// ("pids = 64"); written into dir, path returned.
std::string writePolicy(const airlock::testing::TempDir& dir, const std::string& limits_toml);

// A fresh token of digits, usable as the fractional part of a `sleep` argument.
std::string uniqueToken();

// Host pids whose /proc/<pid>/cmdline contains token (never the test itself).
std::vector<pid_t> findProcesses(const std::string& token);
// Kills each pid with SIGKILL and waits (bounded) until it is gone from /proc.
void killAndForget(const std::vector<pid_t>& pids);
bool processAlive(pid_t pid);  // exists and is not a zombie

// posix_spawn without waiting; stdio to /dev/null. Returns the pid or -1.
pid_t spawnBackground(const std::vector<std::string>& argv);

// Free bytes and inodes available to an unprivileged user on the filesystem holding path.
struct FreeSpace {
  uint64_t bytes = 0;
  uint64_t inodes = 0;
};
FreeSpace freeSpace(const std::string& path);

// Samples the pids cgroups of every live sandbox process while a run is in flight (a thread):
// for each limited pids cgroup seen (nearest ancestor whose pids.max is not "max"), the limit
// and the largest pids.current observed; plus the slowest fork+exec of /bin/true on the host.
class PidsSampler {
 public:
  struct Group {
    std::string path;
    long limit = -1;
    long max_current = 0;
    long max_counted = 0;  // processes we saw in /proc at once (threads not included)
  };
  PidsSampler();
  ~PidsSampler();
  PidsSampler(const PidsSampler&) = delete;
  PidsSampler& operator=(const PidsSampler&) = delete;
  // Stops sampling and returns what was seen.
  std::vector<Group> stop();
  double slowestHostSpawnMs() const { return slowest_spawn_ms_; }
  int samples() const { return samples_; }

 private:
  void loop();
  std::atomic<bool> running_{true};
  std::map<std::string, Group> groups_;  // by cgroup path; written by the thread only
  double slowest_spawn_ms_ = 0;
  int samples_ = 0;
  std::thread thread_;
};

// Parses the kernel_surface.py output (one JSON object) or fails the test.
nlohmann::json parseProbeJson(const std::string& out, const std::string& context);

// The per-case fixture: root required, the isolation guard passed, and the host's airlock
// resources (mounts, cgroups, sandbox-uid processes) the same after the case as before.
class HostileTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  // Asserts airlock exited with `code` and the JSON record says `status`.
  static void expectOutcome(const SandboxRun& run, const std::string& status, int code);

 private:
  airlock::testing::HostResources before_;
  bool armed_ = false;
};

}  // namespace airlock::hostile
