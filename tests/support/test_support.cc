#include "test_support.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

extern char** environ;

#include <regex>
namespace airlock::testing {

bool isRealRoot() {
  if (geteuid() != 0) return false;
  std::ifstream f("/proc/self/uid_map");
  long inside = -1, outside = -1, count = -1;
  f >> inside >> outside >> count;
  return inside == 0 && outside == 0 && count == 4294967295L;
}

bool privilegeRequired() {
  const char* v = std::getenv("AIRLOCK_TEST_REQUIRE_PRIVILEGED");
  return v != nullptr && std::string(v) == "1";
}

std::string buildDir() { return AIRLOCK_TEST_BUILD_DIR; }
std::string sourceDir() { return AIRLOCK_TEST_SOURCE_DIR; }
std::string airlockBinary() { return buildDir() + "/bin/airlock"; }
std::string agentBinary() { return buildDir() + "/libexec/airlock/airlock-agent"; }
std::string pluginDir() { return buildDir() + "/lib/airlock/plugins"; }

ProcResult runCommand(const std::vector<std::string>& argv, const std::string& stdin_data,
                      int timeout_s, const std::vector<std::string>& extra_env) {
  ProcResult r;
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    r.err = "pipe failed";
    return r;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_store;
  for (char** e = environ; *e != nullptr; ++e) env_store.emplace_back(*e);
  for (auto& e : extra_env) env_store.push_back(e);
  std::vector<char*> env;
  for (auto& e : env_store) env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]);
  close(out[1]);
  close(err[1]);
  if (rc != 0) {
    close(in[1]);
    close(out[0]);
    close(err[0]);
    r.err = "posix_spawn failed: " + std::string(strerror(rc));
    return r;
  }
  fcntl(in[1], F_SETFL, O_NONBLOCK);
  size_t written = 0;
  if (stdin_data.empty()) {
    close(in[1]);
    in[1] = -1;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  bool out_open = true, err_open = true;
  char buf[65536];
  while (out_open || err_open) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      r.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    pollfd fds[3] = {{out_open ? out[0] : -1, POLLIN, 0},
                     {err_open ? err[0] : -1, POLLIN, 0},
                     {in[1], POLLOUT, 0}};
    if (poll(fds, 3, static_cast<int>(left)) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].revents == 0) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        (i == 0 ? out_open : err_open) = false;
      } else {
        (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
      }
    }
    if (in[1] >= 0 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP)) != 0) {
      ssize_t n = write(in[1], stdin_data.data() + written, stdin_data.size() - written);
      if (n > 0) written += static_cast<size_t>(n);
      if (n < 0 || written == stdin_data.size()) {
        close(in[1]);
        in[1] = -1;
      }
    }
  }
  if (in[1] >= 0) close(in[1]);
  close(out[0]);
  close(err[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

std::string testIsolation() {
  const char* e = std::getenv("AIRLOCK_TEST_ISOLATION");
  return e != nullptr && *e != '\0' ? e : "namespaces";
}

bool underGvisor() { return testIsolation() == "gvisor"; }

bool underMicrovm() { return testIsolation() == "microvm"; }

std::string withTestIsolation(const std::string& toml) {
  const std::string backend = testIsolation();
  if (backend == "namespaces" || toml.find("schema") == std::string::npos) return toml;
  const std::string line = "isolation = \"" + backend + "\"";
  std::istringstream in(toml);
  std::string out, l;
  bool in_profile = false, chose = false, have_default = false;
  auto close = [&] {
    if (in_profile && !chose) out += line + "\n";
    in_profile = false;
  };
  // A profile's own table: [profiles.<name>] with no further dot.
  static const std::regex profile_header(R"(^\s*\[\s*profiles\.([A-Za-z0-9_-]+)\s*\]\s*(#.*)?$)");
  static const std::regex any_header(R"(^\s*\[)");
  static const std::regex sets_isolation(R"(^\s*isolation\s*=)");
  while (std::getline(in, l)) {
    std::smatch m;
    if (std::regex_search(l, any_header)) {
      close();
      if (std::regex_match(l, m, profile_header)) {
        in_profile = true;
        chose = false;
        have_default = have_default || m[1] == "default";
      }
    } else if (in_profile && std::regex_search(l, sets_isolation)) {
      chose = true;
    }
    out += l + "\n";
  }
  close();
  if (!have_default) out += "\n[profiles.default]\n" + line + "\n";
  return out;
}

ProcResult runAirlock(const std::vector<std::string>& args, const std::string& stdin_data,
                      int timeout_s) {
  std::vector<std::string> argv{airlockBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  auto has = [&](const char* flag) {
    for (const auto& a : args) {
      if (a == "--") break;
      if (a == flag || a.starts_with(std::string(flag) + "=")) return true;
    }
    return false;
  };
  if (testIsolation() != "namespaces" && !args.empty() && args[0] == "run" && !has("--policy") &&
      !has("--isolation"))
    argv.insert(argv.begin() + 2, {"--isolation", testIsolation()});
  return runCommand(argv, stdin_data, timeout_s);
}

TempDir::TempDir() {
  char tmpl[] = "/tmp/airlock-test-XXXXXX";
  char* p = mkdtemp(tmpl);
  if (p == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = p;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void TempDir::write(const std::string& name, const std::string& content_in, int mode) const {
  // Policies run on the backend under test (testIsolation()).
  const std::string content = name.ends_with(".toml") ? withTestIsolation(content_in) : content_in;
  std::string p = file(name);
  std::filesystem::create_directories(std::filesystem::path(p).parent_path());
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << content;
  f.close();
  chmod(p.c_str(), static_cast<mode_t>(mode));
}

std::string TempDir::read(const std::string& name) const { return readFile(file(name)); }

std::string readFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::set<std::string> treeOf(const std::string& root) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    const char kind = e.is_symlink() ? 'l' : e.is_directory() ? 'd' : 'f';
    out.insert(std::string(1, kind) + " " + e.path().string().substr(root.size()));
  }
  return out;
}

HostResources snapshotHostResources() {
  HostResources r;
  {
    std::ifstream f("/proc/self/mountinfo");
    std::string line;
    while (std::getline(f, line))
      if (line.find("airlock") != std::string::npos) ++r.airlock_mounts;
  }
  std::error_code ec;
  for (const char* ctrl : {"memory", "pids", "cpu", "unified"}) {
    std::filesystem::path dir = std::filesystem::path("/sys/fs/cgroup") / ctrl / "airlock";
    for (auto it = std::filesystem::directory_iterator(dir, ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
      if (it->is_directory()) ++r.airlock_cgroups;
  }
  // Sandbox uids live at or above 2^28 (see supervisor/sandbox/host/id_range.h).
  for (auto it = std::filesystem::directory_iterator("/proc", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    struct stat st {};
    if (stat(it->path().c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid >= (1u << 28) &&
        st.st_uid != static_cast<uid_t>(-1))
      ++r.processes;
  }
  return r;
}

std::ostream& operator<<(std::ostream& os, const HostResources& r) {
  return os << "{mounts=" << r.airlock_mounts << " cgroups=" << r.airlock_cgroups
            << " sandbox processes=" << r.processes << "}";
}

}  // namespace airlock::testing
