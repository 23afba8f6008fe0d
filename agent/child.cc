#include "child.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "airlock/result.h"
#include "caps.h"
#include "landlock.h"

namespace airlock::agent {
namespace {

[[noreturn]] void failStage(const ChildSpec& spec, ChildStage stage, int detail = 0) {
  StageRecord rec{static_cast<int32_t>(stage), errno, detail};
  ssize_t ignored = ::write(spec.sync_fd, &rec, sizeof(rec));
  (void)ignored;
  ::_exit(127);
}

// The child's stack while it shares the agent's memory. One is enough: CLONE_VFORK suspends the
// agent until the child has exec'd or exited, so no two children ever run on it.
constexpr size_t kChildStackBytes = 64 * 1024;
constexpr size_t kGuardBytes = 4096;

char* childStackTop() {
  static char* top = [] {
    void* p = ::mmap(nullptr, kChildStackBytes + kGuardBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (p == MAP_FAILED) return static_cast<char*>(nullptr);
    // An overflow faults on the guard page instead of writing into the agent's heap.
    if (::mprotect(p, kGuardBytes, PROT_NONE) != 0) return static_cast<char*>(nullptr);
    return static_cast<char*>(p) + kGuardBytes + kChildStackBytes;
  }();
  return top;
}

[[noreturn]] void runChild(const ChildSpec& spec);

int childEntry(void* arg) { runChild(*static_cast<const ChildSpec*>(arg)); }

}  // namespace

pid_t spawnChild(const ChildSpec& spec) {
  char* top = childStackTop();
  if (top == nullptr) return -1;
  return ::clone(childEntry, top, CLONE_VM | CLONE_VFORK | SIGCHLD, const_cast<ChildSpec*>(&spec));
}

namespace {

void runChild(const ChildSpec& spec) {
  // The agent blocks SIGCHLD and ignores SIGPIPE; both would be inherited through execve.
  sigset_t none;
  sigemptyset(&none);
  if (::sigprocmask(SIG_SETMASK, &none, nullptr) != 0) failStage(spec, ChildStage::kSignals);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  if (::sigaction(SIGPIPE, &dfl, nullptr) != 0) failStage(spec, ChildStage::kSignals);

  // Own session and process group: the agent signals and kills the execution as -pgid.
  if (::setsid() < 0) failStage(spec, ChildStage::kSetsid);

  if (::dup2(spec.stdin_fd, 0) < 0 || ::dup2(spec.stdout_fd, 1) < 0 ||
      ::dup2(spec.stderr_fd, 2) < 0)
    failStage(spec, ChildStage::kStdio);
  if (spec.control_fd >= 0) {
    // dup2 onto itself would keep FD_CLOEXEC; the pipe must survive execve as fd 3.
    if (spec.control_fd == 3 ? ::fcntl(3, F_SETFD, 0) != 0 : ::dup2(spec.control_fd, 3) < 0)
      failStage(spec, ChildStage::kStdio);
  }

  // Sandboxed code is always the OOM killer's first choice, before the agent: the backend may
  // not be able to lower the agent's score (no CAP_SYS_RESOURCE), but raising our own needs no
  // privilege. Among sandboxed processes the largest is still picked first.
  int oom = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (oom >= 0) {
    ssize_t ignored = ::write(oom, "1000", 4);
    (void)ignored;
    ::close(oom);
  }

  if (::chdir(spec.cwd) != 0) failStage(spec, ChildStage::kChdir);

  for (size_t i = 0; i < spec.rlimit_count; ++i) {
    if (::setrlimit(static_cast<__rlimit_resource>(spec.rlimits[i].resource),
                    &spec.rlimits[i].limit) != 0)
      failStage(spec, ChildStage::kRlimit, spec.rlimits[i].resource);
  }
  struct rlimit no_core {
    0, 0
  };
  if (::setrlimit(RLIMIT_CORE, &no_core) != 0) failStage(spec, ChildStage::kRlimit, RLIMIT_CORE);

  if (spec.landlock_fd >= 0) {
    // Landlock needs no_new_privs unless the caller has CAP_SYS_ADMIN; it is set again below.
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) failStage(spec, ChildStage::kNoNewPrivs);
    if (landlockRestrictSelf(spec.landlock_fd) != 0) failStage(spec, ChildStage::kLandlock);
  }

