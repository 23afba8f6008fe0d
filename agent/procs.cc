#include "procs.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "airlock/unique_fd.h"

namespace airlock::agent {

std::optional<ProcStat> readProcStat(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  char buf[512];
  ssize_t n = ::read(fd.get(), buf, sizeof(buf) - 1);
  if (n <= 0) return std::nullopt;
  buf[n] = '\0';
  // comm may contain spaces and parentheses; the fields after it start after the last ')'.
  char* paren = std::strrchr(buf, ')');
  if (paren == nullptr) return std::nullopt;
  ProcStat st;
  st.pid = pid;
  int ppid = 0, pgrp = 0, session = 0;
  if (std::sscanf(paren + 1, " %c %d %d %d", &st.state, &ppid, &pgrp, &session) != 4)
    return std::nullopt;
  st.ppid = ppid;
  st.pgrp = pgrp;
  st.session = session;
  return st;
}

std::vector<ProcStat> listProcesses() {
  std::vector<ProcStat> out;
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* de = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(de->d_name, &end, 10);
    if (end == de->d_name || *end != '\0' || pid <= 0) continue;
    if (auto st = readProcStat(static_cast<pid_t>(pid))) out.push_back(*st);
  }
  ::closedir(d);
  return out;
}

size_t signalSession(pid_t sid, int sig) {
  pid_t self = ::getpid();
  size_t count = 0;
  for (const auto& p : listProcesses()) {
    if (p.session != sid || p.pid == self) continue;
    UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, p.pid, 0)));
    if (!pidfd) continue;  // already gone
    auto again = readProcStat(p.pid);
    if (!again || again->session != sid) continue;
    if (::syscall(SYS_pidfd_send_signal, pidfd.get(), sig, nullptr, 0) == 0) ++count;
  }
  return count;
}

bool sessionAlive(pid_t sid) {
  pid_t self = ::getpid();
  for (const auto& p : listProcesses())
    if (p.session == sid && p.pid != self) return true;
  return false;
}

}  // namespace airlock::agent
