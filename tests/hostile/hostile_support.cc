#include "hostile_support.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

extern char** environ;

namespace airlock::hostile {

using airlock::testing::readFile;
using airlock::testing::runCommand;
using airlock::testing::TempDir;

namespace {

std::string clip(const std::string& s, size_t n = 1500) {
  if (s.size() <= n) return s;
  return s.substr(0, n) + "... [" + std::to_string(s.size() - n) + " more bytes]";
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

bool g_isolation_verified = false;

// The guard of docs/security-tests.md: before any attack, prove that `airlock run` gives a private
// pid namespace and an unprivileged uid map. Anything else aborts the binary.
class IsolationGuard : public ::testing::Environment {
 public:
  void SetUp() override {
    if (!airlock::testing::isRealRoot()) return;  // every case skips (or fails) on its own
    std::string why = check();
    if (!why.empty()) {
      std::cerr << "\n*** hostile suite ABORTED: the sandbox is not isolated, refusing to run "
                   "attacks on this host ***\n"
                << why << "\n";
      ADD_FAILURE() << "isolation guard: " << why;
      std::abort();
    }
    g_isolation_verified = true;
  }

 private:
  static std::string check() {
    auto host_pidns = trim(std::filesystem::read_symlink("/proc/self/ns/pid").string());
    // gVisor and microVMs: a kernel of their own answers the sandbox, not the host's.
    const bool microvm = airlock::testing::underMicrovm();
    const bool gvisor = airlock::testing::underGvisor() || microvm;
    auto run = runSandbox("shell",
                          microvm  ? "readlink /proc/self/ns/pid; cat /proc/version; "
                                     "echo boot_id $(cat /proc/sys/kernel/random/boot_id); echo $$"
                          : gvisor ? "readlink /proc/self/ns/pid; cat /proc/version; echo $$"
                                   : "cat /proc/self/uid_map; readlink /proc/self/ns/pid; echo $$",
                          {.timeout_s = 120});
    std::ostringstream why;
    if (!run.parsed() || run.proc.exit_code != 0 || run.status() != "exited") {
      why << "the probe run did not succeed: " << run.describe();
      return why.str();
    }
    std::istringstream lines(run.out());
    std::string line;
    int map_lines = 0;
    std::string pidns, boot_id;
    long shell_pid = -1;
    while (std::getline(lines, line)) {
      std::istringstream f(line);
      unsigned long long inside = 0, outside = 0, count = 0;
      if (line.rfind("pid:[", 0) == 0) {
        pidns = line;
      } else if (microvm && line.rfind("boot_id ", 0) == 0) {
        // A VM's kernel is another boot of a kernel: its boot id is its own. (Its initial pid
        // namespace has the same fixed inode number as every kernel's, so that says nothing.)
        boot_id = line.substr(8);
        if (boot_id.empty() ||
            boot_id == trim(airlock::testing::readFile("/proc/sys/kernel/random/boot_id")))
          why << "the sandbox's boot id is the host's: not a kernel of its own; ";
      } else if (gvisor && line.rfind("Linux version ", 0) == 0) {
        // gVisor, microVM: a different kernel answers. Its uid_map is its own identity map, so
        // the evidence is that its kernel is not the host's.
        ++map_lines;
        if (line == trim(airlock::testing::readFile("/proc/version")))
          why << "the sandbox's /proc/version is the host's: not inside its own kernel; ";
      } else if (!gvisor && f >> inside >> outside >> count) {
        ++map_lines;
        if (outside < kSandboxUidBase || outside + count > kSandboxUidBase + 4096ull * 65536)
          why << "uid_map line '" << line << "' maps outside the sandbox range [2^28, "
              << "2^28 + 4096*65536); ";
      } else if (!line.empty()) {
        shell_pid = std::strtol(line.c_str(), nullptr, 10);
      }
    }
    if (map_lines == 0)
      why << (gvisor ? "no /proc/version in the probe output; "
                     : "no uid_map lines in the probe output; ");
    if (gvisor && shell_pid > 0) {
      // The shell's pid must be the sandbox kernel's own number, not the host process of that
      // number.
      std::string comm =
          trim(airlock::testing::readFile("/proc/" + std::to_string(shell_pid) + "/comm"));
      if (comm == "sh" || comm == "bash" || comm == "dash")
        why << "the host's pid " << shell_pid << " is a shell: the sandbox's pids are the host's; ";
    }
    if (pidns.empty()) why << "no pid namespace in the probe output; ";
    if (microvm && boot_id.empty()) why << "no boot id in the probe output; ";
    if (pidns == host_pidns && !microvm)
      why << "the sandbox shares the host pid namespace " << pidns << "; ";
    if (shell_pid <= 0 || shell_pid > 100)
      why << "the sandbox shell's pid is " << shell_pid << ", not a small pid of a fresh pid "
          << "namespace; ";
    if (!why.str().empty()) why << "\nprobe output:\n" << run.out();
    return why.str();
  }
};

[[maybe_unused]] const auto* const kGuard = ::testing::AddGlobalTestEnvironment(new IsolationGuard);

}  // namespace

std::string SandboxRun::status() const {
  if (!parsed() || !result.contains("status") || !result["status"].is_string()) return "<none>";
  return result["status"].get<std::string>();
}

std::string SandboxRun::out() const {
  if (!parsed() || !result.contains("stdout") || !result["stdout"].is_string()) return "";
  return result["stdout"].get<std::string>();
}

std::string SandboxRun::err() const {
  if (!parsed() || !result.contains("stderr") || !result["stderr"].is_string()) return "";
  return result["stderr"].get<std::string>();
}

std::string SandboxRun::describe() const {
  std::ostringstream os;
  os << "airlock exit=" << proc.exit_code << (proc.timed_out ? " (KILLED by the test: hung)" : "");
  if (parsed()) {
    nlohmann::json brief = result;
    brief.erase("stdout");
    brief.erase("stderr");
    brief.erase("policy");
    os << "\nrecord: " << clip(brief.dump(), 2000) << "\nprogram stdout: " << clip(out())
       << "\nprogram stderr: " << clip(err());
  } else {
    os << "\nairlock stdout (not one JSON object): " << clip(proc.out);
  }
  os << "\nairlock stderr: " << clip(proc.err);
  return os.str();
}

SandboxRun runSandbox(const std::string& lang, const std::string& code, const RunOptions& opts) {
  std::vector<std::string> args{"run", "--json", "--no-stdin", "--lang", lang, "-c", code};
  args.insert(args.end(), opts.flags.begin(), opts.flags.end());
  if (!opts.args.empty()) {
    args.push_back("--");
    args.insert(args.end(), opts.args.begin(), opts.args.end());
  }
  SandboxRun run;
  run.proc = airlock::testing::runAirlock(args, "", opts.timeout_s);
  run.result = nlohmann::json::parse(run.proc.out, nullptr, /*allow_exceptions=*/false);
  return run;
}

std::string probe(const std::string& name) {
  std::string text = readFile(airlock::testing::sourceDir() + "/tests/hostile/probes/" + name);
  if (text.empty()) ADD_FAILURE() << "probe tests/hostile/probes/" << name << " is missing";
  return text;
}

ProcResult runBarePython(const std::string& code, const std::vector<std::string>& args,
                         int timeout_s) {
  std::vector<std::string> argv{"/usr/bin/python3", "-c", code};
  argv.insert(argv.end(), args.begin(), args.end());
  return runCommand(argv, "", timeout_s);
}

ProcResult runUnsharedPython(const std::string& code, const std::vector<std::string>& args,
                             int timeout_s) {
  std::vector<std::string> argv{"/usr/bin/unshare",
                                "--user",
                                "--map-root-user",
                                "--fork",
                                "--pid",
                                "--mount-proc",
                                "--mount",
                                "--net",
                                "--uts",
                                "--ipc",
                                "--cgroup",
                                "--",
                                "/usr/bin/python3",
                                "-c",
                                code};
  argv.insert(argv.end(), args.begin(), args.end());
  return runCommand(argv, "", timeout_s);
}

std::string writePolicy(const TempDir& dir, const std::string& limits_toml) {
  dir.write("policy.toml",
            "schema = 1\n\n[profiles.default]\ndescription = \"hostile suite\"\n\n"
            "[profiles.default.limits]\n" +
                limits_toml + "\n");
  return dir.file("policy.toml");
}

std::string uniqueToken() {
  static std::mt19937_64 rng(std::random_device{}() ^ static_cast<uint64_t>(getpid()));
  std::uniform_int_distribution<uint64_t> d(100000000ull, 999999999ull);
  return std::to_string(d(rng)) + std::to_string(getpid() % 1000);
}

std::vector<pid_t> findProcesses(const std::string& token) {
  std::vector<pid_t> found;
  DIR* d = opendir("/proc");
  if (d == nullptr) return found;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == getpid()) continue;
    std::string cmd = readFile("/proc/" + std::string(e->d_name) + "/cmdline");
    for (auto& c : cmd)
      if (c == '\0') c = ' ';
    if (cmd.find(token) != std::string::npos) found.push_back(static_cast<pid_t>(pid));
  }
  closedir(d);
  return found;
}

