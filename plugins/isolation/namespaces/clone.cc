#include "clone.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <system_error>

#include "child.h"

namespace airlock::isolation {
namespace {

constexpr uint64_t kCloneIntoCgroup = 0x200000000ULL;  // linux/sched.h CLONE_INTO_CGROUP

// struct clone_args of linux/sched.h (VER2, with cgroup); declared here because that header
// clashes with glibc's <sched.h>.
struct CloneArgs {
  uint64_t flags;
  uint64_t pidfd;
  uint64_t child_tid;
  uint64_t parent_tid;
  uint64_t exit_signal;
  uint64_t stack;
  uint64_t stack_size;
  uint64_t tls;
  uint64_t set_tid;
  uint64_t set_tid_size;
  uint64_t cgroup;
};
static_assert(sizeof(CloneArgs) == 88);

// Blocks every signal in the calling thread until destruction: no handler of ours may run in
// the child, which resets dispositions before it unblocks.
class AllSignalsBlocked {
 public:
  AllSignalsBlocked() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old_);
  }
  ~AllSignalsBlocked() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  AllSignalsBlocked(const AllSignalsBlocked&) = delete;
  AllSignalsBlocked& operator=(const AllSignalsBlocked&) = delete;

 private:
  sigset_t old_;
};

Unexpected cloneError(int err, int cgroup_fd) {
  return Unexpected(
      Error("clone3", cgroup_fd >= 0 ? "namespaces, into cgroup" : "namespaces", err));
}

}  // namespace

#if defined(__x86_64__)

// long airlock_clone3_on_stack(CloneArgs* args, size_t size, void (*fn)(void*), void* arg):
// clone3 whose child starts on the stack in args and runs fn(arg), which must not return (if it
// does, the child exits). The parent gets the child's pid or -errno, errno untouched. C cannot
// express a child that begins on a fresh stack, hence these few instructions, as glibc's
// clone3.S. The syscall preserves r8 and r9, and the child starts with the parent's registers.
extern "C" long airlock_clone3_on_stack(CloneArgs* args, size_t size, void (*fn)(void*), void* arg);
asm(R"(
  .text
  .globl airlock_clone3_on_stack
  .hidden airlock_clone3_on_stack
  .type airlock_clone3_on_stack, @function
airlock_clone3_on_stack:
  .cfi_startproc
  movq %rdx, %r8
  movq %rcx, %r9
  movl $435, %eax
  syscall
  testq %rax, %rax
  jz 1f
  ret
1:
  .cfi_undefined rip
  xorl %ebp, %ebp
  movq %r9, %rdi
  call *%r8
  movl $1, %edi
  movl $60, %eax
  syscall
  hlt
  .cfi_endproc
  .size airlock_clone3_on_stack, .-airlock_clone3_on_stack
)");

// Everything the helper thread, the child and the calling thread share for one clone.
struct SharedMemoryClone {
  // Bits of state, each set once; the futex word the calling thread sleeps on.
  static constexpr uint32_t kChildRunning = 1;   // the child is past clone3: pid and pidfd are set
  static constexpr uint32_t kCloneReturned = 2;  // the child exec'd or died, or clone3 failed

  // 2 x PATH_MAX of locals in the mount steps and a few frames: 256 KiB with a guard page below
  // is ample, and only the pages the child touches are ever faulted in.
  static constexpr size_t kStackSize = 256 * 1024;
  static constexpr size_t kGuard = 4096;

  CloneArgs args = {};
  int pidfd = -1;  // the kernel stores these two before the child first runs
  pid_t pid = 0;
  std::atomic<uint32_t> state{0};
  long result = 0;  // the helper's clone3 result, once kCloneReturned
  const Plan* plan = nullptr;
  ChildContext ctx;
  void* stack = nullptr;
  std::thread helper;

  ~SharedMemoryClone() {
    if (helper.joinable()) helper.join();  // returns once the child exec'd or died
    if (stack != nullptr) ::munmap(stack, kStackSize + kGuard);
  }

  void publish(uint32_t bit) {
    state.fetch_or(bit);
    ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr,
              nullptr, 0);
  }

  uint32_t waitForAnyState() {
    uint32_t seen;
    while ((seen = state.load()) == 0) {
      ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&state), FUTEX_WAIT_PRIVATE, 0, nullptr,
                nullptr, 0);
    }
    return seen;
  }

  // The child: tell the calling thread its pid is ready, then run the plan. Until it execs it
  // shares the supervisor's memory, so like a vfork child it writes only its own stack, the
  // state word, and errno, which is the helper's (suspended in clone3, it reads none).
  static void childMain(void* self) {
    auto* clone = static_cast<SharedMemoryClone*>(self);
    clone->publish(kChildRunning);
    runChild(clone->plan->steps(), clone->ctx);
  }

  void helperMain() {
    AllSignalsBlocked blocked;  // inherited by the child
    result = airlock_clone3_on_stack(&args, sizeof args, &childMain, this);
    publish(kCloneReturned);
  }
};
static_assert(std::atomic<uint32_t>::is_always_lock_free &&
              sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));

#else

struct SharedMemoryClone {};

#endif

