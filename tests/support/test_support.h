// Helpers shared by every airlock test binary.
#pragma once

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace airlock::testing {

// True when we are root in the initial user namespace: /proc/self/uid_map maps 0 to 0 over the
// whole range (crun tests/tests_utils.py::is_rootless). Root inside a container's user
// namespace is not enough for cgroups, pidfds on foreign processes or mounts on the host.
bool isRealRoot();

// Whether a missing privilege must fail the test instead of skipping it
// (AIRLOCK_TEST_REQUIRE_PRIVILEGED=1, set by CI).
bool privilegeRequired();

// Paths of build outputs, from the build tree the tests were configured in.
std::string buildDir();
std::string sourceDir();
std::string airlockBinary();
std::string agentBinary();
std::string pluginDir();

struct ProcResult {
  int exit_code = -1;  // exit status, or 128+signal
  std::string out;
  std::string err;
  bool timed_out = false;
};

// Runs argv (no shell) with stdin_data on stdin; kills it (by pid) after timeout_s.
ProcResult runCommand(const std::vector<std::string>& argv, const std::string& stdin_data = "",
                      int timeout_s = 120, const std::vector<std::string>& extra_env = {});

// The isolation backend the conformance suite runs this test binary against: the environment's
// AIRLOCK_TEST_ISOLATION (ctest sets it per registration, tests/conformance.cmake), else
// "namespaces". Under another backend, every sandbox the test makes uses it:
//   - runAirlock() adds `--isolation <backend>` to an `airlock run` that names no --policy;
//   - TempDir::write() of a "*.toml" policy sets `isolation` in every profile that sets none
//     (withTestIsolation).
std::string testIsolation();
bool underGvisor();   // testIsolation() == "gvisor"
bool underMicrovm();  // testIsolation() == "microvm"
// The policy text with `isolation = "<testIsolation()>"` in each [profiles.<name>] table that
// does not choose one (a [profiles.default] table is added when there is none); unchanged
// under namespaces.
std::string withTestIsolation(const std::string& toml);

// `airlock ARGS...` from the build tree.
ProcResult runAirlock(const std::vector<std::string>& args, const std::string& stdin_data = "",
                      int timeout_s = 120);

// A directory removed (recursively) on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  void write(const std::string& name, const std::string& content, int mode = 0644) const;
  std::string read(const std::string& name) const;

 private:
  std::string path_;
};

std::string readFile(const std::string& path);

// Every path under `root`, relative to it, with its kind ("d /etc", "f /etc/passwd", "l /bin";
// a symlink is not followed), to assert that nothing was written there.
std::set<std::string> treeOf(const std::string& root);

// Counts host resources that sandboxes create, to assert nothing leaks.
struct HostResources {
  int airlock_mounts = 0;   // lines in /proc/self/mountinfo mentioning "airlock"
  int airlock_cgroups = 0;  // directories under /sys/fs/cgroup/*/airlock/*
  int processes = 0;        // processes whose uid is in the sandbox uid range
  bool operator==(const HostResources&) const = default;
};
HostResources snapshotHostResources();
std::ostream& operator<<(std::ostream& os, const HostResources& r);

}  // namespace airlock::testing

// Skips (or, under AIRLOCK_TEST_REQUIRE_PRIVILEGED=1, fails) the current test unless it runs as
// real root. Use at the top of privileged, e2e and hostile tests.
#define AIRLOCK_REQUIRE_ROOT()                                                           \
  do {                                                                                   \
    if (!::airlock::testing::isRealRoot()) {                                             \
      if (::airlock::testing::privilegeRequired())                                       \
        FAIL() << "needs real root (uid 0 in the initial user namespace) and "           \
                  "AIRLOCK_TEST_REQUIRE_PRIVILEGED=1 forbids skipping";                  \
      GTEST_SKIP() << "needs real root (uid 0 in the initial user namespace) to create " \
                      "namespaces, cgroups and mounts";                                  \
    }                                                                                    \
  } while (0)

// Built with AddressSanitizer or ThreadSanitizer (scripts/sanitize.sh): times and memory are
// then the sanitizer's (TSan runs code 5-15x slower and maps shadow memory), so tests print
// their figures but assert on them only in a plain build.
namespace airlock::testing {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitizedBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif
#else
inline constexpr bool kSanitizedBuild = false;
#endif
}  // namespace airlock::testing

// Skips the current test, with `why`, when `condition` is false; under
// AIRLOCK_TEST_REQUIRE_PRIVILEGED=1 (CI) it fails instead: a host CI runs on has everything a
// privileged test needs, so a skip there would hide a test that never ran.
#define AIRLOCK_REQUIRE(condition, why)                                           \
  do {                                                                            \
    if (!(condition)) {                                                           \
      if (::airlock::testing::privilegeRequired())                                \
        FAIL() << why << " (AIRLOCK_TEST_REQUIRE_PRIVILEGED=1 forbids skipping)"; \
      GTEST_SKIP() << why;                                                        \
    }                                                                             \
  } while (0)
