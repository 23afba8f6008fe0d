// Starting a backend's monitor process (runsc, QEMU): the host process the supervisor holds as
// the sandbox's pid. It runs in its own session, inside the sandbox's cgroup from its first
// instruction (it waits on a pipe until it was moved), optionally in the sandbox's linked
// network namespace, with exactly the fds it is given. Header-only: each backend is its own
// shared library.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <airlock/plugin_abi_v1.h>
#include <airlock/result.h>
#include <airlock/unique_fd.h>

namespace airlock::isolation {

struct MonitorSpawn {
  std::vector<std::string> argv;         // argv[0] is the binary's absolute path
  std::vector<std::pair<int, int>> fds;  // (fd here, fd number in the child); the rest is closed
  int cgroup_v2_fd = -1;                 // the child joins it before exec, or -1
  // v1 hierarchies, called with the child's pid while it waits (airlock_sandbox_spec_v1).
  int (*attach_cgroups)(void* ctx, pid_t pid, airlock_error_v1* err) = nullptr;
  void* attach_ctx = nullptr;
  int netns_fd = -1;  // a network namespace to join, or -1
  // With netns_fd: a private mount namespace whose /proc/sys/net is an empty tmpfs (runsc's
  // --network=sandbox takes "rmem_default exists" for "this is the host's namespace").
  bool hide_proc_sys_net = false;
  rlim_t file_size_limit = RLIM_INFINITY;  // RLIMIT_FSIZE, with SIGXFSZ ignored: writes fail
  const char* name = "monitor";            // in the child's error messages
};

struct SpawnedMonitor {
  pid_t pid = -1;
  UniqueFd pidfd;
};

namespace detail {

// In the child, between fork and exec: async-signal-safe calls only. fd 2 is whatever the
// caller mapped there (a pipe it reads), or the supervisor's own stderr.
[[noreturn]] inline void spawnChildFail(const char* name, const char* what) {
  int e = errno;
  const char* ename = strerrorname_np(e);
  (void)!::write(2, "airlock: ", 9);
  (void)!::write(2, name, std::strlen(name));
  (void)!::write(2, ": ", 2);
  (void)!::write(2, what, std::strlen(what));
  (void)!::write(2, ": ", 2);
  if (ename != nullptr) (void)!::write(2, ename, std::strlen(ename));
  (void)!::write(2, "\n", 1);
  ::_exit(127);
}

}  // namespace detail

inline Result<SpawnedMonitor> spawnMonitor(const MonitorSpawn& o) {
  int sync[2];
  if (::pipe2(sync, O_CLOEXEC) != 0) return sysError("pipe2", "sync");
  UniqueFd sync_read(sync[0]), sync_write(sync[1]);
  std::vector<std::string> argv = o.argv;
  std::vector<char*> c_argv;
  for (auto& a : argv) c_argv.push_back(a.data());
  c_argv.push_back(nullptr);
  char* envp[] = {const_cast<char*>("PATH=/usr/sbin:/usr/bin:/sbin:/bin"), nullptr};
  int top = 2;
  for (const auto& [from, to] : o.fds) top = std::max(top, to);
  // Allocated before fork: the supervisor has threads, so the child may not malloc.
  std::vector<int> moved(o.fds.size(), -1);
  std::vector<char> keep(static_cast<size_t>(top) + 1, 0);
  keep[0] = keep[1] = keep[2] = 1;  // the caller maps them or they stay the supervisor's
  for (const auto& [from, to] : o.fds) keep[static_cast<size_t>(to)] = 1;

  pid_t pid = ::fork();
  if (pid < 0) return sysError("fork", o.name);
  if (pid == 0) {
    const char* name = o.name;
    // Each source out of the way of every target first, then onto its number.
    for (size_t i = 0; i < o.fds.size(); ++i) {
      moved[i] = ::fcntl(o.fds[i].first, F_DUPFD_CLOEXEC, top + 1);
      if (moved[i] < 0) detail::spawnChildFail(name, "fcntl(F_DUPFD)");
    }
    int sync_fd = ::fcntl(sync_read.get(), F_DUPFD_CLOEXEC, top + 1);
    // Our copy of the parent's end: holding it, a parent killed (-9) before it writes would
    // leave this read waiting forever, with every fd of the supervisor still open here.
    ::close(sync_write.get());
    for (size_t i = 0; i < o.fds.size(); ++i)
      if (::dup2(moved[i], o.fds[i].second) < 0) detail::spawnChildFail(name, "dup2");
    char go = 0;
    ssize_t n;
    do {
      n = ::read(sync_fd, &go, 1);
    } while (n < 0 && errno == EINTR);
    if (n != 1) ::_exit(127);  // the parent gave up
    // Its own session: a terminal's ^C reaches the supervisor, which decides, never the monitor.
    if (::setsid() < 0) detail::spawnChildFail(name, "setsid");
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (o.file_size_limit != RLIM_INFINITY) {
      rlimit r{o.file_size_limit, o.file_size_limit};
      if (::setrlimit(RLIMIT_FSIZE, &r) != 0) detail::spawnChildFail(name, "setrlimit(FSIZE)");
      ::signal(SIGXFSZ, SIG_IGN);  // survives exec: a write past the limit fails, no kill
    }
    if (o.netns_fd >= 0) {
      if (::setns(o.netns_fd, CLONE_NEWNET) != 0)
        detail::spawnChildFail(name, "setns(sandbox network)");
      if (o.hide_proc_sys_net) {
        if (::unshare(CLONE_NEWNS) != 0) detail::spawnChildFail(name, "unshare(CLONE_NEWNS)");
        if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
          detail::spawnChildFail(name, "mount(/, MS_PRIVATE)");
        if (::mount("tmpfs", "/proc/sys/net", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                    "size=4k") != 0)
          detail::spawnChildFail(name, "mount(tmpfs over /proc/sys/net)");
      }
    }
    // Close every fd the child was not given (the moved copies are close-on-exec).
    for (int fd = 3; fd <= top; ++fd)
      if (!keep[static_cast<size_t>(fd)]) ::close(fd);
    ::syscall(SYS_close_range, static_cast<unsigned>(top) + 1, ~0u, CLOSE_RANGE_CLOEXEC);
    ::execve(c_argv[0], c_argv.data(), envp);
    detail::spawnChildFail(name, "execve");
  }
  SpawnedMonitor m;
  m.pid = pid;
  m.pidfd = UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  auto abandon = [&] {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  };
  if (!m.pidfd) {
    auto e = sysError("pidfd_open", o.name);
    abandon();
    return e;
  }
  if (o.cgroup_v2_fd >= 0) {
    UniqueFd procs(::openat(o.cgroup_v2_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC));
    std::string text = std::to_string(pid);
    if (!procs || ::write(procs.get(), text.data(), text.size()) < 0) {
      auto e = sysError("join the sandbox's cgroup", "cgroup.procs");
      abandon();
      return e;
    }
  }
  if (o.attach_cgroups != nullptr) {
    airlock_error_v1 e{};
    if (int rc = o.attach_cgroups(o.attach_ctx, pid, &e); rc != 0) {
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
  return m;
}

}  // namespace airlock::isolation
