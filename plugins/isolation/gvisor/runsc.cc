#include "runsc.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <regex>

#include <airlock/protocol/channel.h>

namespace airlock::isolation::gvisor {
namespace {

std::vector<char*> cArgv(std::vector<std::string>& argv) {
  std::vector<char*> out;
  for (auto& a : argv) out.push_back(a.data());
  out.push_back(nullptr);
  return out;
}

// In the child, between fork and exec: async-signal-safe calls only.
[[noreturn]] void childFail(const char* what) {
  int e = errno;
  const char* name = strerrorname_np(e);
  (void)!::write(2, "airlock: gvisor: ", 17);
  (void)!::write(2, what, std::strlen(what));
  (void)!::write(2, ": ", 2);
  if (name != nullptr) (void)!::write(2, name, std::strlen(name));
  (void)!::write(2, "\n", 1);
  ::_exit(127);
}

int pidfdOpen(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

}  // namespace

std::vector<std::string> globalFlags(const Config& config, const std::string& state_root,
                                     bool network_sandbox, const std::string& overlay_dir) {
  std::vector<std::string> f = {
      "--root=" + state_root,
      "--platform=" + config.platform,
      network_sandbox ? "--network=sandbox" : "--network=none",
      // The supervisor owns the cgroup and has put this process in it: runsc must not make or
      // move into cgroups of its own (it would leave parents behind, PLATFORM notes).
      "--ignore-cgroups",
      // The binds are the host's read-only system directories and, at most, a persistent
      // workspace locked to this sandbox: nothing else changes them while it runs, so gVisor
      // may cache them like its root instead of revalidating every lookup with the gofer
      // (Python's start-up: -13% measured). An operator's --file-access-mounts= comes later and
      // wins.
      "--file-access-mounts=exclusive",
  };
  if (config.overlay == "memory") f.push_back("--overlay2=all:memory");
  if (config.overlay == "disk") f.push_back("--overlay2=all:" + overlay_dir);
  for (const auto& flag : config.flags) f.push_back(flag);
  return f;
}

Result<Monitor> spawn(const SpawnOptions& options) {
  int sync[2], err[2];
  if (::pipe2(sync, O_CLOEXEC) != 0) return sysError("pipe2", "sync");
  UniqueFd sync_read(sync[0]), sync_write(sync[1]);
  if (::pipe2(err, O_CLOEXEC) != 0) return sysError("pipe2", "runsc stderr");
  UniqueFd err_read(err[0]), err_write(err[1]);
  std::vector<std::string> argv = options.argv;
  std::vector<char*> c_argv = cArgv(argv);
  char* envp[] = {const_cast<char*>("PATH=/usr/sbin:/usr/bin:/sbin:/bin"), nullptr};
  const int channel = options.channel_fd;

  pid_t pid = ::fork();
  if (pid < 0) return sysError("fork", "runsc");
  if (pid == 0) {
    ::dup2(err_write.get(), 2);
    char go = 0;
    ssize_t n;
    do {
      n = ::read(sync_read.get(), &go, 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1) ::_exit(127);  // the parent gave up
    // Its own session: a terminal's ^C reaches the supervisor, which decides, never runsc.
    if (::setsid() < 0) childFail("setsid");
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (options.netns_fd >= 0) {
      if (::setns(options.netns_fd, CLONE_NEWNET) != 0) childFail("setns(sandbox network)");
      if (::unshare(CLONE_NEWNS) != 0) childFail("unshare(CLONE_NEWNS)");
      if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
        childFail("mount(/, MS_PRIVATE)");
      if (::mount("tmpfs", "/proc/sys/net", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k") !=
          0)
        childFail("mount(tmpfs over /proc/sys/net)");
    }
    if (::dup2(channel, 0) < 0 || ::dup2(channel, 1) < 0) childFail("dup2(agent channel)");
    ::syscall(SYS_close_range, 3, ~0u, 0);
    ::execve(c_argv[0], c_argv.data(), envp);
    childFail("execve(runsc)");
  }
  Monitor m;
  m.pid = pid;
  m.pidfd = UniqueFd(pidfdOpen(pid));
  auto abandon = [&] {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  };
  if (!m.pidfd) {
    auto e = sysError("pidfd_open", "runsc");
    abandon();
    return e;
  }
  if (options.cgroup_v2_fd >= 0) {
    UniqueFd procs(::openat(options.cgroup_v2_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC));
    std::string text = std::to_string(pid);
    if (!procs || ::write(procs.get(), text.data(), text.size()) < 0) {
      auto e = sysError("join the sandbox's cgroup", "cgroup.procs");
      abandon();
      return e;
    }
  }
  if (options.attach_cgroups != nullptr) {
    airlock_error_v1 e{};
    if (int rc = options.attach_cgroups(options.attach_ctx, pid, &e); rc != 0) {
      e.message[sizeof e.message - 1] = '\0';
      abandon();
      return Unexpected(Error(std::string("attach_cgroups: ") + e.message, "", rc));
    }
  }
  if (::write(sync_write.get(), "g", 1) != 1) {
    auto e = sysError("write", "sync pipe");
    abandon();
    return e;
  }
  m.stderr_read = std::move(err_read);
  return m;
}

Result<bool> awaitReady(int fd, std::chrono::steady_clock::time_point deadline, std::string& text,
                        MonitorSink& sink) {
  const std::string_view ready(protocol::kAgentReadyLine, sizeof protocol::kAgentReadyLine - 1);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return fail("the agent did not start in time");
    pollfd p[2] = {{fd, POLLIN, 0}, {sink.connected() ? -1 : sink.listenFd(), POLLIN, 0}};
    int n = ::poll(p, 2, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sysError("poll", "runsc stderr");
    if (n == 0) continue;
    if ((p[1].revents & POLLIN) != 0)
      if (auto r = sink.accept(deadline); !r) return Unexpected(std::move(r.error()));
    if ((p[0].revents & (POLLIN | POLLHUP)) == 0) continue;
    char buf[4096];
    ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return sysError("read", "runsc stderr");
    if (got == 0) return false;
    text.append(buf, static_cast<size_t>(got));
    if (auto at = text.find(ready); at != std::string::npos) {
      text.erase(at);
      return true;
    }
    if (text.size() > 64 * 1024) text.erase(0, text.size() - 64 * 1024);
  }
}

std::string cleanRunscText(const std::string& text) {
  // glog: a level letter, MMDD, a time, a thread id, file:line, then "] ".
  static const std::regex prefix(R"(^[IWEF]\d{4} [0-9:.]+ +\d+ [^ \]]+:\d+\] )");
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = std::regex_replace(text.substr(start, end - start), prefix, "");
    if (line.starts_with("FATAL ERROR: ")) line.erase(0, 13);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    if (!line.empty() && std::find(lines.begin(), lines.end(), line) == lines.end())
      lines.push_back(std::move(line));
    start = end + 1;
  }
  std::string out;
  for (const auto& l : lines) out += (out.empty() ? "" : "; ") + l;
  return out;
}

}  // namespace airlock::isolation::gvisor
