#include "child.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "mounts.h"
#include "net.h"
#include "user_ns.h"

namespace airlock::isolation {
namespace {

int waitParent(int sync_fd, int sync_write_fd) {
  // Otherwise this read never ends when the parent dies (kill -9) before it writes: we would
  // hold the last write end ourselves, and with it the parent's fds (its API socket, the
  // sandbox's lock) forever.
  if (sync_write_fd >= 0) ::close(sync_write_fd);
  char byte;
  for (;;) {
    ssize_t n = ::read(sync_fd, &byte, 1);
    if (n == 1) break;
    if (n == 0) return ECANCELED;  // the parent gave up on us
    if (errno != EINTR) return errno;
  }
  ::close(sync_fd);
  return 0;
}

// fd 3 = the channel, 0..2 = /dev/null of the new root, everything else close-on-exec
// (including the agent's O_PATH fd, which execveat still uses).
int setupFds(const ChildContext& ctx, int* exe_fd) {
  int exe = ::fcntl(ctx.exe_fd, F_DUPFD_CLOEXEC, 4);
  if (exe < 0) return errno;
  *exe_fd = exe;
  if (ctx.channel_fd == 3) {
    if (::fcntl(3, F_SETFD, 0) != 0) return errno;
  } else if (::dup2(ctx.channel_fd, 3) < 0) {
    return errno;
  }
  int null = ::open("/dev/null", O_RDWR | O_CLOEXEC | O_NOCTTY);
  if (null < 0) return errno;
  for (int fd = 0; fd <= 2; ++fd) {
    if (null == fd) {
      if (::fcntl(fd, F_SETFD, 0) != 0) return errno;
    } else if (::dup2(null, fd) < 0) {
      return errno;
    }
  }
  if (::syscall(SYS_close_range, 4u, ~0u, CLOSE_RANGE_CLOEXEC) != 0) return errno;
  return 0;
}

[[noreturn]] void report(int error_fd, Stage stage, int err, uint32_t step) {
  FailureRecord record{static_cast<int32_t>(stage), err != 0 ? err : EINVAL, step};
  ssize_t n = ::write(error_fd, &record, sizeof record);
  (void)n;  // nobody left to tell
  ::_exit(kChildExitStageFailed);
}

}  // namespace

void planWaitParent(Plan& plan) {
  plan.add({.stage = Stage::kWaitParent, .kind = StepKind::kWaitParent}, "read", "sync pipe");
}

void planHostname(const char* hostname, Plan& plan) {
  size_t len = std::strlen(hostname);
  plan.add({.stage = Stage::kHostname,
            .kind = StepKind::kSetHostname,
            .source = plan.keep(hostname),
            .len = len},
           "sethostname", hostname);
}

void planExec(Plan& plan) {
  plan.add({.stage = Stage::kFds, .kind = StepKind::kSetupFds}, "dup2",
           "channel to 3, /dev/null to 0-2");
  plan.add({.stage = Stage::kExec, .kind = StepKind::kExec}, "execveat", "agent");
}

void runChild(std::span<const Step> steps, const ChildContext& ctx) {
  int error_fd = ctx.error_fd;
  if (error_fd < 4) {
    int moved = ::fcntl(error_fd, F_DUPFD_CLOEXEC, 4);
    if (moved < 0) ::_exit(kChildExitStageFailed);
    error_fd = moved;
  }
  int exe_fd = ctx.exe_fd;
  int root_fd = -1;  // the new root, from its kOpenRoot step on; O_CLOEXEC, so gone at exec
  ::umask(022);
  for (uint32_t i = 0; i < steps.size(); ++i) {
    const Step& step = steps[i];
    int err = 0;
    switch (step.kind) {
      case StepKind::kWaitParent:
        err = waitParent(ctx.sync_fd, ctx.sync_write_fd);
        break;
      case StepKind::kSetResGid:
      case StepKind::kSetGroups:
      case StepKind::kSetResUid:
        err = identityInChild(step);
        break;
      case StepKind::kOpenRoot:
        // The scratch dir is the supervisor's own path: looked up by path, once, right after
        // the root was mounted on it; every mount point in the root is looked up beneath it.
        root_fd = ::open(step.path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        err = root_fd >= 0 ? 0 : errno;
        break;
      case StepKind::kMakePrivate:
      case StepKind::kMount:
      case StepKind::kMoveMount:
      case StepKind::kSetAttr:
      case StepKind::kMkdir:
      case StepKind::kMkfile:
      case StepKind::kSymlink:
      case StepKind::kWriteFile:
      case StepKind::kPivotRoot:
        err = fsStepInChild(step, root_fd);
        break;
      case StepKind::kSetHostname:
        // CAP_SYS_ADMIN over the new UTS namespace.
        err = ::sethostname(step.source, step.len) == 0 ? 0 : errno;
        break;
      case StepKind::kUnshareNetIpc:
        err = unshareNetIpcInChild();
        break;
      case StepKind::kLoopbackUp:
        err = loopbackUpInChild();
        break;
      case StepKind::kSetupFds:
        err = setupFds(ctx, &exe_fd);
        break;
      case StepKind::kExec:
        ::syscall(SYS_execveat, exe_fd, "", ctx.argv, ctx.envp, AT_EMPTY_PATH);
        err = errno;
        break;
    }
    if (err != 0) report(error_fd, step.stage, err, i);
    if (ctx.stage_end_ns != nullptr &&
        (i + 1 == steps.size() || steps[i + 1].stage != step.stage)) {
      timespec ts;
      ::clock_gettime(CLOCK_MONOTONIC, &ts);  // vDSO, async-signal-safe
      ctx.stage_end_ns[static_cast<int>(step.stage)] =
          int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
    }
  }
  report(error_fd, Stage::kExec, ENOEXEC, static_cast<uint32_t>(steps.size()));
}

}  // namespace airlock::isolation
