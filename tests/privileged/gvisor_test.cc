// The gvisor backend as the host sees it (plugins/isolation/gvisor): which host processes a
// sandbox is made of and how they are confined, the cgroup limits with the sentry's share, what
// is left after the supervisor is killed, and how a broken runsc is reported. The conformance
// suite (cmake/AirlockConformance.cmake) checks the sandbox from inside; this file checks what
// only the host can see. Needs root and runsc; with AIRLOCK_TEST_REQUIRE_PRIVILEGED=1 a missing
// runsc fails instead of skipping.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "test_support.h"

extern char** environ;

namespace airlock::testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kRunsc = "/usr/bin/runsc";
constexpr const char* kCgroupPids = "/sys/fs/cgroup/pids/airlock";
constexpr const char* kScratch = "/run/airlock/rootfs";

#define AIRLOCK_REQUIRE_RUNSC()                                                             \
  do {                                                                                      \
    AIRLOCK_REQUIRE_ROOT();                                                                 \
    if (access(kRunsc, X_OK) != 0) {                                                        \
      if (privilegeRequired()) FAIL() << kRunsc << " is missing (scripts/install-deps.sh)"; \
      GTEST_SKIP() << kRunsc << " is missing: install runsc for the gvisor backend";        \
    }                                                                                       \
  } while (0)

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::map<std::string, std::string> statusOf(pid_t pid) {
  std::map<std::string, std::string> m;
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    auto v = line.substr(colon + 1);
    v.erase(0, v.find_first_not_of(" \t"));
    m[line.substr(0, colon)] = v;
  }
  return m;
}

std::string nsOf(pid_t pid, const char* ns) {
  std::error_code ec;
  auto t = std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/ns/" + ns, ec);
  return ec ? "" : t.string();
}

// The sandbox cgroups (v1 pids hierarchy) that exist now.
std::set<std::string> sandboxCgroups() {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(kCgroupPids, ec))
    if (e.is_directory()) out.insert(e.path().filename().string());
  return out;
}

std::vector<pid_t> procsOf(const std::string& id) {
  std::vector<pid_t> out;
  std::ifstream f(std::string(kCgroupPids) + "/" + id + "/cgroup.procs");
  pid_t p;
  while (f >> p) out.push_back(p);
  return out;
}