  // Dropping bounding-set bits needs CAP_SETPCAP, which the uid change below takes away.
  if (spec.drop_bounding_set) {
    int failed_cap = 0;
    if (dropBoundingSet(spec.caps, spec.last_cap, &failed_cap) != 0)
      failStage(spec, ChildStage::kCapBoundingSet, failed_cap);
  }

  // Raw syscalls: glibc's wrappers apply an id change to every thread of the process they think
  // they are in, and this child runs on the agent's memory.
  if (spec.drop_groups && ::syscall(SYS_setgroups, 0, nullptr) != 0)
    failStage(spec, ChildStage::kSetgroups);
  if (spec.change_ids) {
    if (::syscall(SYS_setresgid, spec.gid, spec.gid, spec.gid) != 0)
      failStage(spec, ChildStage::kSetresgid);
    if (::syscall(SYS_setresuid, spec.uid, spec.uid, spec.uid) != 0)
      failStage(spec, ChildStage::kSetresuid);
  }

  if (setCapabilities(spec.caps) != 0) failStage(spec, ChildStage::kCapabilities);

  // No setuid/file-capability gains at execve; also required for an unprivileged seccomp filter.
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) failStage(spec, ChildStage::kNoNewPrivs);

  // Last, so the filter does not have to allow the confinement syscalls above.
  if (spec.seccomp != nullptr &&
      ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, spec.seccomp) != 0)
    failStage(spec, ChildStage::kSeccomp);

  ::execve(spec.path, spec.argv, spec.envp);
  failStage(spec, ChildStage::kExec);
}

}  // namespace

const char* childStageName(ChildStage stage) {
  switch (stage) {
    case ChildStage::kSignals:
      return "signals";
    case ChildStage::kSetsid:
      return "setsid";
    case ChildStage::kStdio:
      return "stdio";
    case ChildStage::kChdir:
      return "chdir";
    case ChildStage::kRlimit:
      return "rlimit";
    case ChildStage::kLandlock:
      return "landlock";
    case ChildStage::kCapBoundingSet:
      return "capbset";
    case ChildStage::kSetgroups:
      return "setgroups";
    case ChildStage::kSetresgid:
      return "setresgid";
    case ChildStage::kSetresuid:
      return "setresuid";
    case ChildStage::kCapabilities:
      return "capabilities";
    case ChildStage::kNoNewPrivs:
      return "no_new_privs";
    case ChildStage::kSeccomp:
      return "seccomp";
    case ChildStage::kExec:
      return "exec";
  }
  return "unknown";
}

std::string describeChildFailure(const StageRecord& rec, const ChildSpec& spec) {
  std::string op, subject;
  switch (static_cast<ChildStage>(rec.stage)) {
    case ChildStage::kSignals:
      op = "sigprocmask/sigaction";
      break;
    case ChildStage::kSetsid:
      op = "setsid";
      break;
    case ChildStage::kStdio:
      op = "dup2";
      subject = "stdio";
      break;
    case ChildStage::kChdir:
      op = "chdir";
      subject = spec.cwd;
      break;
    case ChildStage::kRlimit:
      op = "setrlimit";
      subject = "resource " + std::to_string(rec.detail);
      break;
    case ChildStage::kLandlock:
      op = "landlock_restrict_self";
      break;
    case ChildStage::kCapBoundingSet:
      op = "prctl(PR_CAPBSET_DROP)";
      subject = "capability " + std::to_string(rec.detail);
      break;
    case ChildStage::kSetgroups:
      op = "setgroups";
      subject = "no supplementary groups";
      break;
    case ChildStage::kSetresgid:
      op = "setresgid";
      subject = std::to_string(spec.gid);
      break;
    case ChildStage::kSetresuid:
      op = "setresuid";
      subject = std::to_string(spec.uid);
      break;
    case ChildStage::kCapabilities:
      op = "capset";
      break;
    case ChildStage::kNoNewPrivs:
      op = "prctl(PR_SET_NO_NEW_PRIVS)";
      break;
    case ChildStage::kSeccomp:
      op = "seccomp(SECCOMP_SET_MODE_FILTER)";
      subject = std::to_string(spec.seccomp != nullptr ? spec.seccomp->len : 0) + " instructions";
      break;
    case ChildStage::kExec:
      op = "execve";
      subject = spec.path;
      break;
    default:
      op = "child stage " + std::to_string(rec.stage);
      break;
  }
  return Error(op, subject, rec.err).message();
}

}  // namespace airlock::agent