bool processAlive(pid_t pid) {
  std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return false;
  auto paren = stat.rfind(')');
  return paren == std::string::npos || paren + 2 >= stat.size() || stat[paren + 2] != 'Z';
}

void killAndForget(const std::vector<pid_t>& pids) {
  for (pid_t p : pids) kill(p, SIGKILL);
  for (pid_t p : pids) {
    for (int i = 0; i < 200; ++i) {
      waitpid(p, nullptr, WNOHANG);  // ours: reap; not ours: init reaps
      if (!processAlive(p)) break;
      usleep(10000);
    }
  }
}

pid_t spawnBackground(const std::vector<std::string>& argv) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

FreeSpace freeSpace(const std::string& path) {
  struct statvfs st {};
  if (statvfs(path.c_str(), &st) != 0) return {};
  return {static_cast<uint64_t>(st.f_bavail) * st.f_frsize, static_cast<uint64_t>(st.f_favail)};
}

// ---- PidsSampler ----

namespace {

std::string pidsCgroupOf(const std::string& pid) {
  std::ifstream f("/proc/" + pid + "/cgroup");
  std::string line;
  while (std::getline(f, line)) {
    // "7:pids:/airlock/abc" (v1)
    auto first = line.find(':');
    auto second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    std::string ctrls = line.substr(first + 1, second - first - 1);
    std::istringstream cs(ctrls);
    std::string c;
    while (std::getline(cs, c, ','))
      if (c == "pids") return line.substr(second + 1);
  }
  return "";
}

}  // namespace

