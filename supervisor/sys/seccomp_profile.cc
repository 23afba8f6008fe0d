// The default seccomp profile as data: an allowlist at least as tight as Docker's default
// (moby profiles/seccomp/default.json, unprivileged container) with explicit refusals, each with a
// reason. Everything not listed gets ENOSYS.
#include <cerrno>

#include "supervisor/sys/seccomp_filter.h"

namespace airlock::sys {

namespace {

using F = SeccompArgFilter;

constexpr const char* kFile = "file and directory operations on the sandbox's own view";
constexpr const char* kIo = "reading and writing open descriptors";
constexpr const char* kMem = "memory management of the process itself";
constexpr const char* kProc = "process and thread lifecycle inside the sandbox's pid namespace";
constexpr const char* kIds = "credentials, confined by the sandbox's user namespace";
constexpr const char* kSig = "signals, confined to the sandbox's pid namespace";
constexpr const char* kTime = "reading clocks and sleeping";
constexpr const char* kPoll = "event loops (Python asyncio, libuv)";
constexpr const char* kNet = "sockets already created; reach is set by the network namespace";
constexpr const char* kIpc = "System V / POSIX IPC, private to the sandbox's ipc namespace";
constexpr const char* kSched = "scheduling hints for the process's own threads";
constexpr const char* kInfo = "harmless information queries";
constexpr const char* kSelf = "restricting itself further (seccomp, landlock, prctl)";
constexpr const char* kAio = "Linux AIO (Docker allows it; io_uring is refused)";

constexpr const char* kMount = "mount table changes: the sandbox's filesystem view is fixed";
constexpr const char* kNs = "new namespaces are an escape and kernel attack surface";
constexpr const char* kTrace = "inspecting or changing other processes' memory";
constexpr const char* kKernel = "kernel attack surface with no use for sandboxed code";
constexpr const char* kKeys = "kernel keyrings are not namespaced";
constexpr const char* kHost = "changes the host kernel or machine state";
constexpr const char* kClock = "setting clocks changes the host's time";
constexpr const char* kHandle = "file handles bypass path-based confinement (shocker)";

constexpr SyscallRule kRules[] = {
    // Files and directories.
    {"access", 0, kFile}, {"faccessat", 0, kFile}, {"faccessat2", 0, kFile},
    {"open", 0, kFile}, {"openat", 0, kFile}, {"openat2", 0, kFile}, {"creat", 0, kFile},
    {"close", 0, kFile}, {"close_range", 0, kFile},
    {"stat", 0, kFile}, {"fstat", 0, kFile}, {"lstat", 0, kFile}, {"newfstatat", 0, kFile},
    {"statx", 0, kFile}, {"statfs", 0, kFile}, {"fstatfs", 0, kFile},
    {"getdents", 0, kFile}, {"getdents64", 0, kFile}, {"getcwd", 0, kFile},
    {"chdir", 0, kFile}, {"fchdir", 0, kFile},
    {"mkdir", 0, kFile}, {"mkdirat", 0, kFile}, {"rmdir", 0, kFile},
    {"rename", 0, kFile}, {"renameat", 0, kFile}, {"renameat2", 0, kFile},
    {"link", 0, kFile}, {"linkat", 0, kFile}, {"symlink", 0, kFile}, {"symlinkat", 0, kFile},
    {"unlink", 0, kFile}, {"unlinkat", 0, kFile},
    {"readlink", 0, kFile}, {"readlinkat", 0, kFile},
    {"chmod", 0, kFile}, {"fchmod", 0, kFile}, {"fchmodat", 0, kFile},
    {"chown", 0, kFile}, {"fchown", 0, kFile}, {"lchown", 0, kFile}, {"fchownat", 0, kFile},
    {"truncate", 0, kFile}, {"ftruncate", 0, kFile}, {"fallocate", 0, kFile},
    {"umask", 0, kFile}, {"utime", 0, kFile}, {"utimes", 0, kFile}, {"utimensat", 0, kFile},
    {"futimesat", 0, kFile}, {"flock", 0, kFile},
    {"getxattr", 0, kFile}, {"lgetxattr", 0, kFile}, {"fgetxattr", 0, kFile},
    {"setxattr", 0, kFile}, {"lsetxattr", 0, kFile}, {"fsetxattr", 0, kFile},
    {"listxattr", 0, kFile}, {"llistxattr", 0, kFile}, {"flistxattr", 0, kFile},
    {"removexattr", 0, kFile}, {"lremovexattr", 0, kFile}, {"fremovexattr", 0, kFile},
    {"inotify_init", 0, kFile}, {"inotify_init1", 0, kFile},
    {"inotify_add_watch", 0, kFile}, {"inotify_rm_watch", 0, kFile},
    {"fanotify_mark", 0, "needs a fanotify fd, which fanotify_init (refused) would give"},
    {"mknod", 0, "FIFOs and regular files; device nodes refused", F::kMknodNoDevices},
    {"mknodat", 0, "FIFOs and regular files; device nodes refused", F::kMknodNoDevices},
    // Descriptor I/O.
    {"read", 0, kIo}, {"write", 0, kIo}, {"readv", 0, kIo}, {"writev", 0, kIo},
    {"pread64", 0, kIo}, {"pwrite64", 0, kIo}, {"preadv", 0, kIo}, {"pwritev", 0, kIo},
    {"preadv2", 0, kIo}, {"pwritev2", 0, kIo}, {"lseek", 0, kIo},
    {"dup", 0, kIo}, {"dup2", 0, kIo}, {"dup3", 0, kIo}, {"fcntl", 0, kIo},
    {"ioctl", 0, "terminal and device control; TIOCSTI/TIOCLINUX refused", F::kIoctlNoTiocsti},
    {"pipe", 0, kIo}, {"pipe2", 0, kIo}, {"splice", 0, kIo}, {"tee", 0, kIo},
    {"vmsplice", 0, kIo}, {"sendfile", 0, kIo}, {"copy_file_range", 0, kIo},
    {"fsync", 0, kIo}, {"fdatasync", 0, kIo}, {"sync", 0, kIo}, {"syncfs", 0, kIo},
    {"sync_file_range", 0, kIo}, {"fadvise64", 0, kIo}, {"readahead", 0, kIo},
    {"eventfd", 0, kIo}, {"eventfd2", 0, kIo}, {"signalfd", 0, kIo}, {"signalfd4", 0, kIo},
    {"timerfd_create", 0, kIo}, {"timerfd_settime", 0, kIo}, {"timerfd_gettime", 0, kIo},
    {"memfd_create", 0, kIo},
    {"io_setup", 0, kAio}, {"io_destroy", 0, kAio}, {"io_submit", 0, kAio},
    {"io_cancel", 0, kAio}, {"io_getevents", 0, kAio}, {"io_pgetevents", 0, kAio},
    // Memory.
    {"brk", 0, kMem}, {"mmap", 0, kMem}, {"munmap", 0, kMem}, {"mprotect", 0, kMem},
    {"mremap", 0, kMem}, {"madvise", 0, kMem}, {"mincore", 0, kMem}, {"msync", 0, kMem},
    {"mlock", 0, kMem}, {"mlock2", 0, kMem}, {"mlockall", 0, kMem}, {"munlock", 0, kMem},
    {"munlockall", 0, kMem}, {"remap_file_pages", 0, kMem}, {"membarrier", 0, kMem},
    {"pkey_alloc", 0, kMem}, {"pkey_free", 0, kMem}, {"pkey_mprotect", 0, kMem},
    // Processes and threads.
    {"clone", 0, "fork and threads; CLONE_NEW* flags refused", F::kCloneWithoutNamespaces},
    {"fork", 0, kProc}, {"vfork", 0, kProc}, {"execve", 0, kProc}, {"execveat", 0, kProc},
    {"exit", 0, kProc}, {"exit_group", 0, kProc}, {"wait4", 0, kProc}, {"waitid", 0, kProc},
    {"set_tid_address", 0, kProc}, {"set_robust_list", 0, kProc},
    {"get_robust_list", 0, kProc}, {"futex", 0, kProc}, {"futex_waitv", 0, kProc},
    {"rseq", 0, kProc}, {"arch_prctl", 0, kProc}, {"set_thread_area", 0, kProc},
    {"get_thread_area", 0, kProc}, {"restart_syscall", 0, kProc},
    {"getpid", 0, kProc}, {"getppid", 0, kProc}, {"gettid", 0, kProc},
    {"getpgid", 0, kProc}, {"setpgid", 0, kProc}, {"getpgrp", 0, kProc},
    {"getsid", 0, kProc}, {"setsid", 0, kProc},
    {"getrlimit", 0, kProc}, {"setrlimit", 0, kProc}, {"prlimit64", 0, kProc},
    {"getrusage", 0, kProc}, {"times", 0, kProc},
    {"pidfd_open", 0, kProc}, {"pidfd_send_signal", 0, kProc}, {"process_mrelease", 0, kProc},
    {"personality", 0, "only Docker's safe personas (query, PER_LINUX, UNAME26)",
     F::kPersonalitySafe},
    // Credentials.
    {"getuid", 0, kIds}, {"geteuid", 0, kIds}, {"getgid", 0, kIds}, {"getegid", 0, kIds},
    {"getresuid", 0, kIds}, {"getresgid", 0, kIds}, {"getgroups", 0, kIds},
    {"setuid", 0, kIds}, {"setgid", 0, kIds}, {"setreuid", 0, kIds}, {"setregid", 0, kIds},
    {"setresuid", 0, kIds}, {"setresgid", 0, kIds}, {"setfsuid", 0, kIds},
    {"setfsgid", 0, kIds}, {"setgroups", 0, kIds}, {"capget", 0, kIds}, {"capset", 0, kIds},
    // Signals.
    {"kill", 0, kSig}, {"tkill", 0, kSig}, {"tgkill", 0, kSig},
    {"rt_sigaction", 0, kSig}, {"rt_sigprocmask", 0, kSig}, {"rt_sigreturn", 0, kSig},
    {"rt_sigpending", 0, kSig}, {"rt_sigsuspend", 0, kSig}, {"rt_sigtimedwait", 0, kSig},
    {"rt_sigqueueinfo", 0, kSig}, {"rt_tgsigqueueinfo", 0, kSig}, {"sigaltstack", 0, kSig},
    {"pause", 0, kSig}, {"alarm", 0, kSig},
    // Time.
    {"clock_gettime", 0, kTime}, {"clock_getres", 0, kTime}, {"clock_nanosleep", 0, kTime},
    {"nanosleep", 0, kTime}, {"gettimeofday", 0, kTime}, {"time", 0, kTime},
    {"getitimer", 0, kTime}, {"setitimer", 0, kTime},
    {"timer_create", 0, kTime}, {"timer_settime", 0, kTime}, {"timer_gettime", 0, kTime},
    {"timer_getoverrun", 0, kTime}, {"timer_delete", 0, kTime},
    // Polling.
    {"poll", 0, kPoll}, {"ppoll", 0, kPoll}, {"select", 0, kPoll}, {"pselect6", 0, kPoll},
    {"epoll_create", 0, kPoll}, {"epoll_create1", 0, kPoll}, {"epoll_ctl", 0, kPoll},
    {"epoll_wait", 0, kPoll}, {"epoll_pwait", 0, kPoll}, {"epoll_pwait2", 0, kPoll},
    // Networking.
    {"socket", 0, "AF_UNIX, AF_INET, AF_INET6 stream/dgram only", F::kSocketFamilies},
    {"socketpair", 0, kNet}, {"bind", 0, kNet}, {"connect", 0, kNet}, {"listen", 0, kNet},
    {"accept", 0, kNet}, {"accept4", 0, kNet}, {"getsockname", 0, kNet},
    {"getpeername", 0, kNet}, {"getsockopt", 0, kNet}, {"setsockopt", 0, kNet},
    {"sendto", 0, kNet}, {"recvfrom", 0, kNet}, {"sendmsg", 0, kNet}, {"recvmsg", 0, kNet},
    {"sendmmsg", 0, kNet}, {"recvmmsg", 0, kNet}, {"shutdown", 0, kNet},
    // IPC.
    {"shmget", 0, kIpc}, {"shmat", 0, kIpc}, {"shmdt", 0, kIpc}, {"shmctl", 0, kIpc},
    {"semget", 0, kIpc}, {"semop", 0, kIpc}, {"semtimedop", 0, kIpc}, {"semctl", 0, kIpc},
    {"msgget", 0, kIpc}, {"msgsnd", 0, kIpc}, {"msgrcv", 0, kIpc}, {"msgctl", 0, kIpc},
    {"mq_open", 0, kIpc}, {"mq_unlink", 0, kIpc}, {"mq_timedsend", 0, kIpc},
    {"mq_timedreceive", 0, kIpc}, {"mq_notify", 0, kIpc}, {"mq_getsetattr", 0, kIpc},
    // Scheduling.
    {"sched_yield", 0, kSched}, {"sched_getaffinity", 0, kSched},
    {"sched_setaffinity", 0, kSched}, {"sched_getparam", 0, kSched},
    {"sched_setparam", 0, kSched}, {"sched_getscheduler", 0, kSched},
    {"sched_setscheduler", 0, kSched}, {"sched_getattr", 0, kSched},
    {"sched_setattr", 0, kSched}, {"sched_get_priority_max", 0, kSched},
    {"sched_get_priority_min", 0, kSched}, {"sched_rr_get_interval", 0, kSched},
    {"getpriority", 0, kSched}, {"setpriority", 0, kSched}, {"ioprio_get", 0, kSched},
    {"ioprio_set", 0, kSched}, {"getcpu", 0, kSched},
    // Information and self-restriction.
    {"uname", 0, kInfo}, {"sysinfo", 0, kInfo}, {"getrandom", 0, kInfo},
    {"prctl", 0, kSelf}, {"seccomp", 0, kSelf}, {"landlock_create_ruleset", 0, kSelf},
    {"landlock_add_rule", 0, kSelf}, {"landlock_restrict_self", 0, kSelf},

    // Refused with EPERM.
    {"mount", EPERM, kMount}, {"umount2", EPERM, kMount}, {"pivot_root", EPERM, kMount},
    {"move_mount", EPERM, kMount}, {"open_tree", EPERM, kMount}, {"fsopen", EPERM, kMount},
    {"fsconfig", EPERM, kMount}, {"fsmount", EPERM, kMount}, {"fspick", EPERM, kMount},
    {"mount_setattr", EPERM, kMount}, {"chroot", EPERM, kMount},
    {"unshare", EPERM, kNs}, {"setns", EPERM, kNs},
    {"ptrace", EPERM, kTrace}, {"process_vm_readv", EPERM, kTrace},
    {"process_vm_writev", EPERM, kTrace}, {"process_madvise", EPERM, kTrace},
    {"pidfd_getfd", EPERM, kTrace}, {"kcmp", EPERM, kTrace},
    {"bpf", EPERM, "eBPF is kernel attack surface and sees the host"},
    {"perf_event_open", EPERM, "perf events leak host information and are attack surface"},
    {"userfaultfd", EPERM, "stalls kernel page faults: a building block for kernel exploits"},
    {"keyctl", EPERM, kKeys}, {"add_key", EPERM, kKeys}, {"request_key", EPERM, kKeys},
    {"kexec_load", EPERM, kHost}, {"kexec_file_load", EPERM, kHost},
    {"init_module", EPERM, kHost}, {"finit_module", EPERM, kHost},
    {"delete_module", EPERM, kHost}, {"reboot", EPERM, kHost}, {"swapon", EPERM, kHost},
    {"swapoff", EPERM, kHost}, {"acct", EPERM, kHost}, {"sethostname", EPERM, kHost},
    {"setdomainname", EPERM, kHost}, {"iopl", EPERM, kHost}, {"ioperm", EPERM, kHost},
    {"settimeofday", EPERM, kClock}, {"clock_settime", EPERM, kClock},
    {"adjtimex", EPERM, kClock}, {"clock_adjtime", EPERM, kClock},
    {"open_by_handle_at", EPERM, kHandle}, {"name_to_handle_at", EPERM, kHandle},
    {"lookup_dcookie", EPERM, kKernel}, {"quotactl", EPERM, kKernel},
    {"quotactl_fd", EPERM, kKernel}, {"syslog", EPERM, "the kernel log leaks host addresses"},
    {"vhangup", EPERM, kHost}, {"fanotify_init", EPERM, "watches filesystems beyond the sandbox"},
    {"modify_ldt", EPERM, kKernel}, {"uselib", EPERM, kKernel},

    // Refused with ENOSYS, so runtimes take their fallback path.
    {"io_uring_setup", ENOSYS, "io_uring is kernel attack surface; libuv falls back on ENOSYS"},
    {"io_uring_enter", ENOSYS, "io_uring is kernel attack surface; libuv falls back on ENOSYS"},
    {"io_uring_register", ENOSYS,
     "io_uring is kernel attack surface; libuv falls back on ENOSYS"},
    {"clone3", ENOSYS, "its flags sit in memory seccomp cannot read: glibc falls back to clone"},
};

}  // namespace

std::span<const SyscallRule> defaultSeccompRules() { return kRules; }

}  // namespace airlock::sys
