// The child of an execution: the fixed sequence of confinement steps before execve.
//
// Everything is prepared in the agent before the spawn (ChildSpec holds only pointers into
// storage the agent keeps alive); the child calls async-signal-safe functions and raw syscalls
// only. A failing step writes one StageRecord to the CLOEXEC sync pipe and _exits 127; a
// successful execve closes the pipe.
#pragma once

#include <linux/filter.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>
#include <string>

namespace airlock::agent {

enum class ChildStage : int32_t {
  kSignals = 1,
  kSetsid,
  kStdio,
  kChdir,
  kRlimit,
  kLandlock,
  kCapBoundingSet,
  kSetgroups,
  kSetresgid,
  kSetresuid,
  kCapabilities,
  kNoNewPrivs,
  kSeccomp,
  kExec,
};

// Written by a failing child; fixed size, so one atomic pipe write.
struct StageRecord {
  int32_t stage;
  int32_t err;
  int32_t detail;  // rlimit resource or capability number, when relevant
};

struct ChildRlimit {
  int resource;
  struct rlimit limit;
};

struct ChildSpec {
  const char* path = nullptr;  // argv[0]
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* cwd = nullptr;
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  int sync_fd = -1;
  int control_fd = -1;  // becomes fd 3 in the child when >= 0
  const ChildRlimit* rlimits = nullptr;
  size_t rlimit_count = 0;
  int landlock_fd = -1;  // -1: no Landlock
  bool drop_groups = false;
  bool change_ids = false;
  uid_t uid = 0;
  gid_t gid = 0;
  bool drop_bounding_set = false;
  int last_cap = 0;
  uint64_t caps = 0;                    // effective/permitted/inheritable after the uid change
  const sock_fprog* seccomp = nullptr;  // nullptr: no filter
};

// Starts the child and returns its pid once it has exec'd or failed (-1 and errno if it could not
// be created). The child shares the agent's memory until then (CLONE_VM | CLONE_VFORK, like
// glibc's posix_spawn): fork() would copy the agent's page tables and then take copy-on-write
// faults in both processes, about 1 ms per execution on a paravirtualized host where a page
// fault costs ~11 us. The agent's own state is untouched: the child has its own fd table,
// signal handlers, credentials, rlimits and oom_score_adj (the kernel keeps a vfork child's
// score apart from the processes it shares memory with).
pid_t spawnChild(const ChildSpec& spec);

// "exec", "chdir", ...: the ErrorMsg.stage of a failed step.
const char* childStageName(ChildStage stage);

// "execve '/usr/bin/python3': ENOENT (No such file or directory)".
std::string describeChildFailure(const StageRecord& rec, const ChildSpec& spec);

}  // namespace airlock::agent