PidsSampler::PidsSampler() : thread_([this] { loop(); }) {}

PidsSampler::~PidsSampler() {
  running_ = false;
  if (thread_.joinable()) thread_.join();
}

std::vector<PidsSampler::Group> PidsSampler::stop() {
  running_ = false;
  if (thread_.joinable()) thread_.join();
  std::vector<Group> out;
  for (auto& [_, g] : groups_) out.push_back(g);
  return out;
}

void PidsSampler::loop() {
  auto last_spawn = std::chrono::steady_clock::now();
  while (running_) {
    std::map<std::string, long> counted;
    DIR* d = opendir("/proc");
    while (d != nullptr && running_) {
      dirent* e = readdir(d);
      if (e == nullptr) break;
      char* end = nullptr;
      long pid = std::strtol(e->d_name, &end, 10);
      if (*end != '\0' || pid <= 0) continue;
      struct stat st {};
      if (stat(("/proc/" + std::string(e->d_name)).c_str(), &st) != 0) continue;
      if (st.st_uid < kSandboxUidBase || st.st_uid == static_cast<uid_t>(-1)) continue;
      std::string cg = pidsCgroupOf(e->d_name);
      if (cg.empty()) continue;
      // The nearest ancestor with a limit is the sandbox's pids cgroup.
      std::filesystem::path dir =
          std::filesystem::path("/sys/fs/cgroup/pids") / std::filesystem::path(cg).relative_path();
      while (dir.string().size() > std::string("/sys/fs/cgroup/pids").size()) {
        std::string max = trim(readFile((dir / "pids.max").string()));
        if (!max.empty() && max != "max") {
          Group& g = groups_[dir.string()];
          g.path = dir.string();
          g.limit = std::strtol(max.c_str(), nullptr, 10);
          long cur =
              std::strtol(trim(readFile((dir / "pids.current").string())).c_str(), nullptr, 10);
          g.max_current = std::max(g.max_current, cur);
          counted[dir.string()]++;
          break;
        }
        dir = dir.parent_path();
      }
    }
    if (d != nullptr) closedir(d);
    // A gVisor sandbox has no host process with a sandbox uid (the sentry and its stubs run as
    // root and nobody): its cgroups are read directly.
    if (airlock::testing::underGvisor()) {
      std::error_code ec;
      for (const auto& e : std::filesystem::directory_iterator("/sys/fs/cgroup/pids/airlock", ec)) {
        std::string max = trim(readFile((e.path() / "pids.max").string()));
        if (max.empty() || max == "max") continue;
        Group& g = groups_[e.path().string()];
        g.path = e.path().string();
        g.limit = std::strtol(max.c_str(), nullptr, 10);
        long cur =
            std::strtol(trim(readFile((e.path() / "pids.current").string())).c_str(), nullptr, 10);
        g.max_current = std::max(g.max_current, cur);
      }
    }
    for (auto& [path, n] : counted)
      groups_[path].max_counted = std::max(groups_[path].max_counted, n);
    ++samples_;
    auto now = std::chrono::steady_clock::now();
    if (now - last_spawn > std::chrono::milliseconds(250)) {
      auto t0 = std::chrono::steady_clock::now();
      runCommand({"/bin/true"}, "", 30);
      double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      slowest_spawn_ms_ = std::max(slowest_spawn_ms_, ms);
      last_spawn = std::chrono::steady_clock::now();
    }
    usleep(20000);
  }
}

