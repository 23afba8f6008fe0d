// Resource exhaustion (docs/security-tests.md): fork and thread bombs stop at the pids limit, a
// memory bomb is OOM-killed and reported, disk and inode fills end inside the sandbox's tmpfs, a 1
// GB flood of invalid UTF-8 is truncated and counted while the supervisor's memory stays flat. The
// supervisor stays responsive throughout (host fork+exec latency is sampled during bombs).
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

#include "hostile_support.h"

namespace airlock::hostile {
namespace {

using airlock::testing::readFile;
using airlock::testing::runCommand;
using airlock::testing::TempDir;

constexpr double kMaxHostSpawnMs = 1000;  // fork+exec of /bin/true on the host during a bomb

// "N ERR" from the bounded probes below.
std::pair<int, std::string> countAndError(const std::string& out) {
  std::istringstream s(out);
  int n = -1;
  std::string err;
  s >> n >> err;
  return {n, err};
}

// Bounded probes: start up to 100 sleeping children/threads and stop at the first failure.
const char* kPyForks = R"(
import errno, os, time
n, err = 0, "none"
for i in range(100):
    try:
        pid = os.fork()
    except OSError as e:
        err = errno.errorcode.get(e.errno, str(e.errno))
        break
    if pid == 0:
        fd = os.open("/dev/null", os.O_RDWR)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        time.sleep(30)
        os._exit(0)
    n += 1
print(n, err, flush=True)
)";
const char* kPyThreads = R"(
import os, threading, time
n, err = 0, "none"
try:
    for i in range(100):
        threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
        n += 1
except RuntimeError:
    err = "RuntimeError"
print(n, err, flush=True)
os._exit(0)
)";
const char* kNodeSpawns = R"(
const cp = require('child_process');
let n = 0, err = 'none';
for (let i = 0; i < 100; i++) {
  const c = cp.spawn('sleep', ['30'], {stdio: 'ignore'});
  if (c.pid === undefined) { c.on('error', () => {}); err = 'spawn-failed'; break; }
  n++;
}
console.log(n, err);
process.exit(0);
)";

struct BoundedCase {
  const char* lang;
  const char* code;
  const char* what;
};

// Class: HostDoS. Bounded fork/thread loops: 100 succeed under pids = 512 (control), fewer than
// 64 under pids = 64 and the failure is the kernel's EAGAIN (or the runtime's wrapper of it).
TEST_F(HostileTest, HostDoS_ForkAndThreadLoopsStopAtPidsLimit) {
  TempDir loose_dir, tight_dir;
  auto loose = writePolicy(loose_dir, "pids = 512");
  auto tight = writePolicy(tight_dir, "pids = 64");
  for (const auto& c : {BoundedCase{"python", kPyForks, "python fork"},
                        BoundedCase{"python", kPyThreads, "python threads"},
                        BoundedCase{"node", kNodeSpawns, "node spawn"}}) {
    auto control = runSandbox(c.lang, c.code, {.flags = {"--policy", loose}});
    expectOutcome(control, "exited", 0);
    EXPECT_EQ(countAndError(control.out()), std::make_pair(100, std::string("none")))
        << "control (" << c.what << ", pids=512): " << control.describe();

    auto run = runSandbox(c.lang, c.code, {.flags = {"--policy", tight}});
    expectOutcome(run, "exited", 0);
    auto [n, err] = countAndError(run.out());
    EXPECT_GE(n, 0) << run.describe();
    // RLIMIT_NPROC counts the forking process itself on Linux (63 children at most); gVisor's
    // count leaves it out (64). Bounded either way.
    EXPECT_LE(n, airlock::testing::underGvisor() ? 64 : 63)
        << "[HostDoS] " << c.what << " went past pids = 64: " << run.describe();
    EXPECT_NE(err, "none") << c.what << ": " << run.describe();
  }
}

struct Bomb {
  const char* lang;
  const char* name;
  std::string code;
  std::vector<std::string> env;
};

