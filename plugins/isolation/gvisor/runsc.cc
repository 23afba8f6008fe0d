#include "runsc.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <regex>

#include <airlock/protocol/channel.h>

#include "common/spawn_monitor.h"

namespace airlock::isolation::gvisor {

std::vector<std::string> globalFlags(const Config& config, const std::string& state_root,
                                     bool network_sandbox, const std::string& overlay_dir) {
  std::vector<std::string> f = {
      "--root=" + state_root,
      "--platform=" + config.platform,
      network_sandbox ? "--network=sandbox" : "--network=none",
      // The supervisor owns the cgroup and has put this process in it: runsc must not make or
      // move into cgroups of its own (it would leave parents behind, as measured with runsc
      // 2022-12).
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
  int err[2];
  if (::pipe2(err, O_CLOEXEC) != 0) return sysError("pipe2", "runsc stderr");
  UniqueFd err_read(err[0]), err_write(err[1]);
  UniqueFd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!null) return sysError("open", "/dev/null");
  const int stdin_fd = options.channel_fd >= 0 ? options.channel_fd : null.get();
  const int stdout_fd =
      options.channel_fd >= 0 && !options.channel_stdin_only ? stdin_fd : null.get();
  MonitorSpawn m;
  m.argv = options.argv;
  m.fds = {{err_write.get(), 2}, {stdin_fd, 0}, {stdout_fd, 1}};
  m.cgroup_v2_fd = options.cgroup_v2_fd;
  m.attach_cgroups = options.attach_cgroups;
  m.attach_ctx = options.attach_ctx;
  m.netns_fd = options.netns_fd;
  m.hide_proc_sys_net = true;
  m.name = "gvisor";
  auto spawned = spawnMonitor(m);
  if (!spawned) return Unexpected(spawned.error());
  Monitor out;
  out.pid = spawned->pid;
  out.pidfd = std::move(spawned->pidfd);
  out.stderr_read = std::move(err_read);
  return out;
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

Result<> runToEnd(const SpawnOptions& options, std::chrono::steady_clock::time_point deadline,
                  MonitorSink* sink) {
  auto child = spawn(options);
  if (!child) return Unexpected(child.error());
  std::string text;
  Result<> outcome;
  for (bool eof = false; !eof;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      outcome = fail("did not end in time");
      break;
    }
    pollfd p[2] = {{child->stderr_read.get(), POLLIN, 0},
                   {sink == nullptr || sink->connected() ? -1 : sink->listenFd(), POLLIN, 0}};
    int n = ::poll(p, 2, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      outcome = sysError("poll", "runsc stderr");
      break;
    }
    if ((p[1].revents & POLLIN) != 0) {
      if (auto r = sink->accept(deadline); !r) {
        outcome = Unexpected(std::move(r.error()));
        break;
      }
    }
    if ((p[0].revents & (POLLIN | POLLHUP)) == 0) continue;
    char buf[4096];
    ssize_t got = ::read(child->stderr_read.get(), buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      eof = true;
      break;
    }
    if (text.size() < 64 * 1024) text.append(buf, static_cast<size_t>(got));
  }
  if (!outcome) ::kill(child->pid, SIGKILL);
  int status = 0;
  while (::waitpid(child->pid, &status, 0) < 0 && errno == EINTR) {
  }
  text = cleanRunscText(text);
  if (outcome && WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  std::string why =
      !outcome ? outcome.error().message()
               : "exited with status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status)
                                                                          : 128 + WTERMSIG(status));
  return fail(why + (text.empty() ? std::string() : ": " + text));
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
