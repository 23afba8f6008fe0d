// The sandbox posture of docs/security-tests.md, read from the host through /proc/<pid>/ of a live
// sandboxed process (after gVisor's test/root/sandboxposture_test.go): namespaces, id maps,
// credentials, capabilities, NoNewPrivs, seccomp, inherited fds, the mount table of its root,
// /dev, and the cgroup and rlimit values against the policy. Then the supervisor gets SIGTERM
// and must leave nothing behind.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "test_support.h"

extern char** environ;

namespace airlock::testing {
namespace {

constexpr uint64_t kUidBase = 1ull << 28;
constexpr uint64_t kUidEnd = kUidBase + 4096ull * 65536;

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string link(const std::string& path) {
  std::error_code ec;
  auto t = std::filesystem::read_symlink(path, ec);
  return ec ? "" : t.string();
}

// "Key:\tvalue" lines of /proc/<pid>/status.
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

struct MountEntry {
  std::string root, point, options, fstype, source, super_options;
};

std::vector<MountEntry> mountsOf(pid_t pid) {
  std::vector<MountEntry> out;
  std::ifstream f("/proc/" + std::to_string(pid) + "/mountinfo");
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream s(line);
    std::string id, parent, dev;
    MountEntry m;
    s >> id >> parent >> dev >> m.root >> m.point >> m.options;
    std::string tok;
    while (s >> tok && tok != "-") {
    }
    s >> m.fstype >> m.source >> m.super_options;
    out.push_back(m);
  }
  return out;
}

bool hasOption(const std::string& options, const std::string& opt) {
  std::istringstream s(options);
  std::string o;
  while (std::getline(s, o, ','))
    if (o == opt) return true;
  return false;
}

// The value of a limit file, walking up from the process's cgroup to the nearest ancestor that
// sets one (a sandbox may put its processes in a child of the limited cgroup).
std::string cgroupLimit(const std::string& controller, const std::string& cg_path,
                        const std::string& file, const std::string& unlimited) {
  std::filesystem::path root = std::filesystem::path("/sys/fs/cgroup") / controller;
  std::filesystem::path dir = root / std::filesystem::path(cg_path).relative_path();
  while (dir.string().size() > root.string().size()) {
    std::string v = trim(readFile((dir / file).string()));
    if (!v.empty() && v != unlimited) return v;
    dir = dir.parent_path();
  }
  return "";
}

// Soft and hard values of one /proc/<pid>/limits row ("Max open files").
std::pair<std::string, std::string> rlimitOf(pid_t pid, const std::string& name) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/limits");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(name, 0) != 0) continue;
    std::istringstream s(line.substr(name.size()));
    std::string soft, hard;
    s >> soft >> hard;
    return {soft, hard};
  }
  return {"", ""};
}