// Unbounded bombs: the program keeps a bomb raging for 4 s while its main process spins on
// builtins only, then prints "survived" and exits.
std::vector<Bomb> bombs() {
  const std::string node_bomb =
      "const cp=require('child_process');for(;;){try{cp.spawn(process.execPath,"
      "['-e',process.env.B],{stdio:'ignore'})}catch(e){}}";
  return {
      {"shell",
       "shell",
       // `bomb &` forks once from the main shell. A bare `bomb` would run the async pipeline in
       // the main shell, which forks both halves itself: if the first half fills pids.max
       // before the second fork, bash's fork retries (15 s) fail the main program, not the bomb.
       "bomb() { bomb | bomb & }; bomb &\n"
       "end=$((SECONDS + 4)); while [ $SECONDS -lt $end ]; do :; done; echo survived\n",
       {}},
      {"python",
       "python",
       "import os, time\n"
       "if os.fork() == 0:\n"
       "    while True:\n"
       "        try:\n"
       "            os.fork()\n"
       "        except OSError:\n"
       "            pass\n"
       "end = time.monotonic() + 4\n"
       "while time.monotonic() < end:\n"
       "    pass\n"
       "print('survived', flush=True)\n"
       "os._exit(0)\n",
       {}},
      {"node",
       "node",
       "require('child_process').spawn(process.execPath, ['-e', process.env.B], "
       "{stdio: 'ignore'});\n"
       "const end = Date.now() + 4000; while (Date.now() < end) {}\n"
       "console.log('survived'); process.exit(0);\n",
       {"--env", "B=" + node_bomb}},
  };
}

// Class: HostDoS. Real fork bombs in shell, Python and Node under pids = 64: the sandbox's pids
// cgroup never goes past 64, the host keeps forking quickly, the run ends normally when the main
// program does and the bomb is gone. (The bounded test above is the control.)
TEST_F(HostileTest, HostDoS_ForkBombsContained) {
  TempDir dir;
  auto policy = writePolicy(dir, "pids = 64\ntimeout_s = 30");
  for (const auto& b : bombs()) {
    SCOPED_TRACE(std::string("bomb: ") + b.name);
    RunOptions opts{.flags = {"--policy", policy}, .timeout_s = 90};
    opts.flags.insert(opts.flags.end(), b.env.begin(), b.env.end());
    PidsSampler sampler;
    auto t0 = std::chrono::steady_clock::now();
    auto run = runSandbox(b.lang, b.code, opts);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto groups = sampler.stop();

    EXPECT_FALSE(run.proc.timed_out) << run.describe();
    ASSERT_TRUE(run.parsed()) << run.describe();
    if (std::string(b.lang) == "node" && run.status() == "memory_limit") {
      // Node processes are ~40 MB each: the memory limit may trip before the pids limit.
      EXPECT_EQ(run.proc.exit_code, kExitMemory) << run.describe();
    } else {
      expectOutcome(run, "exited", 0);
      EXPECT_EQ(run.out(), "survived\n") << run.describe();
    }
    EXPECT_LT(secs, 25) << "the run did not end with its main program";
    // Under gVisor the cgroup also holds the sentry's threads and the platform's stub
    // processes: its limit is the backend's (plugins/isolation/gvisor/plugin.cc, 256 + 48 per
    // process) and RLIMIT_NPROC holds the sandbox's own processes to 64 (the bounded test).
    // In a microVM the bomb runs on the guest's kernel: the host's cgroup holds QEMU's few
    // threads alone (its limit is 64 + 1 per process), so the evidence of containment there is
    // the run surviving and the host forking normally; the guest's RLIMIT_NPROC is checked from
    // inside by HostDoS_ForkAndThreadLoopsStopAtPidsLimit.
    const bool gvisor = airlock::testing::underGvisor();
    const bool microvm = airlock::testing::underMicrovm();
    const long want_limit = gvisor ? 256 + 48 * 64 : microvm ? 64 + 64 : 64;
    bool saw_limit = false;
    for (const auto& g : groups) {
      if (g.limit != want_limit) continue;
      saw_limit = true;
      EXPECT_LE(g.max_current, want_limit) << "[HostDoS] pids.current of " << g.path;
      if (!gvisor && !microvm) {
        EXPECT_LE(g.max_counted, 64) << "[HostDoS] processes counted in " << g.path;
      }
      if (!microvm) {
        EXPECT_GE(g.max_current, 32) << "the bomb never got going in " << g.path
                                     << " (the probe would not show a broken limit)";
      }
    }
    EXPECT_TRUE(saw_limit) << "no sandbox pids cgroup with pids.max = " << want_limit
                           << " was seen during the run (" << sampler.samples() << " samples)";
    EXPECT_LT(sampler.slowestHostSpawnMs(), kMaxHostSpawnMs)
        << "[HostDoS] the host was slow to fork+exec during the bomb";
  }
}

