#include "supervisor/review/command_reviewer.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "airlock/unique_fd.h"
#include "supervisor/review/external_verdict.h"

namespace airlock::review {

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxStderr = 4096;

// The child process: killed with its process group and reaped on every path out.
class Child {
 public:
  Child() = default;
  ~Child() { killAndReap(); }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid = -1;
  UniqueFd pidfd;

  void killAndReap() {
    if (pid <= 0) return;
    ::kill(-pid, SIGKILL);  // its process group: helpers it started go too
    ::kill(pid, SIGKILL);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    pid = -1;
  }
  // Reaps an exited child; its status.
  int reap() {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    ::kill(-pid, SIGKILL);  // anything it left behind in its group
    pid = -1;
    return status;
  }
};

}  // namespace

Result<Verdict> CommandReviewer::review(const Subject& subject) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(command_.timeout_ms);
  const std::string request = subject.toJson().dump() + "\n";

  // stdin is a socket so that writing to a reviewer that already exited fails with EPIPE
  // (MSG_NOSIGNAL) instead of raising SIGPIPE in the supervisor.
  int in[2], out[2], err[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0) {
    return sysError("socketpair", "review command stdin");
  }
  UniqueFd in_child(in[0]), in_parent(in[1]);
  if (::pipe2(out, O_CLOEXEC) != 0) return sysError("pipe2", "review command stdout");
  UniqueFd out_parent(out[0]), out_child(out[1]);
  if (::pipe2(err, O_CLOEXEC) != 0) return sysError("pipe2", "review command stderr");
  UniqueFd err_parent(err[0]), err_child(err[1]);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_child.get(), STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out_child.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_child.get(), STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group, so a timeout kills everything it started; default signal handling
  // and an empty mask whatever the supervisor's threads have.
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> argv;
  for (const auto& a : command_.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  char path_env[] = "PATH=/usr/local/bin:/usr/bin:/bin";
  char* envp[] = {path_env, nullptr};

  Child child;
  int rc = ::posix_spawn(&child.pid, argv[0], &actions, &attr, argv.data(), envp);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    child.pid = -1;
    errno = rc;
    return sysError("posix_spawn", command_.argv[0]);
  }
  child.pidfd = UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, child.pid, 0)));
  in_child.reset();
  out_child.reset();
  err_child.reset();
  for (int fd : {in_parent.get(), out_parent.get(), err_parent.get()}) {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }

  std::string answer, errors;
  size_t written = 0;
  bool out_open = true, err_open = true;
  while (out_open || err_open) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      child.killAndReap();
      return Unexpected(Error("review command '" + command_.argv[0] + "' gave no verdict within " +
                                  std::to_string(command_.timeout_ms) + " ms and was killed",
                              {}, ETIMEDOUT));
    }
    pollfd fds[3] = {{out_parent.get(), POLLIN, 0},
                     {err_parent.get(), POLLIN, 0},
                     {in_parent ? in_parent.get() : -1, POLLOUT, 0}};
    fds[0].fd = out_open ? fds[0].fd : -1;
    fds[1].fd = err_open ? fds[1].fd : -1;
    int n = ::poll(fds, 3, static_cast<int>(left.count()));
    if (n < 0 && errno != EINTR) return sysError("poll", "review command");
    if (n <= 0) continue;
    if (fds[2].revents != 0 && in_parent) {
      ssize_t w = ::send(in_parent.get(), request.data() + written, request.size() - written,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w > 0) written += static_cast<size_t>(w);
      if (w < 0 && errno != EAGAIN && errno != EINTR) in_parent.reset();  // it stopped reading
      if (written == request.size()) in_parent.reset();                   // EOF for the reviewer
    }
    char buf[16384];
    for (int i = 0; i < 2; ++i) {
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      ssize_t r = ::read(fds[i].fd, buf, sizeof buf);
      if (r > 0) {
        std::string& into = i == 0 ? answer : errors;
        size_t cap = i == 0 ? kMaxExternalAnswer + 1 : kMaxStderr;
        into.append(buf, std::min(static_cast<size_t>(r), cap - std::min(cap, into.size())));
      } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
        (i == 0 ? out_open : err_open) = false;
      }
    }
  }
  // Output closed: wait for the exit within what is left of the deadline.
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  pollfd exited{child.pidfd.get(), POLLIN, 0};
  if (child.pidfd && ::poll(&exited, 1, std::max<int>(0, static_cast<int>(left.count()))) == 0) {
    child.killAndReap();
    return Unexpected(Error("review command '" + command_.argv[0] + "' closed its output but " +
                                "did not exit within " + std::to_string(command_.timeout_ms) +
                                " ms and was killed",
                            {}, ETIMEDOUT));
  }
  int status = child.reap();
  const std::string who = "review command '" + command_.argv[0] + "'";
  const std::string said = errors.empty() ? "" : " (stderr: " + errors + ")";
  if (WIFSIGNALED(status)) {
    return fail(who + " was killed by signal " + sigabbrev_np(WTERMSIG(status)) + said);
  }
  if (WEXITSTATUS(status) != 0) {
    return fail(who + " exited with status " + std::to_string(WEXITSTATUS(status)) + said);
  }
  auto verdict = parseExternalVerdict(answer);
  if (!verdict) return Unexpected(std::move(verdict.error()).wrap(who));
  return verdict;
}

}  // namespace airlock::review