CloneWaiter::CloneWaiter() = default;
CloneWaiter::CloneWaiter(std::unique_ptr<SharedMemoryClone> clone) : clone_(std::move(clone)) {}
CloneWaiter::CloneWaiter(CloneWaiter&&) noexcept = default;
CloneWaiter& CloneWaiter::operator=(CloneWaiter&&) noexcept = default;
CloneWaiter::~CloneWaiter() = default;

#if defined(__x86_64__)
bool CloneWaiter::returned() const {
  return clone_ == nullptr || (clone_->state.load() & SharedMemoryClone::kCloneReturned) != 0;
}
#else
bool CloneWaiter::returned() const { return true; }
#endif

void ChildProcess::killAndReap() noexcept {
  if (!pidfd_) return;
  ::syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
  siginfo_t info;
  while (::waitid(P_PIDFD, static_cast<id_t>(pidfd_.get()), &info, WEXITED) != 0 &&
         errno == EINTR) {
  }
  pidfd_.reset();
}

uint64_t sandboxCloneFlags() {
  // The network and IPC namespaces come from the child's first stage (net.h): a netns costs
  // ~0.8 ms of kernel work, which there runs while the parent writes id maps and cgroups.
  return CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWCGROUP;
}

Result<SpawnedChild> spawnChild(const Plan& plan, ChildContext ctx, int cgroup_fd) {
  int sync[2];
  int err[2];
  if (::pipe2(sync, O_CLOEXEC) != 0) return sysError("pipe2", "sync pipe");
  UniqueFd sync_read(sync[0]), sync_write(sync[1]);
  if (::pipe2(err, O_CLOEXEC) != 0) return sysError("pipe2", "error pipe");
  UniqueFd error_read(err[0]), error_write(err[1]);
  ctx.sync_fd = sync_read.get();
  ctx.sync_write_fd = sync_write.get();
  ctx.error_fd = error_write.get();

  CloneArgs args = {};
  args.flags = sandboxCloneFlags() | CLONE_PIDFD;
  args.exit_signal = SIGCHLD;
  if (cgroup_fd >= 0) {
    // Born in the sandbox's cgroup: limits and eBPF apply from the first instruction.
    args.flags |= kCloneIntoCgroup;
    args.cgroup = static_cast<uint64_t>(cgroup_fd);
  }
  // New namespaces need CAP_SYS_ADMIN (the supervisor is root).

#if defined(__x86_64__)
  auto clone = std::make_unique<SharedMemoryClone>();
  void* stack = ::mmap(nullptr, SharedMemoryClone::kStackSize + SharedMemoryClone::kGuard,
                       PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return sysError("mmap", "child stack");
  clone->stack = stack;
  if (::mprotect(stack, SharedMemoryClone::kGuard, PROT_NONE) != 0)
    return sysError("mprotect", "child stack guard");
  clone->args = args;
  clone->args.flags |= CLONE_VM | CLONE_VFORK | CLONE_PARENT_SETTID;
  clone->args.pidfd = reinterpret_cast<uintptr_t>(&clone->pidfd);
  clone->args.parent_tid = reinterpret_cast<uintptr_t>(&clone->pid);
  clone->args.stack = reinterpret_cast<uintptr_t>(stack) + SharedMemoryClone::kGuard;
  clone->args.stack_size = SharedMemoryClone::kStackSize;
  clone->plan = &plan;
  clone->ctx = ctx;
  try {
    clone->helper = std::thread(&SharedMemoryClone::helperMain, clone.get());
  } catch (const std::system_error& e) {
    return Unexpected(Error("pthread_create", "clone helper thread", e.code().value()));
  }
  uint32_t state = clone->waitForAnyState();
  if ((state & SharedMemoryClone::kChildRunning) == 0) {
    // The helper came back before any child ran: clone3 failed (or the child was killed before
    // its first instruction, in which case it is reaped here).
    clone->helper.join();
    if (clone->result < 0) return cloneError(static_cast<int>(-clone->result), cgroup_fd);
    ChildProcess dead(static_cast<pid_t>(clone->result), UniqueFd(clone->pidfd));
    return fail("the sandbox child died before it ran", "clone3");
  }
  pid_t pid = clone->pid;
  UniqueFd pidfd(clone->pidfd);
  return SpawnedChild{CloneWaiter(std::move(clone)), ChildProcess(pid, std::move(pidfd)),
                      std::move(sync_write), std::move(error_read)};
#else
  int pidfd = -1;
  args.pidfd = reinterpret_cast<uintptr_t>(&pidfd);
  long pid;
  int clone_errno;
  {
    AllSignalsBlocked blocked;
    // Fork-like, since stack is 0: the child has a copy of our memory.
    pid = ::syscall(SYS_clone3, &args, sizeof args);
    if (pid == 0) runChild(plan.steps(), ctx);
    clone_errno = errno;
  }
  if (pid < 0) return cloneError(clone_errno, cgroup_fd);
  return SpawnedChild{CloneWaiter(), ChildProcess(static_cast<pid_t>(pid), UniqueFd(pidfd)),
                      std::move(sync_write), std::move(error_read)};
#endif
}

}  // namespace airlock::isolation