// Class: HostDoS. Memory bombs in Python and Node: status memory_limit, exit 122, an OOM kill is
// counted. Control: 256 MiB (half the default limit; two thirds of a microVM's) is fine.
TEST_F(HostileTest, HostDoS_MemoryBomb) {
  // A microVM's guest RAM is the limit: under emulation, filling the default 1 GiB takes most of
  // the default 30 s. A smaller limit reaches the same OOM in half the time.
  RunOptions opts;
  if (airlock::testing::underMicrovm()) {
    opts.flags = {"--memory", "384", "--timeout", "120"};
    opts.timeout_s = 180;
  }
  auto control =
      runSandbox("python", "a = [b'\\x01' * (32 << 20) for _ in range(8)]\nprint('ok')\n", opts);
  expectOutcome(control, "exited", 0);
  EXPECT_EQ(control.out(), "ok\n") << control.describe();

  for (const auto& [lang, code] :
       {std::pair<std::string, std::string>{"python",
                                            "a = []\nwhile True:\n    a.append(b'\\x01' * (32 << "
                                            "20))\n"},
        {"node", "const a = []; for (;;) a.push(Buffer.alloc(32 << 20, 1));"}}) {
    SCOPED_TRACE(lang);
    auto run = runSandbox(lang, code, opts);
    expectOutcome(run, "memory_limit", kExitMemory);
    ASSERT_TRUE(run.parsed());
    auto usage = run.result.value("usage", nlohmann::json::object());
    EXPECT_GE(usage.value("oom_kills", 0), 1) << run.describe();
  }
}

// A tmpfs the test mounts for the disk-fill control, unmounted on scope exit.
class ScratchTmpfs {
 public:
  explicit ScratchTmpfs(const std::string& options) {
    ok_ = ::mount("airlock-hostile-scratch", dir_.path().c_str(), "tmpfs", MS_NOSUID | MS_NODEV,
                  options.c_str()) == 0;
  }
  ~ScratchTmpfs() {
    if (ok_) ::umount2(dir_.path().c_str(), MNT_DETACH);
  }
  bool ok() const { return ok_; }
  const std::string& path() const { return dir_.path(); }

 private:
  TempDir dir_;
  bool ok_ = false;
};

void expectFilled(const nlohmann::json& res, const std::string& dir, uint64_t size_mb,
                  const std::string& context) {
  auto r = res.value(dir, nlohmann::json::object());
  EXPECT_EQ(r.value("err", "?"), "ENOSPC") << "[HostDoS] " << dir << ": " << context;
  EXPECT_LE(r.value("bytes", uint64_t{0}), (size_mb + 1) << 20) << dir << ": " << context;
  EXPECT_GE(r.value("bytes", uint64_t{0}), (size_mb * 3 / 4) << 20) << dir << ": " << context;
}

// Host free space (bytes and inodes) on / and /tmp must not move by more than the noise of other
// work on the machine; the fills below write hundreds of MiB, far more than this tolerance.
constexpr uint64_t kSpaceTolerance = 64ull << 20;
constexpr uint64_t kInodeTolerance = 20000;

void expectHostSpaceUnchanged(const FreeSpace& before_root, const FreeSpace& before_tmp) {
  auto after_root = freeSpace("/"), after_tmp = freeSpace("/tmp");
  EXPECT_GE(after_root.bytes + kSpaceTolerance, before_root.bytes) << "[HostDoS] / lost space";
  EXPECT_GE(after_tmp.bytes + kSpaceTolerance, before_tmp.bytes) << "[HostDoS] /tmp lost space";
  EXPECT_GE(after_root.inodes + kInodeTolerance, before_root.inodes) << "[HostDoS] / inodes";
  EXPECT_GE(after_tmp.inodes + kInodeTolerance, before_tmp.inodes) << "[HostDoS] /tmp inodes";
}

