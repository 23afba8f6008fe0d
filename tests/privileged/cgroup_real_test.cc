// The cgroup layer on this host's real hierarchies (hybrid here: limits in v1, directory in v2).
// Every cgroup is named test-<pid>-<n> and reclaimed in TearDown even when a test fails.
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "supervisor/doctor/doctor.h"
#include "supervisor/sys/cgroup.h"
#include "test_support.h"

namespace airlock::sys {
namespace {

namespace fs = std::filesystem;
using airlock::testing::readFile;

std::string trimmed(const std::string& path) {
  std::string s = readFile(path);
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// A forked child that waits on a pipe until the parent has put it into the cgroup.
class HeldChild {
 public:
  template <typename F>
  explicit HeldChild(F&& body) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(p[1]);
      char c;
      if (::read(p[0], &c, 1) != 1) ::_exit(120);
      ::_exit(body());
    }
    ::close(p[0]);
    release_ = p[1];
  }
  ~HeldChild() {
    if (release_ >= 0) ::close(release_);
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  void release() {
    char c = 'g';
    EXPECT_EQ(::write(release_, &c, 1), 1);
    ::close(release_);
    release_ = -1;
  }
  int wait() {
    int st = 0;
    ::waitpid(pid_, &st, 0);
    reaped_ = true;
    return st;
  }

 private:
  pid_t pid_ = -1;
  int release_ = -1;
  bool reaped_ = false;
};

class RealCgroup : public ::testing::Test {
 protected:
  void SetUp() override {
    AIRLOCK_REQUIRE_ROOT();
    auto h = CgroupHost::detect();
    ASSERT_TRUE(h) << h.error().message();
    host_ = *h;
    prefix_ = "test-" + std::to_string(::getpid()) + "-";
  }
  void TearDown() override {
    if (prefix_.empty()) return;
    auto r = reclaimStaleCgroups(host_, std::chrono::seconds(5), prefix_);
    EXPECT_TRUE(r) << r.error().message();
    if (r) {
      EXPECT_EQ(*r, 0) << "a test left cgroups behind";
    }
  }
  std::string uniqueName() { return prefix_ + std::to_string(counter_++); }
  std::string v1(const std::string& ctrl, const std::string& name) const {
    return host_.v1_mounts.at(ctrl) + "/airlock/" + name;
  }

