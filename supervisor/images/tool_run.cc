#include "supervisor/images/tool_run.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <deque>

#include "airlock/unique_fd.h"

namespace airlock::images {
namespace {

constexpr size_t kTailLines = 12;

struct Collected {
  std::string out;
  std::deque<std::string> tail;
  int status = -1;
};

Result<Collected> runCollect(const ToolRun& run, bool capture_stdout, size_t max_bytes) {
  if (run.argv.empty() || run.argv[0].front() != '/') return fail("runTool: argv[0] not absolute");
  int out_p[2], err_p[2];
  if (::pipe2(out_p, O_CLOEXEC) != 0) return sysError("pipe2", run.argv[0]);
  UniqueFd out_rd(out_p[0]), out_wr(out_p[1]);
  if (::pipe2(err_p, O_CLOEXEC) != 0) return sysError("pipe2", run.argv[0]);
  UniqueFd err_rd(err_p[0]), err_wr(err_p[1]);
  std::vector<std::string> argv = run.argv,
                           env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C.UTF-8"};
  env.insert(env.end(), run.env.begin(), run.env.end());
  std::vector<char*> c_argv, c_env;
  for (auto& a : argv) c_argv.push_back(a.data());
  for (auto& e : env) c_env.push_back(e.data());
  c_argv.push_back(nullptr);
  c_env.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return sysError("fork", argv[0]);
  if (pid == 0) {
    // Killed with us: a build must not carry on into a store whose lock is gone.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    ::dup2(out_wr.get(), 1);
    ::dup2(err_wr.get(), 2);
    ::syscall(SYS_close_range, 3, ~0u, 0);
    ::execve(c_argv[0], c_argv.data(), c_env.data());
    ::_exit(127);
  }
  out_wr.reset();
  err_wr.reset();
  Collected c;
  std::string partial[2];
  auto line = [&](std::string l) {
    if (run.progress) run.progress(l);
    c.tail.push_back(std::move(l));
    if (c.tail.size() > kTailLines) c.tail.pop_front();
  };
  bool too_much = false;
  pollfd fds[2] = {{out_rd.get(), POLLIN, 0}, {err_rd.get(), POLLIN, 0}};
  int open_fds = 2;
  while (open_fds > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[8192];
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (!partial[i].empty()) line(std::move(partial[i]));
        fds[i].fd = -1;
        --open_fds;
        continue;
      }
      if (i == 0 && capture_stdout) {
        if (c.out.size() + n > max_bytes)
          too_much = true;
        else
          c.out.append(buf, n);
        continue;
      }
      partial[i].append(buf, n);
      // mmdebstrap and skopeo redraw progress bars with \r: each redraw is a line of its own.
      size_t start = 0;
      for (size_t j = 0; j < partial[i].size(); ++j) {
        if (partial[i][j] != '\n' && partial[i][j] != '\r') continue;
        if (j > start) line(partial[i].substr(start, j - start));
        start = j + 1;
      }
      partial[i].erase(0, start);
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return sysError("waitpid", argv[0]);
  c.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (too_much) return fail("output larger than " + std::to_string(max_bytes) + " bytes", argv[0]);
  return c;
}

Result<Collected> finish(const ToolRun& run, Result<Collected> c) {
  if (!c) return c;
  if (c->status == 0) return c;
  std::string why = run.argv[0] + " exited with status " + std::to_string(c->status);
  if (c->status == 127) why += " (could not be started: is it installed?)";
  if (!c->tail.empty()) {
    why += "; its last lines:";
    for (const auto& l : c->tail) why += "\n  " + l;
  }
  return fail(why);
}

}  // namespace

Result<> runTool(const ToolRun& run) {
  auto c = finish(run, runCollect(run, false, 0));
  if (!c) return Unexpected(c.error());
  return {};
}

Result<std::string> toolOutput(const ToolRun& run, size_t max_bytes) {
  auto c = finish(run, runCollect(run, true, max_bytes));
  if (!c) return Unexpected(c.error());
  return std::move(c->out);
}

}  // namespace airlock::images