// The first microVM of a configuration saves its snapshot (tens of MiB) in the backend's cache
// on /: made before a measurement of the host's space, which is of what the sandbox writes. The
// same language: its view (and so its snapshot) may differ.
void warmMicrovmSnapshot(const std::vector<std::string>& flags) {
  if (!airlock::testing::underMicrovm()) return;
  auto warm = runSandbox("python", "pass", {.flags = flags});
  EXPECT_EQ(warm.status(), "exited") << "warming the snapshot: " << warm.describe();
}

// Controls shared by the disk cases: the probe reports ENOSPC on a full tmpfs, and statvfs sees
// a host write of 256 MiB.
void diskControls() {
  {
    ScratchTmpfs scratch("size=8m,nr_inodes=2000");
    ASSERT_TRUE(scratch.ok()) << "control: cannot mount a scratch tmpfs";
    auto bare = runBarePython(probe("disk_fill.py"), {scratch.path(), "--inodes", scratch.path()});
    auto res = parseProbeJson(bare.out, "control");
    expectFilled(res, scratch.path(), 8, "control: " + bare.out);
    EXPECT_EQ(res["inodes:" + scratch.path()].value("err", "?"), "ENOSPC") << bare.out;
  }
  TempDir big;
  auto before = freeSpace(big.path());
  {
    std::ofstream f(big.file("blob"), std::ios::binary);
    std::string mb(1 << 20, 'x');
    for (int i = 0; i < 256; ++i) f << mb;
  }
  sync();
  auto during = freeSpace(big.path());
  EXPECT_GE(before.bytes, during.bytes + (192ull << 20))
      << "control: statvfs did not see a 256 MiB host write";
}

// Class: HostDoS. With the default policy, filling /tmp (128 MiB) and /home/user (512 MiB) ends in
// ENOSPC inside; the host's free space is unchanged afterwards.
TEST_F(HostileTest, HostDoS_DiskFillDefaultPolicy) {
  diskControls();
  warmMicrovmSnapshot({});
  auto root0 = freeSpace("/"), tmp0 = freeSpace("/tmp");
  auto run = runSandbox("python", probe("disk_fill.py"), {.args = {"/tmp", "/home/user"}});
  EXPECT_NE(run.status(), "memory_limit")
      << "the fill was OOM-killed instead of getting ENOSPC: the tmpfs pages of /home/user are "
         "charged to the sandbox's memory cgroup, so with the default workspace_mb (512) equal to "
         "memory_mb (512) the workspace can never be filled to its size";
  expectOutcome(run, "exited", 0);
  auto res = parseProbeJson(run.out(), "sandbox");
  expectFilled(res, "/tmp", 128, run.describe());
  expectFilled(res, "/home/user", 512, run.describe());
  expectHostSpaceUnchanged(root0, tmp0);
}