  CgroupHost host_;
  std::string prefix_;
  int counter_ = 0;
};

TEST_F(RealCgroup, LimitsLandInTheHierarchyThatOwnsTheController) {
  std::string name = uniqueName();
  auto cg = SandboxCgroup::create(host_, name, {256ull << 20, 32, 20});
  ASSERT_TRUE(cg) << cg.error().message();
  for (const char* c : {"memory", "pids", "cpu"}) {
    std::string dir = host_.v2_has(c) ? host_.v2_mount + "/airlock/" + name : v1(c, name);
    EXPECT_TRUE(fs::is_directory(dir)) << dir;
    EXPECT_EQ(cg->controllerPath(c), dir);
  }
  if (!host_.v2_has("memory")) {
    EXPECT_EQ(trimmed(v1("memory", name) + "/memory.limit_in_bytes"), "268435456");
    std::string memsw = v1("memory", name) + "/memory.memsw.limit_in_bytes";
    if (fs::exists(memsw)) {
      EXPECT_EQ(trimmed(memsw), "268435456");
    }
  }
  if (!host_.v2_has("pids")) {
    EXPECT_EQ(trimmed(v1("pids", name) + "/pids.max"), "32");
  }
  if (!host_.v2_has("cpu")) {
    EXPECT_EQ(trimmed(v1("cpu", name) + "/cpu.cfs_period_us"), "100000");
    EXPECT_EQ(trimmed(v1("cpu", name) + "/cpu.cfs_quota_us"), "20000");
  }
  if (!host_.v2_mount.empty()) {
    EXPECT_TRUE(fs::is_directory(host_.v2_mount + "/airlock/" + name));
    EXPECT_GE(cg->cloneIntoFd(), 0);
  }
  auto paths = cg->paths();
  ASSERT_TRUE(cg->destroy(std::chrono::seconds(2)));
  for (const auto& p : paths) EXPECT_FALSE(fs::exists(p)) << p;
}

TEST_F(RealCgroup, CloneIntoCgroupPlacesTheChildInTheV2Directory) {
  AIRLOCK_REQUIRE(!host_.v2_mount.empty(), "no cgroup2 mount on this host");
  std::string name = uniqueName();
  auto cg = SandboxCgroup::create(host_, name, {});
  ASSERT_TRUE(cg) << cg.error().message();
  std::string want = "0::/airlock/" + name + "\n";
  clone_args args{};
  args.flags = CLONE_INTO_CGROUP;
  args.exit_signal = SIGCHLD;
  args.cgroup = static_cast<uint64_t>(cg->cloneIntoFd());
  long pid = ::syscall(SYS_clone3, &args, sizeof args);
  ASSERT_GE(pid, 0) << std::strerror(errno);
  if (pid == 0) {
    char buf[4096] = {};
    int fd = ::open("/proc/self/cgroup", O_RDONLY);
    ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::_exit(n > 0 && std::strstr(buf, want.c_str()) != nullptr ? 0 : 1);
  }
  int st = 0;
  ::waitpid(static_cast<pid_t>(pid), &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child was not in " << want;
  ASSERT_TRUE(cg->destroy(std::chrono::seconds(2)));
}

TEST_F(RealCgroup, MemoryHogIsOomKilledAndCounted) {
  std::string name = uniqueName();
  auto cg = SandboxCgroup::create(host_, name, {32ull << 20, 0, 0});
  ASSERT_TRUE(cg) << cg.error().message();
  HeldChild hog([] {
    constexpr size_t kSize = 256ull << 20;
    // volatile: the compiler must not elide an allocation nobody reads.
    volatile char* p = static_cast<volatile char*>(::malloc(kSize));
    if (p == nullptr) return 2;
    for (size_t i = 0; i < kSize; i += 4096) p[i] = 1;
    return 0;  // survived: the limit did not hold
  });
  ASSERT_TRUE(cg->attachAll(hog.pid()));
  hog.release();
  int st = hog.wait();
  ASSERT_TRUE(WIFSIGNALED(st)) << "exit status " << WEXITSTATUS(st);
  EXPECT_EQ(WTERMSIG(st), SIGKILL);
  auto stats = cg->stats();
  ASSERT_TRUE(stats) << stats.error().message();
  EXPECT_GE(stats->oom_kills, 1u);
  EXPECT_GE(stats->memory_peak_bytes, 16ull << 20);
  EXPECT_LE(stats->memory_peak_bytes, 33ull << 20);
  EXPECT_GT(stats->cpu_usage_ns, 0u);
  ASSERT_TRUE(cg->destroy(std::chrono::seconds(2)));
}

TEST_F(RealCgroup, PidsLimitStopsForks) {
  std::string name = uniqueName();
  auto cg = SandboxCgroup::create(host_, name, {0, 8, 0});
  ASSERT_TRUE(cg) << cg.error().message();
  HeldChild bomb([] {
    std::vector<pid_t> kids;
    int eagain = 0;
    for (int i = 0; i < 30; ++i) {
      pid_t k = ::fork();
      if (k == 0) {
        ::pause();
        ::_exit(0);
      }
      if (k > 0) kids.push_back(k);
      if (k < 0 && errno == EAGAIN) ++eagain;
    }
    for (pid_t k : kids) ::kill(k, SIGKILL);
    for (pid_t k : kids) ::waitpid(k, nullptr, 0);
    return eagain > 0 ? static_cast<int>(kids.size()) : 100;
  });
  ASSERT_TRUE(cg->attachAll(bomb.pid()));
  bomb.release();
  int st = bomb.wait();
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_LE(WEXITSTATUS(st), 7) << "forks that succeeded under pids.max=8";
  auto stats = cg->stats();
  ASSERT_TRUE(stats);
  // pids.peak where the kernel has it, else pids.current: never above the limit.
  EXPECT_LE(stats->pids_peak_or_current, 8u);
  ASSERT_TRUE(cg->destroy(std::chrono::seconds(2)));
}

TEST_F(RealCgroup, KillAllKillsADaemonisedTree) {
  std::string name = uniqueName();
  auto cg = SandboxCgroup::create(host_, name, {0, 64, 0});
  ASSERT_TRUE(cg) << cg.error().message();
  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  HeldChild root([&] {
    ::close(report[0]);
    for (int i = 0; i < 3; ++i) {
      pid_t k = ::fork();
      if (k == 0) {
        // Double fork + setsid + SIGTERM ignored: a daemon that outlives its parent.
        ::setsid();
        ::signal(SIGTERM, SIG_IGN);
        if (::fork() != 0) ::_exit(0);
        pid_t me = ::getpid();
        if (::write(report[1], &me, sizeof me) != sizeof me) ::_exit(1);
        for (;;) ::pause();
      }
      ::waitpid(k, nullptr, 0);
    }
    ::close(report[1]);
    for (;;) ::pause();
    return 0;
  });
  ::close(report[1]);
  ASSERT_TRUE(cg->attachAll(root.pid()));
  root.release();
  std::vector<pid_t> daemons;
  pid_t d;
  while (daemons.size() < 3 && ::read(report[0], &d, sizeof d) == sizeof d) daemons.push_back(d);
  ::close(report[0]);
  ASSERT_EQ(daemons.size(), 3u);
  for (pid_t p : daemons) EXPECT_EQ(::kill(p, 0), 0) << "daemon " << p << " should run";

  ASSERT_TRUE(cg->killAll());
  int st = root.wait();
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  auto paths = cg->paths();
  ASSERT_TRUE(cg->destroy(std::chrono::seconds(2)));
  for (pid_t p : daemons) {
    // Gone, or a zombie waiting for init: in neither case running. A killed task leaves its
    // cgroup early in exit (so the rmdir above can succeed) and becomes a zombie a moment later,
    // so give that moment before judging.
    const std::string path = "/proc/" + std::to_string(p) + "/stat";
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    std::string stat;
    for (;;) {
      stat = fs::exists(path) ? readFile(path) : std::string();
      bool dead = stat.empty() || stat.find(") Z ") != std::string::npos ||
                  stat.find(") X ") != std::string::npos;
      if (dead || std::chrono::steady_clock::now() > deadline) break;
      ::usleep(1000);
    }
    EXPECT_TRUE(stat.empty() || stat.find(") Z ") != std::string::npos ||
                stat.find(") X ") != std::string::npos)
        << stat;
  }
  for (const auto& p : paths) EXPECT_FALSE(fs::exists(p)) << p;
}

TEST_F(RealCgroup, ReclaimRemovesALeftoverWithItsProcesses) {
  std::string name = uniqueName();
  // What a crashed supervisor leaves: directories in v2 and v1 memory with a live process.
  std::vector<std::string> dirs;
  if (!host_.v2_mount.empty()) dirs.push_back(host_.v2_mount + "/airlock/" + name);
  if (host_.v1_mounts.count("memory")) dirs.push_back(v1("memory", name));
  ASSERT_FALSE(dirs.empty());
  for (const auto& dir : dirs) {
    fs::create_directories(fs::path(dir).parent_path());
    ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0) << dir;
  }
  HeldChild orphan([] {
    for (;;) ::pause();
    return 0;
  });
  for (const auto& dir : dirs) {
    std::FILE* f = std::fopen((dir + "/cgroup.procs").c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fprintf(f, "%d", orphan.pid());
    ASSERT_EQ(std::fclose(f), 0);
  }
  auto n = reclaimStaleCgroups(host_, std::chrono::seconds(2), name);
  ASSERT_TRUE(n) << n.error().message();
  EXPECT_EQ(*n, 1);
  int st = orphan.wait();
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
  for (const auto& dir : dirs) EXPECT_FALSE(fs::exists(dir)) << dir;
}

TEST_F(RealCgroup, CreateDestroyIsFast) {
  using Clock = std::chrono::steady_clock;
  auto measure = [&](const CgroupLimits& limits, int rounds) {
    auto start = Clock::now();
    for (int i = 0; i < rounds; ++i) {
      auto cg = SandboxCgroup::create(host_, uniqueName(), limits);
      EXPECT_TRUE(cg) << cg.error().message();
      if (cg) {
        EXPECT_TRUE(cg->destroy(std::chrono::seconds(2)));
      }
    }
    return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start).count() /
           rounds;
  };
  long empty_us = measure({}, 100);
  long limited_us = measure({256ull << 20, 64, 50}, 50);
  std::printf("cgroup create+destroy: empty %ld us, with memory+pids+cpu limits %ld us\n", empty_us,
              limited_us);
  RecordProperty("empty_us", static_cast<int>(empty_us));
  RecordProperty("limited_us", static_cast<int>(limited_us));
  EXPECT_LT(empty_us, 5000);
  EXPECT_LT(limited_us, 20000);
}

TEST(HostProbe, DoctorSaysNamespacesWorkHere) {
  AIRLOCK_REQUIRE_ROOT();
  auto checks = doctor::probeHost();
  ASSERT_TRUE(checks) << checks.error().message();
  std::printf("%s", doctor::formatDoctor(*checks).c_str());
  bool found = false;
  for (const auto& c : *checks) {
    if (c.feature == "backend namespaces") {
      found = true;
      EXPECT_TRUE(c.ok) << c.detail;
    }
    if (c.feature.starts_with("clone3 ") || c.feature == "pivot_root" ||
        c.feature == "seccomp USER_NOTIF" || c.feature == "cgroups") {
      EXPECT_TRUE(c.ok) << c.feature << ": " << c.detail;
    }
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace airlock::sys