// `airlock run --isolation gvisor` of a shell program, in the background.
class LiveRun {
 public:
  explicit LiveRun(const std::string& code, std::vector<std::string> flags = {}) {
    log_ = dir_.file("airlock.log");
    std::vector<std::string> argv{airlockBinary(), "run",    "--isolation", "gvisor",
                                  "--no-stdin",    "--lang", "shell"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"-c", code});
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    if (posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  ~LiveRun() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  // Waits until the program has printed "ready" (the sandbox is fully up) and returns the
  // sandbox cgroup that did not exist in `before`.
  std::string awaitSandbox(const std::set<std::string>& before, int seconds = 20) {
    auto deadline = Clock::now() + std::chrono::seconds(seconds);
    while (Clock::now() < deadline) {
      if (log().find("ready") != std::string::npos)
        for (const auto& id : sandboxCgroups())
          if (!before.contains(id) && !procsOf(id).empty()) return id;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return "";
  }
  pid_t pid() const { return pid_; }
  // Waits for airlock to exit; its wait status, or -1 on timeout.
  int wait(int seconds) {
    auto deadline = Clock::now() + std::chrono::seconds(seconds);
    while (Clock::now() < deadline) {
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return st;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
  std::string log() const { return readFile(log_); }

 private:
  TempDir dir_;
  std::string log_;
  pid_t pid_ = -1;
};

// Class: posture. Every host process of a gVisor sandbox but runsc's own monitor is under a
// seccomp filter with no_new_privs, in mount and network namespaces of its own; the sentry and
// its stub processes run as nobody in a user namespace of their own. The cgroup holds them all
// with the profile's limits plus the sentry's share. Control: this test process is none of that.
TEST(GvisorBackend, SentryPosture) {
  AIRLOCK_REQUIRE_RUNSC();
  const pid_t self = getpid();
  const std::string host_mnt = nsOf(self, "mnt"), host_net = nsOf(self, "net"),
                    host_user = nsOf(self, "user");
  ASSERT_EQ(statusOf(self)["Seccomp"], "0") << "control: the test itself runs unfiltered";

  auto before = sandboxCgroups();
  LiveRun run("echo ready; sleep 20", {"--memory", "300"});
  const std::string id = run.awaitSandbox(before);
  ASSERT_FALSE(id.empty()) << "no gVisor sandbox cgroup appeared; airlock said:\n" << run.log();

  int monitors = 0, confined = 0, nobody_in_own_userns = 0;
  for (pid_t p : procsOf(id)) {
    auto st = statusOf(p);
    std::string comm = trim(readFile("/proc/" + std::to_string(p) + "/comm"));
    if (comm == "runsc") {
      // runsc run: the monitor the supervisor holds, which only waits for the sandbox.
      ++monitors;
      continue;
    }
    ++confined;
    SCOPED_TRACE("pid " + std::to_string(p) + " (" + comm + ")");
    EXPECT_EQ(st["Seccomp"], "2") << "a host process of the sandbox runs without seccomp";
    EXPECT_EQ(st["NoNewPrivs"], "1");
    EXPECT_NE(nsOf(p, "mnt"), host_mnt) << "in the host's mount namespace";
    EXPECT_NE(nsOf(p, "net"), host_net) << "in the host's network namespace";
    std::istringstream uids(st["Uid"]);
    std::string real, effective;
    uids >> real >> effective;
    if (effective == "65534" && nsOf(p, "user") != host_user) ++nobody_in_own_userns;
  }
  EXPECT_EQ(monitors, 1) << "one runsc monitor per sandbox";
  EXPECT_GE(confined, 2) << "the sentry and the gofer at least";
  EXPECT_GE(nobody_in_own_userns, 1) << "the sentry runs as nobody in its own user namespace";

  // The plugin's share (plugins/isolation/gvisor/plugin.cc): 64 MiB and 256 + 48 per process.
  const std::string mem = "/sys/fs/cgroup/memory/airlock/" + id + "/memory.limit_in_bytes";
  EXPECT_EQ(trim(readFile(mem)), std::to_string((300ull + 64) << 20));
  EXPECT_EQ(trim(readFile(std::string(kCgroupPids) + "/" + id + "/pids.max")),
            std::to_string(256 + 48 * 256));
  kill(run.pid(), SIGTERM);
  EXPECT_NE(run.wait(20), -1) << "airlock did not end within 20 s of SIGTERM";
  EXPECT_FALSE(std::filesystem::exists(std::string(kCgroupPids) + "/" + id));
  EXPECT_FALSE(std::filesystem::exists(std::string(kScratch) + "/" + id))
      << "the bundle and runsc state were not removed";
}

// Class: cleanup. kill -9 of the supervisor: the agent loses its channel and ends the sandbox
// (gVisor sandboxes are not adopted), every runsc process exits, and the next airlock run
// reclaims the cgroup and the bundle directory.
TEST(GvisorBackend, KillNineOfTheSupervisorLeavesNothingAfterTheNextRun) {
  AIRLOCK_REQUIRE_RUNSC();
  auto before = sandboxCgroups();
  LiveRun run("echo ready; sleep 60");
  const std::string id = run.awaitSandbox(before);
  ASSERT_FALSE(id.empty()) << run.log();
  auto procs = procsOf(id);
  ASSERT_FALSE(procs.empty());
  ASSERT_TRUE(std::filesystem::exists(std::string(kScratch) + "/" + id));
  kill(run.pid(), SIGKILL);
  ASSERT_NE(run.wait(10), -1);

  auto deadline = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < deadline && !procsOf(id).empty())
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(procsOf(id).empty()) << "the sandbox outlived its supervisor";
  for (pid_t p : procs) {
    // A reused pid is some other process; ours would still be named runsc or exe. A zombie
    // (the monitor, once the host's init adopted it) has ended and is init's to reap.
    std::string comm = trim(readFile("/proc/" + std::to_string(p) + "/comm"));
    std::string state = statusOf(p)["State"];
    EXPECT_TRUE(comm.empty() || state.starts_with("Z") || (comm != "runsc" && comm != "exe"))
        << "pid " << p << " (" << comm << ", " << state << ") is still alive";
  }

  // The next run reclaims what the dead one left: the cgroup and <scratch>/<id>.
  auto next = runAirlock({"run", "--isolation", "gvisor", "--lang", "shell", "-c", "true"});
  EXPECT_EQ(next.exit_code, 0) << next.err;
  deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline && (std::filesystem::exists(std::string(kCgroupPids) + "/" + id) ||
                                     std::filesystem::exists(std::string(kScratch) + "/" + id)))
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(std::filesystem::exists(std::string(kCgroupPids) + "/" + id));
  EXPECT_FALSE(std::filesystem::exists(std::string(kScratch) + "/" + id));
}

// Bad input: a runsc that fails at start. Exit 125, a message naming gvisor and carrying
// runsc's own words (without its log prefix), and nothing left behind. Control: the same policy
// with the real runsc works.
TEST(GvisorBackend, ARunscThatFailsIsReportedAndLeavesNothing) {
  AIRLOCK_REQUIRE_RUNSC();
  TempDir dir;
  dir.write("fake-runsc",
            "#!/bin/sh\necho 'W1126 20:24:44.912559   23097 util.go:64] FATAL ERROR: "
            "the bundle is refused by this fake' >&2\nexit 128\n",
            0755);
  auto policy = [&](const std::string& runsc) {
    return "schema = 1\n[profiles.default]\nisolation = \"gvisor\"\n[profiles.default.gvisor]\n"
           "runsc = \"" +
           runsc + "\"\n";
  };
  dir.write("good.toml", policy(kRunsc));
  dir.write("bad.toml", policy(dir.file("fake-runsc")));
  dir.write("missing.toml", policy(dir.file("no-such-runsc")));

  auto good =
      runAirlock({"run", "--policy", dir.file("good.toml"), "--lang", "shell", "-c", "echo fine"});
  EXPECT_EQ(good.exit_code, 0) << "control: " << good.err;
  EXPECT_EQ(good.out, "fine\n");

  const auto before = snapshotHostResources();
  const auto cgroups = sandboxCgroups();
  auto scratchEntries = [] {
    std::set<std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(kScratch, ec))
      out.insert(e.path().string());
    return out;
  };
  const auto scratch_before = scratchEntries();
  auto bad = runAirlock({"run", "--policy", dir.file("bad.toml"), "--lang", "shell", "-c", "true"});
  EXPECT_EQ(bad.exit_code, 125);
  EXPECT_NE(bad.err.find("gvisor: runsc failed to start the sandbox (runsc exited with status "
                         "128): the bundle is refused by this fake"),
            std::string::npos)
      << bad.err;
  auto missing =
      runAirlock({"run", "--policy", dir.file("missing.toml"), "--lang", "shell", "-c", "true"});
  EXPECT_EQ(missing.exit_code, 125);
  EXPECT_NE(missing.err.find("gvisor: runsc (gvisor.runsc) cannot be run"), std::string::npos)
      << missing.err;
  EXPECT_NE(missing.err.find("ENOENT"), std::string::npos) << missing.err;

  EXPECT_EQ(snapshotHostResources(), before);
  EXPECT_EQ(sandboxCgroups(), cgroups) << "a cgroup was left behind";
  for (const auto& e : scratchEntries())
    if (!scratch_before.contains(e)) ADD_FAILURE() << "left in the scratch directory: " << e;
}

// filesystem.image on gVisor: the image's entries are the root, read-only, with the system view
// and the sandbox's own directories on top, and nothing is ever created in the image (runsc
// would make missing mount points in a root it is given, on the host).
TEST(GvisorBackend, AnImageIsTheRootAndIsNeverWrittenTo) {
  AIRLOCK_REQUIRE_RUNSC();
  TempDir dir;
  const std::string image = dir.path() + "/image";
  for (const char* d : {"", "/usr", "/etc", "/opt", "/srv"})
    ASSERT_EQ(::mkdir((image + d).c_str(), 0755), 0) << d;
  for (const char* l : {"bin", "lib", "lib64"})
    ASSERT_EQ(::symlink((std::string("usr/") + l).c_str(), (image + "/" + l).c_str()), 0);
  dir.write("image/etc/image-id", "airlock-test-image\n");
  dir.write("image/etc/passwd", "root:x:0:0::/:/bin/sh\n");  // the sandbox's identity wins
  dir.write("image/opt/marker", "from the image\n");
  ::chmod(dir.path().c_str(), 0755);
  const auto before = treeOf(image);
  dir.write("p.toml",
            "schema = 1\n[profiles.default]\nisolation = \"gvisor\"\n"
            "[profiles.default.filesystem]\nimage = \"" +
                image + "\"\n");
  auto r = runAirlock({"run", "--policy", dir.file("p.toml"), "--lang", "shell", "-c",
                       "cat /opt/marker /etc/image-id; id -un; ls /srv | wc -l; "
                       "touch /opt/x 2>/dev/null || echo read-only; uname -r"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "from the image\nairlock-test-image\nuser\n0\nread-only\n4.4.0\n") << r.err;
  EXPECT_EQ(treeOf(image), before) << "the backend wrote into the operator's image";

  // A profile path the image has no place for is refused, naming it, never made: a host
  // directory under /srv, which the image has (empty).
  const std::string models = "/srv/airlock-test-models-" + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(models.c_str(), 0755), 0) << models;
  dir.write("p2.toml",
            "schema = 1\n[profiles.default]\nisolation = \"gvisor\"\n"
            "[profiles.default.filesystem]\nimage = \"" +
                image + "\"\nreadonly_paths = [\"" + models + "\"]\n");
  auto r2 = runAirlock({"run", "--policy", dir.file("p2.toml"), "--lang", "shell", "-c", "true"});
  ::rmdir(models.c_str());
  EXPECT_EQ(r2.exit_code, 125) << r2.out;
  EXPECT_NE(r2.err.find("gvisor: bundle: mount target does not exist in the image as a directory "
                        "(the gvisor backend never creates paths in an image) '" +
                        models + "'"),
            std::string::npos)
      << r2.err;
  EXPECT_EQ(treeOf(image), before);
}

// Bad input: policy keys of [profiles.X.gvisor] are checked with file:line:col.
TEST(GvisorBackend, PolicyTableErrorsNameTheKey) {
  TempDir dir;
  dir.write("typo.toml",
            "schema = 1\n[profiles.default]\nisolation = \"gvisor\"\n[profiles.default.gvisor]\n"
            "platfrom = \"kvm\"\n");
  dir.write("flag.toml",
            "schema = 1\n[profiles.default]\n[profiles.default.gvisor]\n"
            "flags = [\"--strace\", \"--network=host\"]\n");
  dir.write("platform.toml",
            "schema = 1\n[profiles.default]\n[profiles.default.gvisor]\nplatform = \"fast\"\n");
  auto typo = runAirlock({"policy", "check", dir.file("typo.toml")});
  EXPECT_NE(typo.exit_code, 0);
  EXPECT_NE(typo.err.find("typo.toml:5:1: unknown key 'platfrom' in [profiles.default.gvisor] "
                          "(did you mean 'platform'?)"),
            std::string::npos)
      << typo.err;
  auto flag = runAirlock({"policy", "check", dir.file("flag.toml")});
  EXPECT_NE(flag.exit_code, 0);
  EXPECT_NE(flag.err.find("gvisor.flags[1] = '--network=host': not an allowed runsc flag"),
            std::string::npos)
      << flag.err;
  auto platform = runAirlock({"policy", "check", dir.file("platform.toml")});
  EXPECT_NE(platform.exit_code, 0);
  EXPECT_NE(platform.err.find("gvisor.platform = 'fast': must be 'ptrace', 'systrap' or 'kvm'"),
            std::string::npos)
      << platform.err;
}

}  // namespace
}  // namespace airlock::testing
