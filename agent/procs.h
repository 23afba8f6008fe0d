// Process table scans through /proc: the agent's view of which processes belong to what.
#pragma once

#include <sys/types.h>

#include <optional>
#include <vector>

namespace airlock::agent {

struct ProcStat {
  pid_t pid = 0;
  char state = 0;
  pid_t ppid = 0;
  pid_t pgrp = 0;
  pid_t session = 0;
};

std::optional<ProcStat> readProcStat(pid_t pid);
std::vector<ProcStat> listProcesses();

// Sends sig to every process of session sid (not the agent). Each pid is pinned with a pidfd
// and its session re-checked before the signal, so a reused pid is never hit. Returns how many
// processes were signalled.
size_t signalSession(pid_t sid, int sig);
// Whether any process (zombies included) is still in session sid.
bool sessionAlive(pid_t sid);

}  // namespace airlock::agent
