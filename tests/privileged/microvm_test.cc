// The microvm backend as the host sees it (plugins/isolation/microvm): the guest runs its own
// kernel, QEMU runs confined in the sandbox's cgroup as the sandbox's own host id, and broken
// inputs (no QEMU, a kernel that is no kernel, a guest that never answers) are reported with
// their cause and leave nothing behind. The conformance suite (cmake/AirlockConformance.cmake)
// checks the sandbox from inside. Needs root and QEMU; with AIRLOCK_TEST_REQUIRE_PRIVILEGED=1 a
// missing QEMU fails instead of skipping.
#include <gtest/gtest.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "test_support.h"

namespace airlock::testing {
namespace {

constexpr const char* kQemu = "/usr/bin/qemu-system-x86_64";
constexpr const char* kScratch = "/run/airlock/rootfs";

#define AIRLOCK_REQUIRE_QEMU()                                                                 \
  do {                                                                                         \
    AIRLOCK_REQUIRE_ROOT();                                                                    \
    if (access(kQemu, X_OK) != 0) {                                                            \
      if (privilegeRequired()) FAIL() << kQemu << " is missing (scripts/install-deps.sh)";     \
      GTEST_SKIP() << kQemu << " is missing: install qemu-system-x86 for the microvm backend"; \
    }                                                                                          \
  } while (0)

std::set<std::string> scratchEntries() {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(kScratch, ec))
    out.insert(e.path().string());
  return out;
}

// Pids of running QEMU processes.
std::set<int> qemuPids() {
  std::set<int> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream comm(e.path() / "comm");
    std::string c;
    std::getline(comm, c);
    if (c.starts_with("qemu-system")) out.insert(std::stoi(name));
  }
  return out;
}

std::string policyWith(const std::string& microvm_table) {
  return "schema = 1\n[profiles.default]\nisolation = \"microvm\"\n[profiles.default.microvm]\n" +
         microvm_table;
}

