// Runs a short helper program (runsc probes, `runsc delete`) with a time limit and collects its
// output. Header-only: used by the supervisor and by plugins, which share no library.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "airlock/result.h"
#include "airlock/unique_fd.h"

namespace airlock {

struct BoundedOutput {
  int status = -1;  // exit status, or 128+signal
  std::string out;  // stdout and stderr together, at most 64 KiB
  bool timed_out = false;
};

// Runs argv (argv[0] an absolute path; no shell, a minimal PATH) in its own session with stdin
// from /dev/null. Past `limit` the whole session is killed. `child_setup`, when set, runs in
// the child between fork and exec (async-signal-safe calls only) and returns 0 or an errno,
// which fails the run with status 127.
inline Result<BoundedOutput> runBounded(const std::vector<std::string>& argv_in,
                                        std::chrono::milliseconds limit,
                                        int (*child_setup)() = nullptr) {
  if (argv_in.empty()) return fail("runBounded: empty argv");
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return sysError("pipe2", argv_in[0]);
  UniqueFd rd(out[0]), wr(out[1]);
  std::vector<std::string> argv = argv_in;
  std::vector<char*> c_argv;
  for (auto& a : argv) c_argv.push_back(a.data());
  c_argv.push_back(nullptr);
  char path_env[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
  char* envp[] = {path_env, nullptr};
  pid_t pid = ::fork();
  if (pid < 0) return sysError("fork", argv[0]);
  if (pid == 0) {
    int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    ::dup2(wr.get(), 1);
    ::dup2(wr.get(), 2);
    ::setsid();
    if (child_setup != nullptr && child_setup() != 0) ::_exit(127);
    ::syscall(SYS_close_range, 3, ~0u, 0);
    ::execve(c_argv[0], c_argv.data(), envp);
    ::_exit(127);
  }
  wr.reset();
  BoundedOutput o;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 && !o.timed_out) {
      ::kill(-pid, SIGKILL);  // its session: a sandbox it started dies with it
      ::kill(pid, SIGKILL);
      o.timed_out = true;
    }
    pollfd p{rd.get(), POLLIN, 0};
    int n = ::poll(&p, 1, o.timed_out ? 1000 : static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (o.timed_out) break;
      continue;
    }
    char buf[4096];
    ssize_t got = ::read(rd.get(), buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    if (o.out.size() < 64 * 1024) o.out.append(buf, static_cast<size_t>(got));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  o.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return o;
}

}  // namespace airlock