// Class: HostDoS. The same with quotas set by policy (workspace 256 MiB, tmp 64 MiB), plus an
// inode fill of a 64 MiB workspace: stopped by ENOSPC or by the memory limit, never by time.
TEST_F(HostileTest, HostDoS_DiskAndInodeFillWithQuota) {
  TempDir dir;
  auto policy = writePolicy(dir, "workspace_mb = 256\ntmp_mb = 64\ntimeout_s = 60");
  TempDir idir;
  auto ipolicy = writePolicy(idir, "workspace_mb = 64\ntimeout_s = 60");
  warmMicrovmSnapshot({"--policy", policy});
  warmMicrovmSnapshot({"--policy", ipolicy});
  auto root0 = freeSpace("/"), tmp0 = freeSpace("/tmp");
  auto run = runSandbox("python", probe("disk_fill.py"),
                        {.flags = {"--policy", policy}, .args = {"/tmp", "/home/user"}});
  expectOutcome(run, "exited", 0);
  auto res = parseProbeJson(run.out(), "sandbox");
  expectFilled(res, "/tmp", 64, run.describe());
  expectFilled(res, "/home/user", 256, run.describe());

  auto irun = runSandbox("python", probe("disk_fill.py"),
                         {.flags = {"--policy", ipolicy}, .args = {"--inodes", "/home/user"}});
  EXPECT_FALSE(irun.proc.timed_out) << irun.describe();
  ASSERT_TRUE(irun.parsed()) << irun.describe();
  if (irun.status() == "memory_limit") {
    EXPECT_EQ(irun.proc.exit_code, kExitMemory) << irun.describe();
  } else {
    expectOutcome(irun, "exited", 0);
    auto ires =
        parseProbeJson(irun.out(), "inodes").value("inodes:/home/user", nlohmann::json::object());
    std::string err = ires.value("err", "?");
    // gVisor's tmpfs has no inode limit: the files live in the sentry's memory (bounded by the
    // sandbox's memory cgroup) until the time limit; the host's inodes are checked below.
    const bool gvisor_unbounded_inodes = airlock::testing::underGvisor() && err == "time limit";
    EXPECT_TRUE(err == "ENOSPC" || err == "EDQUOT" || err == "ENOMEM" || gvisor_unbounded_inodes)
        << "[HostDoS] the inode fill was not stopped by the sandbox (" << err << " after "
        << ires.value("files", 0) << " files)";
  }
  expectHostSpaceUnchanged(root0, tmp0);
}

// Class: HostDoS. 1 GB of invalid UTF-8 on stdout: the result is truncated and flagged, every
// byte is counted, the JSON record stays valid and small, airlock's own peak RSS stays < 100 MB.
// Controls: the probe really emits invalid UTF-8 of the asked size; /usr/bin/time sees a 200 MB
// process as such.
TEST_F(HostileTest, HostDoS_StdoutFloodInvalidUtf8) {
  const std::string code = probe("flood.py");
  auto bare = runBarePython(code, {"10000000"});
  ASSERT_EQ(bare.out.size(), 10000000u) << bare.err;
  EXPECT_NE(bare.out.find('\xff'), std::string::npos) << "control: the flood is not invalid UTF-8";

  TempDir dir;
  auto big = runCommand({"/usr/bin/time", "-f", "%M", "-o", dir.file("rss"), "/usr/bin/python3",
                         "-c", "b = b'x' * (200 << 20)"});
  ASSERT_EQ(big.exit_code, 0) << big.err;
  EXPECT_GE(std::stol(readFile(dir.file("rss"))), 190 * 1024) << "control: /usr/bin/time %M";

  std::vector<std::string> argv{"/usr/bin/time",
                                "-f",
                                "%M",
                                "-o",
                                dir.file("airlock-rss"),
                                airlock::testing::airlockBinary(),
                                "run",
                                "--json",
                                "--no-stdin",
                                "--lang",
                                "python",
                                "--timeout",
                                "120",
                                "-c",
                                code,
                                "--",
                                "1000000000"};
  auto t0 = std::chrono::steady_clock::now();
  SandboxRun run;
  run.proc = runCommand(argv, "", 180);
  run.result = nlohmann::json::parse(run.proc.out, nullptr, false);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "[ info ] 1e9 bytes through airlock in " << secs << " s\n";

  expectOutcome(run, "exited", 0);
  ASSERT_TRUE(run.parsed());
  EXPECT_EQ(run.result.value("stdout_truncated", false), true) << run.describe();
  auto counted = run.result.value("stdout_bytes", uint64_t{0});
  EXPECT_GE(counted, 990000000u) << run.describe();
  EXPECT_LE(counted, 1000000000u) << run.describe();
  EXPECT_LE(run.out().size(), 4u << 20) << "the kept stdout is not bounded by output_bytes";
  EXPECT_FALSE(run.out().empty()) << "nothing of the output was kept";
  EXPECT_LE(run.proc.out.size(), 8u << 20) << "the JSON record is not bounded";
  long rss_kb = std::atol(readFile(dir.file("airlock-rss")).c_str());
  EXPECT_GT(rss_kb, 0) << "no RSS measurement";
  EXPECT_LT(rss_kb, 100 * 1024) << "[HostDoS] airlock's peak RSS while streaming 1 GB";
}

}  // namespace
}  // namespace airlock::hostile