nlohmann::json parseProbeJson(const std::string& out, const std::string& context) {
  // The probe prints exactly one JSON line; anything else is reported verbatim.
  auto j = nlohmann::json::parse(out, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    ADD_FAILURE() << context << ": probe output is not one JSON object:\n" << clip(out);
    return nlohmann::json::object();
  }
  return j;
}

void HostileTest::SetUp() {
  AIRLOCK_REQUIRE_ROOT();
  ASSERT_TRUE(g_isolation_verified) << "the isolation guard did not run or did not pass";
  before_ = airlock::testing::snapshotHostResources();
  armed_ = true;
}

void HostileTest::TearDown() {
  if (!armed_) return;
  auto after = airlock::testing::snapshotHostResources();
  EXPECT_EQ(before_, after) << "the case left host resources behind (mounts with 'airlock', "
                               "cgroups under */airlock/, processes with sandbox uids)";
}

void HostileTest::expectOutcome(const SandboxRun& run, const std::string& status, int code) {
  EXPECT_FALSE(run.proc.timed_out) << "airlock hung: " << run.describe();
  ASSERT_TRUE(run.parsed()) << run.describe();
  EXPECT_EQ(run.status(), status) << run.describe();
  EXPECT_EQ(run.proc.exit_code, code) << run.describe();
  if (run.result.contains("airlock_exit_code")) {
    EXPECT_EQ(run.result["airlock_exit_code"], code) << run.describe();
  }
}

}  // namespace airlock::hostile