// The sandbox's kernel is not the host's: /proc/version inside names the guest kernel the
// backend boots, and the host's release (the control, read here) does not appear.
TEST(MicrovmBackend, TheGuestRunsItsOwnKernel) {
  AIRLOCK_REQUIRE_QEMU();
  utsname host{};
  ASSERT_EQ(uname(&host), 0);
  auto r = runAirlock({"run", "--isolation", "microvm", "--lang", "shell", "-c",
                       "uname -r; cat /proc/1/comm; id -u; cat /proc/cmdline"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string release, init, uid;
  std::getline(lines, release);
  std::getline(lines, init);
  std::getline(lines, uid);
  EXPECT_NE(release, host.release) << "the guest reports the host's kernel";
  EXPECT_TRUE(std::filesystem::exists("/lib/modules/" + release))
      << release << " is not one of the host's packaged kernels";
  EXPECT_EQ(init, "airlock-agent");
  EXPECT_EQ(uid, "1000");
  EXPECT_NE(r.out.find("airlock.mounts=/usr"), std::string::npos) << r.out;
}

// QEMU, while a sandbox runs: in the sandbox's cgroup, as an unprivileged host id (-runas),
// under its own seccomp filter; after the run, no QEMU and no scratch entry remain.
TEST(MicrovmBackend, QemuRunsConfinedAndEndsWithTheSandbox) {
  AIRLOCK_REQUIRE_QEMU();
  const auto qemu_before = qemuPids();
  const auto scratch_before = scratchEntries();
  const auto resources_before = snapshotHostResources();
  TempDir dir;
  const std::string marker = dir.file("started");
  std::thread run([&] {
    auto r =
        runAirlock({"run", "--isolation", "microvm", "--lang", "shell", "-c", "sleep 8"}, "", 120);
    EXPECT_EQ(r.exit_code, 0) << r.err;
  });
  int qemu = -1;
  for (int i = 0; i < 300 && qemu < 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (int p : qemuPids())
      if (!qemu_before.contains(p)) qemu = p;
  }
  ASSERT_GT(qemu, 0) << "no QEMU started";
  std::ifstream status("/proc/" + std::to_string(qemu) + "/status");
  std::string line, uid, seccomp;
  for (int i = 0; i < 100 && uid.empty(); ++i) {
    // -runas takes effect once QEMU has opened its files: wait for it.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    status.clear();
    status.seekg(0);
    while (std::getline(status, line)) {
      if (line.starts_with("Uid:") && line.find("\t0\t") == std::string::npos) uid = line;
      if (line.starts_with("Seccomp:")) seccomp = line;
    }
  }
  EXPECT_FALSE(uid.empty()) << "QEMU still runs as root";
  EXPECT_NE(seccomp.find('2'), std::string::npos) << "QEMU has no seccomp filter: " << seccomp;
  std::ifstream cg("/proc/" + std::to_string(qemu) + "/cgroup");
  std::string cgroups((std::istreambuf_iterator<char>(cg)), std::istreambuf_iterator<char>());
  EXPECT_NE(cgroups.find("/airlock/"), std::string::npos) << cgroups;
  // The cgroup's limits: guest RAM (limits.memory_mb, 1024 by default) plus QEMU's own 192 MiB;
  // QEMU's 64 threads plus the usual one per allowed process (limits.pids, 256), which the
  // guest's processes never use: they are bounded inside by RLIMIT_NPROC.
  std::istringstream lines(cgroups);
  std::string cg_line;
  while (std::getline(lines, cg_line)) {
    const auto colon = cg_line.rfind(':');
    const std::string path = cg_line.substr(colon + 1);
    if (cg_line.find(":memory:") != std::string::npos) {
      EXPECT_EQ(readFile("/sys/fs/cgroup/memory" + path + "/memory.limit_in_bytes"),
                std::to_string((1024ull + 192) << 20) + "\n");
    } else if (cg_line.find(":pids:") != std::string::npos) {
      EXPECT_EQ(readFile("/sys/fs/cgroup/pids" + path + "/pids.max"), "320\n");
    } else if (cg_line.starts_with("0::") &&
               std::filesystem::exists("/sys/fs/cgroup/cgroup.controllers")) {
      EXPECT_EQ(readFile("/sys/fs/cgroup" + path + "/memory.max"),
                std::to_string((1024ull + 192) << 20) + "\n");
    }
  }
  run.join();
  for (int p : qemuPids()) EXPECT_TRUE(qemu_before.contains(p)) << "QEMU " << p << " left";
  for (const auto& e : scratchEntries())
    EXPECT_TRUE(scratch_before.contains(e)) << "left in the scratch directory: " << e;
  EXPECT_EQ(snapshotHostResources(), resources_before);
}

// Bad input: no QEMU, and a "kernel" that is not one, fail the creation with
// `airlock: … microvm: …` naming the cause, exit 125, nothing left behind. A working profile
// is the control.
TEST(MicrovmBackend, BrokenInputsAreNamedAndLeaveNothing) {
  AIRLOCK_REQUIRE_QEMU();
  TempDir dir;
  dir.write("good.toml", policyWith(""));
  dir.write("no-qemu.toml", policyWith("qemu = \"" + dir.file("no-such-qemu") + "\"\n"));
  dir.write("not-a-kernel", std::string(4096, 'x'));
  dir.write("bad-kernel.toml", policyWith("kernel = \"" + dir.file("not-a-kernel") +
                                          "\"\ncache_dir = \"" + dir.file("cache") + "\"\n"));
  auto good =
      runAirlock({"run", "--policy", dir.file("good.toml"), "--lang", "shell", "-c", "echo fine"});
  ASSERT_EQ(good.exit_code, 0) << "control: " << good.err;
  EXPECT_EQ(good.out, "fine\n");

  const auto qemu_before = qemuPids();
  const auto scratch_before = scratchEntries();
  const auto resources_before = snapshotHostResources();
  auto no_qemu =
      runAirlock({"run", "--policy", dir.file("no-qemu.toml"), "--lang", "shell", "-c", "true"});
  EXPECT_EQ(no_qemu.exit_code, 125);
  EXPECT_NE(no_qemu.err.find("microvm: QEMU (microvm.qemu) cannot be run"), std::string::npos)
      << no_qemu.err;
  EXPECT_NE(no_qemu.err.find("ENOENT"), std::string::npos) << no_qemu.err;
  auto bad_kernel =
      runAirlock({"run", "--policy", dir.file("bad-kernel.toml"), "--lang", "shell", "-c", "true"});
  EXPECT_EQ(bad_kernel.exit_code, 125);
  EXPECT_NE(bad_kernel.err.find("microvm: guest kernel " + dir.file("not-a-kernel") +
                                " is neither an ELF vmlinux nor an xz-compressed bzImage"),
            std::string::npos)
      << bad_kernel.err;
  EXPECT_EQ(qemuPids(), qemu_before);
  for (const auto& e : scratchEntries())
    EXPECT_TRUE(scratch_before.contains(e)) << "left in the scratch directory: " << e;
  EXPECT_EQ(snapshotHostResources(), resources_before);
}

// A guest that never reaches the agent's handshake (here a "QEMU" that says something and then
// hangs) is killed at boot_timeout_s, tried once more, and the creation fails naming the
// timeout with what QEMU said; neither try outlives it.
TEST(MicrovmBackend, ABootThatNeverAnswersIsRetriedOnceThenFails) {
  AIRLOCK_REQUIRE_QEMU();
  TempDir dir;
  dir.write("hung-qemu",
            "#!/bin/sh\necho started >> " + dir.file("tries") +
                "\necho 'fake qemu: stuck before the guest' >&2\nexec sleep 600\n",
            0755);
  dir.write("hung.toml", policyWith("qemu = \"" + dir.file("hung-qemu") +
                                    "\"\naccel = \"tcg\"\nboot_timeout_s = 5\n"));
  const auto resources_before = snapshotHostResources();
  const auto t0 = std::chrono::steady_clock::now();
  auto r = runAirlock({"run", "--policy", dir.file("hung.toml"), "--lang", "shell", "-c", "true"},
                      "", 120);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(r.exit_code, 125) << r.out;
  EXPECT_NE(r.err.find("microvm: the microVM did not start (tcg): the guest did not reach its "
                       "pause point in time; qemu: fake qemu: stuck before the guest"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(dir.read("tries"), "started\nstarted\n") << "the watchdog did not try twice";
  EXPECT_GE(took, std::chrono::seconds(10));
  EXPECT_LT(took, std::chrono::seconds(60));
  EXPECT_EQ(snapshotHostResources(), resources_before) << "a try outlived the failure";
}

// filesystem.image in a microVM: the image's entries are the root, read-only, beneath the
// sandbox's own (generated /etc files, mount points) with the system view mounted on top; the
// image is only read (into its erofs layer). A profile directory the image has no place for is
// shown anyway: its mount point is in the sandbox's own layer, not made in the image.
TEST(MicrovmBackend, AnImageIsTheRootAndIsNeverWrittenTo) {
  AIRLOCK_REQUIRE_QEMU();
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
  const std::string models = "/srv/airlock-test-models-" + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(models.c_str(), 0755), 0) << models;
  { std::ofstream(models + "/weights") << "w1\n"; }
  dir.write("p.toml",
            "schema = 1\n[profiles.default]\nisolation = \"microvm\"\n"
            "[profiles.default.filesystem]\nimage = \"" +
                image + "\"\nreadonly_paths = [\"" + models + "\"]\n");
  auto r = runAirlock({"run", "--policy", dir.file("p.toml"), "--lang", "shell", "-c",
                       "cat /opt/marker /etc/image-id; id -un; ls /srv; cat " + models +
                           "/weights; touch /opt/x 2>/dev/null || echo read-only; "
                           "touch /etc/image-id 2>/dev/null || echo read-only"},
                      "", 120);
  std::filesystem::remove_all(models);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "from the image\nairlock-test-image\nuser\nairlock-test-models-" +
                       std::to_string(::getpid()) + "\nw1\nread-only\nread-only\n")
      << r.err;
  EXPECT_EQ(treeOf(image), before) << "the backend wrote into the operator's image";
}

// A profile of its own guest size: its snapshot is this test's alone.
std::string snapshotPolicy(uint64_t memory_mb) {
  return "schema = 1\n[profiles.default]\nisolation = \"microvm\"\nhostname = \"vmbox\"\n"
         "[profiles.default.microvm]\nmemory_mb = " +
         std::to_string(memory_mb) + "\n";
}

// The plugin's log line for a start (AIRLOCK_LOG_LEVEL=debug) names the snapshot it resumed or
// saved; "" when there is none.
std::string snapshotIn(const std::string& log, const std::string& verb) {
  const auto at = log.find(verb + " /");
  if (at == std::string::npos) return "";
  const auto from = at + verb.size() + 1;
  return log.substr(from, log.find_first_of(" ,)\n", from) - from);
}

class DebugLog {
 public:
  DebugLog() { ::setenv("AIRLOCK_LOG_LEVEL", "debug", 1); }
  ~DebugLog() { ::unsetenv("AIRLOCK_LOG_LEVEL"); }
};

// Sandboxes resumed from one snapshot share its past but not its clock, entropy or name: each
// gets the host's time (its date falls within the run), fresh random bytes and the profile's
// hostname at once. The control
// shows they really are copies of one guest: the exec watch, started before the snapshot, has
// the same start time (clock ticks after boot) in each.
TEST(MicrovmSnapshot, ResumedGuestsGetTheirOwnClockEntropyAndHostname) {
  AIRLOCK_REQUIRE_QEMU();
  TempDir dir;
  dir.write("p.toml", snapshotPolicy(200));
  DebugLog debug;
  const std::string probe =
      "hostname; date +%s; od -An -N16 -tx1 /dev/urandom | tr -d ' \\n'; echo; "
      "cat /proc/sys/kernel/random/boot_id; "
      "for p in /proc/[0-9]*; do [ \"$(cat $p/comm)\" = airlock-audit ] && "
      "cut -d' ' -f22 $p/stat; done; true";
  auto first =
      runAirlock({"run", "--policy", dir.file("p.toml"), "--lang", "shell", "-c", probe}, "", 120);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  std::set<std::string> entropy, boot_ids;
  std::set<std::string> watch_start;
  for (int i = 0; i < 2; ++i) {
    const long long before = static_cast<long long>(::time(nullptr));
    auto r = runAirlock({"run", "--policy", dir.file("p.toml"), "--lang", "shell", "-c", probe}, "",
                        120);
    const long long after = static_cast<long long>(::time(nullptr));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(snapshotIn(r.err, "resumed from"), "") << "not resumed: " << r.err;
    std::istringstream lines(r.out);
    std::string hostname, date, random, boot_id, started;
    std::getline(lines, hostname);
    std::getline(lines, date);
    std::getline(lines, random);
    std::getline(lines, boot_id);
    std::getline(lines, started);
    EXPECT_EQ(hostname, "vmbox");
    // Within this run: a clock left as the snapshot's would read the earlier run's pause
    // point, seconds before this run began (each run here takes several under emulation).
    const long long guest = std::stoll(date);
    EXPECT_GE(guest, before - 1) << "the guest's clock is behind: the snapshot's?";
    EXPECT_LE(guest, after + 1) << "the guest's clock is ahead";
    EXPECT_EQ(random.size(), 32u) << r.out;
    entropy.insert(random);
    boot_ids.insert(boot_id);
    ASSERT_FALSE(started.empty()) << "no exec watch seen: " << r.out;
    watch_start.insert(started);
  }
  EXPECT_EQ(watch_start.size(), 1u) << "control: the two guests are not copies of one snapshot";
  EXPECT_EQ(entropy.size(), 2u) << "two resumed guests read the same random bytes";
  EXPECT_EQ(boot_ids.size(), 2u) << "two resumed guests have one boot id";
}

// A snapshot that does not resume (here garbage in its place) is removed, the sandbox boots
// instead and saves a good one, which the next sandbox resumes from.
TEST(MicrovmSnapshot, ABrokenSnapshotIsRemovedAndTheSandboxBoots) {
  AIRLOCK_REQUIRE_QEMU();
  TempDir dir;
  dir.write("p.toml", snapshotPolicy(208));
  DebugLog debug;
  auto run = [&] {
    return runAirlock({"run", "--policy", dir.file("p.toml"), "--lang", "shell", "-c", "echo ran"},
                      "", 120);
  };
  auto first = run();
  ASSERT_EQ(first.exit_code, 0) << first.err;
  std::string path = snapshotIn(first.err, "saved");
  if (path.empty()) path = snapshotIn(first.err, "resumed from");
  ASSERT_FALSE(path.empty()) << "no snapshot named in the log: " << first.err;
  ASSERT_TRUE(std::filesystem::exists(path)) << path;
  {
    std::ofstream garbage(path, std::ios::trunc);
    garbage << std::string(4096, 'x');
  }
  auto broken = run();
  EXPECT_EQ(broken.exit_code, 0) << broken.err;
  EXPECT_EQ(broken.out, "ran\n");
  EXPECT_NE(broken.err.find("the snapshot " + path + " did not resume, booting instead"),
            std::string::npos)
      << broken.err;
  EXPECT_EQ(snapshotIn(broken.err, "saved"), path) << broken.err;
  EXPECT_GT(std::filesystem::file_size(path), 1u << 20);
  auto again = run();
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, "ran\n");
  EXPECT_EQ(snapshotIn(again.err, "resumed from"), path) << again.err;
}

}  // namespace
}  // namespace airlock::testing