// `airlock run --lang shell -c 'exec sleep 30.<token>'` in the background, and the sandboxed
// `sleep` found from the host by its token and its sandbox uid.
class LiveSandbox {
 public:
  explicit LiveSandbox(const std::vector<std::string>& extra_flags) {
    std::mt19937_64 rng(std::random_device{}());
    token_ = std::to_string(100000000 + rng() % 900000000) + std::to_string(getpid() % 1000);
    std::vector<std::string> argv{airlockBinary(), "run", "--lang", "shell", "--no-stdin"};
    argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
    argv.insert(argv.end(), {"-c", "exec sleep 30." + token_});
    log_ = std::filesystem::temp_directory_path() / ("airlock-posture-" + token_ + ".log");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    if (posix_spawn(&airlock_, args[0], &fa, nullptr, args.data(), environ) != 0) airlock_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    for (int i = 0; i < 500 && airlock_ > 0 && sandboxed_ <= 0; ++i) {
      sandboxed_ = find();
      if (sandboxed_ <= 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      if (waitpid(airlock_, &status_, WNOHANG) == airlock_) {
        exited_ = true;
        break;
      }
    }
    // The program turns up at its exec, while its dynamic loader may still hold a library or a
    // locale file open on fd 3: its posture is read once it sits in its sleep.
    for (int i = 0; i < 250 && sandboxed_ > 0 && !sleeping(sandboxed_); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ~LiveSandbox() {
    if (airlock_ > 0 && !exited_) {
      kill(airlock_, SIGKILL);
      waitpid(airlock_, nullptr, 0);
    }
    std::error_code ec;
    std::filesystem::remove(log_, ec);
  }
  pid_t airlock() const { return airlock_; }
  pid_t sandboxed() const { return sandboxed_; }
  const std::string& token() const { return token_; }
  std::string log() const { return readFile(log_); }

  // SIGTERM to airlock; true when it exits within timeout_s (status in exitStatus()).
  bool terminate(int sig, int timeout_s) {
    kill(airlock_, sig);
    for (int i = 0; i < timeout_s * 50; ++i) {
      if (waitpid(airlock_, &status_, WNOHANG) == airlock_) {
        exited_ = true;
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  int exitStatus() const { return status_; }

  // Whether pid is blocked in nanosleep or clock_nanosleep (/proc/<pid>/syscall: "230 0x..."
  // while blocked, "running" otherwise).
  static bool sleeping(pid_t pid) {
    std::string sc = readFile("/proc/" + std::to_string(pid) + "/syscall");
    if (sc.empty() || !std::isdigit(static_cast<unsigned char>(sc[0]))) return false;
    long nr = std::strtol(sc.c_str(), nullptr, 10);
    return nr == SYS_clock_nanosleep || nr == SYS_nanosleep;
  }

  // Every host process whose argv[0] is "sleep" with our token and whose uid is a sandbox uid.
  pid_t find() const {
    DIR* d = opendir("/proc");
    pid_t found = -1;
    while (dirent* e = d ? readdir(d) : nullptr) {
      char* end = nullptr;
      long pid = std::strtol(e->d_name, &end, 10);
      if (*end != '\0' || pid <= 0) continue;
      std::string cmd = readFile("/proc/" + std::string(e->d_name) + "/cmdline");
      if (cmd != std::string("sleep") + '\0' + "30." + token_ + '\0') continue;
      struct stat st {};
      if (stat(("/proc/" + std::string(e->d_name)).c_str(), &st) == 0 && st.st_uid >= kUidBase)
        found = static_cast<pid_t>(pid);
    }
    if (d) closedir(d);
    return found;
  }

 private:
  std::string token_;
  std::filesystem::path log_;
  pid_t airlock_ = -1;
  pid_t sandboxed_ = -1;
  int status_ = 0;
  bool exited_ = false;
};

struct ExpectedLimits {
  uint64_t memory_mb, pids, file_size_mb, open_files, cpu_percent;
};

// Every posture check on one live sandbox; limits compared with `want`.
void checkPosture(const LiveSandbox& box, const ExpectedLimits& want) {
  const pid_t pid = box.sandboxed();
  const std::string proc = "/proc/" + std::to_string(pid);

  // Namespaces: all seven new.
  for (const char* ns : {"user", "pid", "mnt", "net", "uts", "ipc", "cgroup"}) {
    std::string theirs = link(proc + "/ns/" + ns), ours = link(std::string("/proc/self/ns/") + ns);
    EXPECT_FALSE(theirs.empty()) << ns;
    EXPECT_NE(theirs, ours) << "the sandbox shares the host's " << ns << " namespace";
  }

  // Id maps into the sandbox range, and uid/gid 1000 seen from the host as base + 1000.
  uint64_t uid_base = 0, gid_base = 0;
  for (const char* map : {"uid_map", "gid_map"}) {
    std::istringstream s(readFile(proc + "/" + map));
    uint64_t inside, outside, count;
    int lines = 0;
    while (s >> inside >> outside >> count) {
      ++lines;
      EXPECT_GE(outside, kUidBase) << map << ": maps to host ids below 2^28";
      EXPECT_LE(outside + count, kUidEnd) << map << ": maps beyond the sandbox range";
      EXPECT_LE(count, 65536u) << map;
      if (inside == 0) (std::string(map) == "uid_map" ? uid_base : gid_base) = outside;
    }
    EXPECT_GT(lines, 0) << map << " is empty";
  }
  auto st = statusOf(pid);
  auto four = [](uint64_t v) {
    std::string s = std::to_string(v);
    return s + "\t" + s + "\t" + s + "\t" + s;
  };
  EXPECT_EQ(st["Uid"], four(uid_base + 1000)) << "host view of the sandbox user (uid 1000)";
  EXPECT_EQ(st["Gid"], four(gid_base + 1000)) << "host view of the sandbox group (gid 1000)";
  for (const char* cap : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"})
    EXPECT_EQ(st[cap], "0000000000000000") << cap;
  EXPECT_EQ(st["NoNewPrivs"], "1");
  EXPECT_EQ(st["Seccomp"], "2");

  // Inherited fds: stdio only, never a directory, never a socket (the agent's channel).
  std::set<std::string> fds;
  for (const auto& e : std::filesystem::directory_iterator(proc + "/fd")) {
    std::string n = e.path().filename().string();
    fds.insert(n);
    std::string target = link(e.path().string());
    struct stat fst {};
    if (stat(e.path().c_str(), &fst) == 0) {
      EXPECT_FALSE(S_ISDIR(fst.st_mode)) << "fd " << n << " is a directory: " << target;
    }
    EXPECT_EQ(target.rfind("socket:", 0), std::string::npos) << "fd " << n << " is a socket";
  }
  EXPECT_EQ(fds, (std::set<std::string>{"0", "1", "2"})) << "inherited fds beyond stdio";

  // The agent (parent of the program, the sandbox's pid 1): no directory fds, no host paths.
  pid_t agent = std::atoi(st["PPid"].c_str());
  EXPECT_EQ(readFile("/proc/" + std::to_string(agent) + "/cmdline").substr(0, 13), "airlock-agent")
      << "the program's parent is not the agent";
  auto agent_ns = link("/proc/" + std::to_string(agent) + "/ns/pid");
  EXPECT_EQ(agent_ns, link(proc + "/ns/pid"));
  for (const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(agent) + "/fd")) {
    std::string target = link(e.path().string());
    struct stat fst {};
    if (stat(e.path().c_str(), &fst) == 0) {
      EXPECT_FALSE(S_ISDIR(fst.st_mode))
          << "agent fd " << e.path().filename() << " -> " << target << " is a directory";
    }
    if (!target.empty() && target[0] == '/') {
      EXPECT_EQ(target, "/dev/null") << "agent fd " << e.path().filename() << " is a file";
    }
  }

  // The root: a read-only tmpfs holding read-only binds; writable tmpfs only at /home/user,
  // /tmp and /dev/shm; /proc with masks; no /sys.
  auto mounts = mountsOf(pid);
  std::map<std::string, MountEntry> by_point;
  for (const auto& m : mounts) by_point[m.point] = m;  // the last mount at a point is on top
  ASSERT_TRUE(by_point.contains("/")) << readFile(proc + "/mountinfo");
  EXPECT_TRUE(hasOption(by_point["/"].options, "ro")) << "/ is writable";
  EXPECT_EQ(by_point["/"].fstype, "tmpfs") << "/ is not the sandbox's own tmpfs";
  ASSERT_TRUE(by_point.contains("/usr"));
  EXPECT_TRUE(hasOption(by_point["/usr"].options, "ro")) << "/usr is writable";
  for (const char* rw : {"/home/user", "/tmp"}) {
    ASSERT_TRUE(by_point.contains(rw)) << rw << " is not a mount";
    EXPECT_EQ(by_point[rw].fstype, "tmpfs") << rw;
    EXPECT_TRUE(hasOption(by_point[rw].options, "rw")) << rw;
    EXPECT_TRUE(hasOption(by_point[rw].options, "nosuid")) << rw;
    EXPECT_TRUE(hasOption(by_point[rw].options, "nodev")) << rw;
  }
  ASSERT_TRUE(by_point.contains("/proc"));
  EXPECT_EQ(by_point["/proc"].fstype, "proc");
  for (const char* masked : {"/proc/kcore", "/proc/keys", "/proc/sysrq-trigger", "/proc/timer_list",
                             "/proc/sched_debug"}) {
    if (access(masked, F_OK) != 0) continue;  // not on this kernel: nothing to mask
    EXPECT_TRUE(by_point.contains(masked)) << masked << " is not masked (no mount over it)";
  }
  ASSERT_TRUE(by_point.contains("/proc/sys")) << "/proc/sys is not remounted read-only";
  EXPECT_TRUE(hasOption(by_point["/proc/sys"].options, "ro")) << "/proc/sys is writable";
  for (const auto& m : mounts) {
    EXPECT_NE(m.point.rfind("/sys", 0), 0u) << "a mount under /sys: " << m.point;
    EXPECT_NE(m.fstype, "sysfs") << m.point;
    EXPECT_NE(m.fstype.rfind("cgroup", 0), 0u) << "cgroupfs visible at " << m.point;
    // Host filesystems are bound read-only, everything writable is the sandbox's own tmpfs.
    if (m.source.rfind("/dev/", 0) == 0 && m.fstype != "devtmpfs") {
      EXPECT_TRUE(hasOption(m.options, "ro")) << "host filesystem writable at " << m.point;
    }
    if (hasOption(m.options, "rw") && m.fstype == "tmpfs") {
      EXPECT_TRUE(hasOption(m.options, "nosuid")) << m.point;
    }
  }
  std::error_code ec;
  EXPECT_FALSE(std::filesystem::exists(proc + "/root/sys/kernel", ec)) << "/sys is visible";

  // /dev: only the harmless devices.
  const std::set<std::string> allowed = {"null",  "zero",   "full",  "random", "urandom",
                                         "tty",   "ptmx",   "pts",   "shm",    "fd",
                                         "stdin", "stdout", "stderr"};
  std::set<std::string> dev;
  for (const auto& e : std::filesystem::directory_iterator(proc + "/root/dev", ec))
    dev.insert(e.path().filename().string());
  EXPECT_FALSE(ec) << ec.message();
  for (const auto& d : dev) EXPECT_TRUE(allowed.contains(d)) << "/dev/" << d << " is visible";
  for (const char* need : {"null", "zero", "full", "random", "urandom", "tty"})
    EXPECT_TRUE(dev.contains(need)) << "/dev/" << need << " is missing";

  // Limits in force: cgroups v1 memory/pids/cpu and rlimits, equal to the policy.
  std::map<std::string, std::string> cg;
  {
    std::ifstream f(proc + "/cgroup");
    std::string line;
    while (std::getline(f, line)) {
      auto a = line.find(':'), b = line.find(':', a + 1);
      std::istringstream ctrls(line.substr(a + 1, b - a - 1));
      std::string c;
      while (std::getline(ctrls, c, ',')) cg[c] = line.substr(b + 1);
    }
  }
  for (const char* c : {"memory", "pids", "cpu"})
    EXPECT_NE(cg[c].find("airlock"), std::string::npos) << c << " cgroup: " << cg[c];
  EXPECT_EQ(cgroupLimit("memory", cg["memory"], "memory.limit_in_bytes", "9223372036854771712"),
            std::to_string(want.memory_mb << 20));
  EXPECT_EQ(cgroupLimit("pids", cg["pids"], "pids.max", "max"), std::to_string(want.pids));
  std::string quota = cgroupLimit("cpu", cg["cpu"], "cpu.cfs_quota_us", "-1");
  std::string period = trim(readFile("/sys/fs/cgroup/cpu" + cg["cpu"] + "/cpu.cfs_period_us"));
  ASSERT_FALSE(quota.empty()) << "no CPU quota";
  ASSERT_FALSE(period.empty());
  EXPECT_EQ(std::stoll(quota) * 100 / std::stoll(period), static_cast<long long>(want.cpu_percent))
      << "cpu quota " << quota << " / period " << period;
  auto fsize = std::to_string(want.file_size_mb << 20);
  EXPECT_EQ(rlimitOf(pid, "Max file size"), std::make_pair(fsize, fsize));
  auto nofile = std::to_string(want.open_files);
  EXPECT_EQ(rlimitOf(pid, "Max open files"), std::make_pair(nofile, nofile));
  EXPECT_EQ(rlimitOf(pid, "Max core file size").first, "0");
}

// Terminates the supervisor and checks the sandbox is gone with its cgroups.
void checkTeardown(LiveSandbox& box, const HostResources& before) {
  std::map<std::string, std::string> cg;
  std::vector<std::string> dirs;
  {
    std::ifstream f("/proc/" + std::to_string(box.sandboxed()) + "/cgroup");
    std::string line;
    while (std::getline(f, line)) {
      auto a = line.find(':'), b = line.find(':', a + 1);
      std::string ctrl = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
      if (path.find("airlock") == std::string::npos) continue;
      std::string dir = ctrl.empty() ? "unified" : ctrl.substr(0, ctrl.find(','));
      dirs.push_back("/sys/fs/cgroup/" + dir + path);
    }
  }
  ASSERT_FALSE(dirs.empty());
  bool clean_exit = box.terminate(SIGTERM, 10);
  EXPECT_TRUE(clean_exit) << "airlock did not exit within 10 s of SIGTERM (killed with SIGKILL)";
  if (!clean_exit) {
    ASSERT_TRUE(box.terminate(SIGKILL, 10));
  }
  int st = box.exitStatus();
  std::cout << "[ info ] airlock after SIGTERM: "
            << (WIFEXITED(st) ? "exit " + std::to_string(WEXITSTATUS(st))
                              : "signal " + std::to_string(WTERMSIG(st)))
            << "\n";
  EXPECT_TRUE(WIFEXITED(st)) << "airlock died of signal " << WTERMSIG(st)
                             << " instead of handling SIGTERM and cleaning up";
  for (int i = 0; i < 100 && box.find() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  pid_t left = box.find();
  EXPECT_LE(left, 0) << "the sandboxed process survived the supervisor";
  if (left > 0) kill(left, SIGKILL);
  for (const auto& d : dirs) {
    EXPECT_FALSE(std::filesystem::exists(d)) << "cgroup left behind: " << d;
    if (std::filesystem::exists(d)) rmdir(d.c_str());  // only if empty; best effort
  }
  EXPECT_EQ(snapshotHostResources(), before) << "host resources left behind";
}

// Default policy: limits are the built-in defaults (policy.h).
TEST(Posture, DefaultPolicy) {
  AIRLOCK_REQUIRE_ROOT();
  auto before = snapshotHostResources();
  LiveSandbox box({});
  ASSERT_GT(box.sandboxed(), 0) << "no sandboxed `sleep 30." << box.token()
                                << "` found; airlock said:\n"
                                << box.log();
  checkPosture(box, {.memory_mb = 1024,
                     .pids = 256,
                     .file_size_mb = 256,
                     .open_files = 1024,
                     .cpu_percent = 100});
  checkTeardown(box, before);
}

// A policy with unusual values: each must reach the kernel unchanged.
TEST(Posture, PolicyLimitsReachTheKernel) {
  AIRLOCK_REQUIRE_ROOT();
  TempDir dir;
  dir.write("policy.toml",
            "schema = 1\n[profiles.default]\n[profiles.default.limits]\nmemory_mb = 300\n"
            "workspace_mb = 100\ntmp_mb = 50\n"
            "pids = 77\nfile_size_mb = 33\nopen_files = 321\ncpu_percent = 50\n");
  auto before = snapshotHostResources();
  LiveSandbox box({"--policy", dir.file("policy.toml")});
  ASSERT_GT(box.sandboxed(), 0) << "no sandboxed process found; airlock said:\n" << box.log();
  checkPosture(
      box,
      {.memory_mb = 300, .pids = 77, .file_size_mb = 33, .open_files = 321, .cpu_percent = 50});
  checkTeardown(box, before);
}

// /proc/kallsyms shows no kernel addresses inside ("kallsyms addresses zero",
// docs/security-tests.md). Control: the host's root sees real addresses.
TEST(Posture, KallsymsAddressesHidden) {
  AIRLOCK_REQUIRE_ROOT();
  auto host = readFile("/proc/kallsyms").substr(0, 16);
  ASSERT_NE(host, "0000000000000000") << "control: the host shows no addresses either";
  auto r = runAirlock({"run", "--lang", "shell", "--no-stdin", "-c",
                       "head -n 20 /proc/kallsyms 2>/dev/null | cut -c1-16 | sort -u"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line))
    EXPECT_EQ(line, "0000000000000000") << "kernel address visible in the sandbox";
}

}  // namespace
}  // namespace airlock::testing
