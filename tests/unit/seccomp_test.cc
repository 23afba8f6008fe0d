// The seccomp profile through a forked victim (gVisor pkg/seccomp TestRealDeal style): the child
// installs the compiled program with NO_NEW_PRIVS, makes the call, and reports errno or dies.
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "supervisor/sys/seccomp_arg_checks.h"
#include "supervisor/sys/seccomp_filter.h"
#include "test_support.h"

namespace airlock::sys {
namespace {

using airlock::testing::TempDir;

const std::string& defaultFilter() {
  static const std::string bpf = [] {
    auto r = compileSeccompFilter({});
    if (!r) {
      ADD_FAILURE() << r.error().message();
      return std::string();
    }
    return *r;
  }();
  return bpf;
}

struct Outcome {
  int exit_code = -1;  // when exited
  int signal = 0;      // when killed
};

Outcome inVictim(const std::string& bpf, const std::function<int()>& body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    struct rlimit no_core = {0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    sock_fprog prog{static_cast<unsigned short>(bpf.size() / sizeof(sock_filter)),
                    reinterpret_cast<sock_filter*>(const_cast<char*>(bpf.data()))};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ::_exit(250);
    if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) ::_exit(251);
    ::_exit(body());
  }
  Outcome o;
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status)) o.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) o.signal = WTERMSIG(status);
  return o;
}

// errno of `call` under the filter (0 = success).
int errnoUnder(const std::string& bpf, const std::function<long()>& call) {
  Outcome o = inVictim(bpf, [&] { return call() < 0 ? errno : 0; });
  EXPECT_EQ(o.signal, 0) << "victim killed by signal " << o.signal;
  return o.exit_code;
}

int errnoUnderDefault(const std::function<long()>& call) {
  return errnoUnder(defaultFilter(), call);
}

TEST(SeccompProfile, EveryRuleHasAReasonAndNamesAreUnique) {
  std::set<std::string> seen;
  for (const auto& r : defaultSeccompRules()) {
    EXPECT_TRUE(seen.insert(r.name).second) << "duplicate " << r.name;
    ASSERT_NE(r.reason, nullptr) << r.name;
    EXPECT_GT(std::string(r.reason).size(), 5u) << r.name;
    EXPECT_TRUE(r.errnum == 0 || r.errnum == EPERM || r.errnum == ENOSYS) << r.name;
    if (r.filter != SeccompArgFilter::kNone) {
      EXPECT_EQ(r.errnum, 0) << r.name;
    }
  }
}

TEST(SeccompProfile, DangerousSyscallsAreRefusedExplicitly) {
  std::map<std::string, int> rules;
  for (const auto& r : defaultSeccompRules()) rules[r.name] = r.errnum;
  for (const char* name : {"mount",
                           "umount2",
                           "pivot_root",
                           "move_mount",
                           "open_tree",
                           "fsopen",
                           "fsconfig",
                           "fsmount",
                           "fspick",
                           "mount_setattr",
                           "unshare",
                           "setns",
                           "ptrace",
                           "process_vm_readv",
                           "process_vm_writev",
                           "bpf",
                           "perf_event_open",
                           "userfaultfd",
                           "keyctl",
                           "add_key",
                           "request_key",
                           "kexec_load",
                           "kexec_file_load",
                           "init_module",
                           "finit_module",
                           "delete_module",
                           "reboot",
                           "swapon",
                           "swapoff",
                           "acct",
                           "settimeofday",
                           "clock_settime",
                           "adjtimex",
                           "clock_adjtime",
                           "open_by_handle_at",
                           "name_to_handle_at",
                           "lookup_dcookie",
                           "quotactl",
                           "syslog",
                           "vhangup",
                           "iopl",
                           "ioperm",
                           "chroot"}) {
    ASSERT_EQ(rules.count(name), 1u) << name;
    EXPECT_EQ(rules[name], EPERM) << name;
  }
  for (const char* name : {"io_uring_setup", "io_uring_enter", "io_uring_register", "clone3"}) {
    EXPECT_EQ(rules[name], ENOSYS) << name;
  }
}

template <typename F>
long microsPer(int rounds, F&& f) {
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < rounds; ++i) f();
  return static_cast<long>(std::chrono::duration_cast<std::chrono::microseconds>(
                               std::chrono::steady_clock::now() - start)
                               .count() /
                           rounds);
}

TEST(SeccompCompile, PrecompiledDefaultMatchesLibseccompAndIsFast) {
  ASSERT_FALSE(defaultFilter().empty());
  EXPECT_EQ(defaultFilter().size() % sizeof(sock_filter), 0u);
  size_t insns = defaultFilter().size() / sizeof(sock_filter);
  EXPECT_LT(insns, size_t{BPF_MAXINSNS});
  auto fresh = buildSeccompFilter({});
  ASSERT_TRUE(fresh) << fresh.error().message();
  EXPECT_EQ(*fresh, defaultFilter()) << "the build-time program drifted from the profile";

  long build_us = microsPer(10, [] { ASSERT_TRUE(buildSeccompFilter({})); });
  long default_us = microsPer(1000, [] { ASSERT_TRUE(compileSeccompFilter({})); });
  SeccompOptions extra{.allow = {"ptrace"}, .deny = {"uname"}};
  ASSERT_TRUE(compileSeccompFilter(extra));
  long cached_us = microsPer(1000, [&] { ASSERT_TRUE(compileSeccompFilter(extra)); });
  std::printf(
      "seccomp: libseccomp compile %ld us, precompiled default %ld us, cached %ld us, "
      "%zu instructions\n",
      build_us, default_us, cached_us, insns);
  RecordProperty("libseccomp_compile_us", static_cast<int>(build_us));
  RecordProperty("instructions", static_cast<int>(insns));
  EXPECT_LT(default_us, 200) << "the default program is on every run's path";
  EXPECT_LT(cached_us, 200);
  EXPECT_EQ(*compileSeccompFilter(extra), *buildSeccompFilter(extra));
}

// A classic-BPF interpreter for seccomp programs: the instructions libseccomp and the range tree
// emit, and a failure for anything else, so the equivalence test below cannot pass by skipping.
struct BpfResult {
  bool ok = false;
  uint32_t action = 0;
  std::string error;
};

BpfResult runBpf(const std::string& bpf, const seccomp_data& data) {
  const auto* prog = reinterpret_cast<const sock_filter*>(bpf.data());
  const size_t len = bpf.size() / sizeof(sock_filter);
  const auto* bytes = reinterpret_cast<const unsigned char*>(&data);
  uint32_t a = 0, x = 0;
  uint32_t mem[BPF_MEMWORDS] = {};
  for (size_t pc = 0; pc < len; ++pc) {
    const sock_filter& in = prog[pc];
    auto jump = [&](bool taken) { pc += taken ? in.jt : in.jf; };
    switch (in.code) {
      case BPF_LD | BPF_W | BPF_ABS:
        if (in.k + 4 > sizeof data || in.k % 4 != 0) return {false, 0, "bad load offset"};
        std::memcpy(&a, bytes + in.k, 4);
        break;
      case BPF_LD | BPF_MEM:
        a = mem[in.k % BPF_MEMWORDS];
        break;
      case BPF_LDX | BPF_MEM:
        x = mem[in.k % BPF_MEMWORDS];
        break;
      case BPF_ST:
        mem[in.k % BPF_MEMWORDS] = a;
        break;
      case BPF_STX:
        mem[in.k % BPF_MEMWORDS] = x;
        break;
      case BPF_ALU | BPF_AND | BPF_K:
        a &= in.k;
        break;
      case BPF_MISC | BPF_TAX:
        x = a;
        break;
      case BPF_MISC | BPF_TXA:
        a = x;
        break;
      case BPF_JMP | BPF_JA:
        pc += in.k;
        break;
      case BPF_JMP | BPF_JEQ | BPF_K:
        jump(a == in.k);
        break;
      case BPF_JMP | BPF_JGT | BPF_K:
        jump(a > in.k);
        break;
      case BPF_JMP | BPF_JGE | BPF_K:
        jump(a >= in.k);
        break;
      case BPF_JMP | BPF_JSET | BPF_K:
        jump((a & in.k) != 0);
        break;
      case BPF_RET | BPF_K:
        return {true, in.k, {}};
      default:
        return {false, 0, "opcode " + std::to_string(in.code) + " at " + std::to_string(pc)};
    }
  }
  return {false, 0, "fell off the end"};
}

// Every decision of the range-tree program equals libseccomp's own: every syscall number of the
// table and above it, x32 numbers, foreign architectures, and for the argument-checked syscalls
// a cross product of argument values (namespace flags, families, types, device modes, terminal
// ioctls, personality values, with and without high bits).
void expectSameDecisions(const SeccompOptions& opts) {
  auto tree = buildSeccompFilter(opts, SeccompCodegen::kRangeTree);
  auto ref = buildSeccompFilter(opts, SeccompCodegen::kLibseccompOnly);
  ASSERT_TRUE(tree) << tree.error().message();
  ASSERT_TRUE(ref) << ref.error().message();
  const std::vector<uint64_t> values = {0,
                                        1,
                                        2,
                                        3,
                                        5,
                                        8,
                                        10,
                                        16,
                                        17,
                                        40,
                                        0x20000,
                                        0x20008,
                                        0xffffffff,
                                        0x100000001,
                                        SIGCHLD,
                                        CLONE_VM | CLONE_THREAD | CLONE_SIGHAND,
                                        CLONE_NEWUSER,
                                        CLONE_NEWNET | SIGCHLD,
                                        CLONE_NEWNS,
                                        CLONE_NEWCGROUP,
                                        S_IFCHR | 0600,
                                        S_IFBLK,
                                        S_IFIFO | 0644,
                                        S_IFREG,
                                        S_IFSOCK,
                                        TIOCSTI,
                                        TIOCLINUX,
                                        0x100000000ull | TIOCSTI,
                                        SOCK_RAW,
                                        SOCK_STREAM | SOCK_CLOEXEC,
                                        SOCK_DGRAM | SOCK_NONBLOCK,
                                        SOCK_SEQPACKET,
                                        SOCK_PACKET};
  std::set<int> argument_checked;
  for (const auto& r : defaultSeccompRules()) {
    if (r.filter == SeccompArgFilter::kNone) continue;
    int nr = seccomp_syscall_resolve_name(r.name);
    if (nr >= 0) argument_checked.insert(nr);
  }
  ASSERT_GE(argument_checked.size(), 5u);
  size_t compared = 0;
  auto same = [&](const seccomp_data& d) {
    BpfResult t = runBpf(*tree, d), r = runBpf(*ref, d);
    ASSERT_TRUE(t.ok) << "range tree: " << t.error;
    ASSERT_TRUE(r.ok) << "libseccomp: " << r.error;
    ASSERT_EQ(t.action, r.action) << "nr " << d.nr << " arch " << std::hex << d.arch << " args "
                                  << d.args[0] << "," << d.args[1] << "," << d.args[2];
    ++compared;
  };
  std::vector<uint32_t> nrs;
  for (uint32_t nr = 0; nr < 1100; ++nr) nrs.push_back(nr);
  for (uint32_t nr = 0; nr < 600; nr += 7) nrs.push_back(0x40000000u | nr);
  for (uint32_t nr : {0x3fffffffu, 0x7fffffffu, 0x80000000u, 0xffffffffu}) nrs.push_back(nr);
  for (uint32_t arch : {uint32_t{AUDIT_ARCH_X86_64}, uint32_t{AUDIT_ARCH_I386}, 0u}) {
    for (uint32_t nr : nrs) {
      seccomp_data d{};
      d.nr = static_cast<int>(nr);
      d.arch = arch;
      same(d);
      if (::testing::Test::HasFatalFailure()) return;
      if (arch != AUDIT_ARCH_X86_64 || argument_checked.count(static_cast<int>(nr)) == 0) continue;
      for (uint64_t a0 : values) {
        for (uint64_t a1 : values) {
          for (uint64_t a2 : {uint64_t{0}, uint64_t{S_IFCHR}, uint64_t{S_IFIFO}, a1}) {
            d.args[0] = a0;
            d.args[1] = a1;
            d.args[2] = a2;
            same(d);
            if (::testing::Test::HasFatalFailure()) return;
          }
        }
      }
    }
  }
  std::printf("seccomp: %zu decisions compared, %zu instructions (libseccomp alone: %zu)\n",
              compared, tree->size() / sizeof(sock_filter), ref->size() / sizeof(sock_filter));
}

TEST(SeccompCompile, RangeTreeDecidesExactlyAsLibseccomp) {
  expectSameDecisions({});
  expectSameDecisions({.allow = {"ptrace", "socket"}, .deny = {"uname", "ioctl", "getpid"}});
  expectSameDecisions({.allow = {"clone", "mknod", "personality"}, .deny = {"mknodat"}});
}

TEST(SeccompCompile, RangeTreeIsAFractionOfLibseccompsProgram) {
  auto tree = buildSeccompFilter({}, SeccompCodegen::kRangeTree);
  auto ref = buildSeccompFilter({}, SeccompCodegen::kLibseccompOnly);
  ASSERT_TRUE(tree && ref);
  // What the kernel verifies and JIT-compiles for every program started (221 vs 551 when written).
  EXPECT_LT(tree->size() * 2, ref->size()) << tree->size() / sizeof(sock_filter) << " vs "
                                           << ref->size() / sizeof(sock_filter) << " instructions";
}

// A probe of the check above: a program that differs in one decision is caught.
TEST(SeccompCompile, EquivalenceCheckCatchesOneChangedDecision) {
  auto ref = buildSeccompFilter({}, SeccompCodegen::kLibseccompOnly);
  auto changed = buildSeccompFilter({.deny = {"getpid"}}, SeccompCodegen::kRangeTree);
  ASSERT_TRUE(ref && changed);
  seccomp_data d{};
  d.arch = AUDIT_ARCH_X86_64;
  d.nr = SYS_getpid;
  BpfResult a = runBpf(*ref, d), b = runBpf(*changed, d);
  ASSERT_TRUE(a.ok && b.ok);
  EXPECT_EQ(a.action, SECCOMP_RET_ALLOW);
  EXPECT_EQ(b.action, SECCOMP_RET_ERRNO | EPERM);
}

TEST(SeccompCompile, UnknownNamesAreErrorsNamingTheSyscall) {
  auto r = compileSeccompFilter({.allow = {"frobnicate"}});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("'frobnicate'"), std::string::npos) << r.error().message();
  auto d = compileSeccompFilter({.deny = {"not_a_syscall"}});
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message().find("'not_a_syscall'"), std::string::npos);
  // An i386-only name does not exist on x86_64.
  auto a = compileSeccompFilter({.allow = {"socketcall"}});
  ASSERT_FALSE(a);
  EXPECT_NE(a.error().message().find("'socketcall'"), std::string::npos);
}

TEST(SeccompVictim, ControlWithoutFilterAllowsGetpid) {
  EXPECT_EQ(errnoUnderDefault([] { return ::syscall(SYS_getpid); }), 0);
}

TEST(SeccompVictim, ExplicitDenialsReturnEperm) {
  EXPECT_EQ(errnoUnderDefault([] { return ::syscall(SYS_unshare, CLONE_NEWNS); }), EPERM);
  EXPECT_EQ(errnoUnderDefault([] { return ::syscall(SYS_setns, 0, 0); }), EPERM);
  EXPECT_EQ(errnoUnderDefault([] { return ::mount("none", "/tmp", "tmpfs", 0, nullptr); }), EPERM);
  EXPECT_EQ(errnoUnderDefault([] { return ::syscall(SYS_ptrace, 0 /*TRACEME*/, 0, 0, 0); }), EPERM);
  EXPECT_EQ(errnoUnderDefault([] { return ::syscall(SYS_bpf, 0, nullptr, 0); }), EPERM);
  EXPECT_EQ(errnoUnderDefault([] { return ::syscall(SYS_keyctl, 0, 0, 0, 0, 0); }), EPERM);
  EXPECT_EQ(errnoUnderDefault([] { return ::syscall(SYS_userfaultfd, 0); }), EPERM);
  EXPECT_EQ(errnoUnderDefault([] { return ::chroot("/"); }), EPERM);
  EXPECT_EQ(errnoUnderDefault([] { return ::syscall(SYS_perf_event_open, nullptr, 0, -1, -1, 0); }),
            EPERM);
}

TEST(SeccompVictim, UnlistedAndFallbackSyscallsReturnEnosys) {
  EXPECT_EQ(errnoUnderDefault([] { return ::syscall(SYS_io_uring_setup, 1, nullptr); }), ENOSYS);
  EXPECT_EQ(errnoUnderDefault([] { return ::syscall(SYS_clone3, nullptr, 0); }), ENOSYS);
  // Not in the profile at all (Docker refuses them too).
  EXPECT_EQ(errnoUnderDefault([] { return ::syscall(SYS_sysfs, 1, "x"); }), ENOSYS);
  EXPECT_EQ(errnoUnderDefault(
                [] { return ::syscall(SYS_get_mempolicy, nullptr, nullptr, 0, nullptr, 0); }),
            ENOSYS);
}

TEST(SeccompVictim, ForkAndThreadsWorkButNamespaceClonesAreRefused) {
  EXPECT_EQ(errnoUnderDefault([] {
              pid_t p = ::fork();
              if (p == 0) ::_exit(0);
              if (p < 0) return -1L;
              int st = 0;
              ::waitpid(p, &st, 0);
              return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0L : -1L;
            }),
            0);
  // pthread_create tries clone3 (ENOSYS) and falls back to clone without namespace flags.
  EXPECT_EQ(errnoUnderDefault([] {
              int v = 0;
              std::thread t([&] { v = 1; });
              t.join();
              return v == 1 ? 0L : -1L;
            }),
            0);
  EXPECT_EQ(errnoUnderDefault([] {
              return ::syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, nullptr, nullptr, nullptr, 0);
            }),
            EPERM);
  EXPECT_EQ(errnoUnderDefault([] {
              return ::syscall(SYS_clone, CLONE_NEWNET | SIGCHLD, nullptr, nullptr, nullptr, 0);
            }),
            EPERM);
}

TEST(SeccompVictim, SocketFamilies) {
  auto sock = [](long fam, long type) {
    return [=] {
      long fd = ::syscall(SYS_socket, fam, type, 0);
      if (fd >= 0) ::close(static_cast<int>(fd));
      return fd;
    };
  };
  EXPECT_EQ(errnoUnderDefault(sock(AF_INET, SOCK_STREAM)), 0);
  EXPECT_EQ(errnoUnderDefault(sock(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC)), 0);
  EXPECT_EQ(errnoUnderDefault(sock(AF_UNIX, SOCK_SEQPACKET)), 0);
  EXPECT_EQ(errnoUnderDefault(sock(AF_NETLINK, SOCK_RAW)), EAFNOSUPPORT);
  EXPECT_EQ(errnoUnderDefault(sock(AF_PACKET, SOCK_RAW)), EAFNOSUPPORT);
  EXPECT_EQ(errnoUnderDefault(sock(AF_VSOCK, SOCK_STREAM)), EAFNOSUPPORT);
  EXPECT_EQ(errnoUnderDefault(sock(AF_INET, SOCK_RAW)), EPERM);
  EXPECT_EQ(errnoUnderDefault(sock(AF_INET6, SOCK_PACKET)), EPERM);
  // High bits the kernel truncates away do not turn a refused family into an allowed one.
  EXPECT_NE(errnoUnderDefault(sock((1L << 32) | AF_NETLINK, SOCK_RAW)), 0);
}

TEST(SeccompVictim, IoctlTiocstiAndTioclinuxRefusedOthersPass) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  char c = 'x';
  EXPECT_EQ(errnoUnderDefault([&] { return ::syscall(SYS_ioctl, p[0], TIOCSTI, &c); }), EPERM);
  EXPECT_EQ(errnoUnderDefault([&] { return ::syscall(SYS_ioctl, p[0], TIOCLINUX, &c); }), EPERM);
  // The kernel reads cmd as 32 bits: high garbage must not slip past the check.
  EXPECT_EQ(
      errnoUnderDefault([&] { return ::syscall(SYS_ioctl, p[0], (1UL << 32) | TIOCSTI, &c); }),
      EPERM);
  // Control: another ioctl reaches the kernel, which says a pipe is not a tty.
  winsize ws{};
  EXPECT_EQ(errnoUnderDefault([&] { return ::syscall(SYS_ioctl, p[0], TIOCGWINSZ, &ws); }), ENOTTY);
  int avail = 0;
  EXPECT_EQ(errnoUnderDefault([&] { return ::syscall(SYS_ioctl, p[0], FIONREAD, &avail); }), 0);
  ::close(p[0]);
  ::close(p[1]);
}

TEST(SeccompVictim, PersonalityOnlySafeValues) {
  EXPECT_EQ(errnoUnderDefault([] { return ::syscall(SYS_personality, 0xffffffffUL); }), 0);
  EXPECT_EQ(errnoUnderDefault([] { return ::syscall(SYS_personality, PER_LINUX); }), 0);
  EXPECT_EQ(errnoUnderDefault([] { return ::syscall(SYS_personality, ADDR_NO_RANDOMIZE); }), EPERM);
  EXPECT_EQ(errnoUnderDefault([] { return ::syscall(SYS_personality, READ_IMPLIES_EXEC); }), EPERM);
}

TEST(SeccompVictim, MknodFifoAllowedDevicesRefused) {
  TempDir tmp;
  std::string fifo = tmp.file("fifo"), dev = tmp.file("dev"), reg = tmp.file("reg");
  EXPECT_EQ(errnoUnderDefault([&] { return ::mknod(fifo.c_str(), S_IFIFO | 0600, 0); }), 0);
  EXPECT_EQ(errnoUnderDefault([&] { return ::mknod(reg.c_str(), S_IFREG | 0600, 0); }), 0);
  EXPECT_EQ(errnoUnderDefault([&] { return ::mknod(dev.c_str(), S_IFCHR | 0600, makedev(1, 3)); }),
            EPERM);
  EXPECT_EQ(errnoUnderDefault(
                [&] { return ::mknodat(AT_FDCWD, dev.c_str(), S_IFBLK | 0600, makedev(7, 0)); }),
            EPERM);
}

TEST(SeccompVictim, ForeignArchitecturesAreKilled) {
  // x32 numbering: same audit arch as x86_64, syscall number with bit 30 set.
  Outcome x32 = inVictim(defaultFilter(), [] {
    ::syscall(0x40000000 | SYS_getpid);
    return 0;
  });
  EXPECT_EQ(x32.signal, SIGSYS);
  // The i386 entry point (int 0x80, getpid = 20).
  auto i386_getpid = [] {
    long ret = 20;
    asm volatile("int $0x80" : "+a"(ret) : : "memory");
    return 0;
  };
  // Control, with no filter: some kernels have no 32-bit entry at all (PVM guests fault on
  // int 0x80 with SIGSEGV), and then there is nothing for the filter to catch.
  pid_t pid = ::fork();
  if (pid == 0) {
    struct rlimit no_core = {0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    ::_exit(i386_getpid());
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV) {
    std::cout << "[ note ] this kernel has no i386 entry point (int 0x80 faults unfiltered)\n";
    return;
  }
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "control: int 0x80 unfiltered";
  Outcome i386 = inVictim(defaultFilter(), i386_getpid);
  EXPECT_EQ(i386.signal, SIGSYS);
}

TEST(SeccompOptions, AllowAndDenyByName) {
  auto allow = compileSeccompFilter({.allow = {"ptrace"}});
  ASSERT_TRUE(allow) << allow.error().message();
  EXPECT_EQ(errnoUnder(*allow, [] { return ::syscall(SYS_ptrace, 0 /*TRACEME*/, 0, 0, 0); }), 0);
  auto deny = compileSeccompFilter({.deny = {"uname"}});
  ASSERT_TRUE(deny);
  EXPECT_EQ(errnoUnder(*deny, [] { return ::syscall(SYS_uname, nullptr); }), EPERM);
  // Allowing an argument-filtered syscall lifts its checks; denying refuses it outright.
  auto ioctl_free = compileSeccompFilter({.allow = {"ioctl"}});
  ASSERT_TRUE(ioctl_free);
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  char c = 'x';
  EXPECT_EQ(errnoUnder(*ioctl_free, [&] { return ::syscall(SYS_ioctl, p[0], TIOCSTI, &c); }),
            ENOTTY);
  auto no_socket = compileSeccompFilter({.deny = {"socket"}});
  ASSERT_TRUE(no_socket);
  EXPECT_EQ(errnoUnder(*no_socket, [] { return ::syscall(SYS_socket, AF_UNIX, SOCK_STREAM, 0); }),
            EPERM);
  ::close(p[0]);
  ::close(p[1]);
}

// Runs argv under the default filter with a clean environment; returns exit code and stdout.
struct Ran {
  int status = -1;
  std::string out;
};

Ran runFiltered(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  int out[2];
  EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
  std::vector<char*> a, e;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  for (const auto& s : env) e.push_back(const_cast<char*>(s.c_str()));
  e.push_back(nullptr);
  const std::string& bpf = defaultFilter();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    sock_fprog prog{static_cast<unsigned short>(bpf.size() / sizeof(sock_filter)),
                    reinterpret_cast<sock_filter*>(const_cast<char*>(bpf.data()))};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ::_exit(250);
    if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) ::_exit(251);
    ::execve(a[0], a.data(), e.data());
    ::_exit(127);
  }
  ::close(out[1]);
  Ran r;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) r.out.append(buf, n);
  ::close(out[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

class SeccompPrograms : public ::testing::Test {
 protected:
  std::vector<std::string> env() const {
    return {"PATH=/usr/bin:/bin", "HOME=" + home_.path(), "LANG=C.UTF-8", "MPLBACKEND=Agg",
            "MPLCONFIGDIR=" + home_.path()};
  }
  TempDir home_;
};

TEST_F(SeccompPrograms, Python) {
  Ran r = runFiltered({"/usr/bin/python3", "-c",
                       "import json, os, subprocess, threading, socket;"
                       "t = threading.Thread(target=lambda: None); t.start(); t.join();"
                       "print(subprocess.run(['/bin/echo', 'sub'], capture_output=True).stdout"
                       ".decode().strip(), json.dumps([1]))"},
                      env());
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "sub [1]\n");
}

TEST_F(SeccompPrograms, PythonScientificStack) {
  Ran probe = runFiltered({"/usr/bin/python3", "-c", "import numpy, pandas, matplotlib"}, env());
  auto bare = airlock::testing::runCommand(
      {"/usr/bin/python3", "-c", "import numpy, pandas, matplotlib"}, "", 60, {});
  if (bare.exit_code != 0) GTEST_SKIP() << "numpy/pandas/matplotlib not installed";
  EXPECT_EQ(probe.status, 0) << probe.out;
  Ran plot = runFiltered(
      {"/usr/bin/python3", "-c",
       "import numpy as np, pandas as pd, matplotlib.pyplot as plt, io;"
       "df = pd.DataFrame({'a': np.arange(5)}); fig = plt.figure(); plt.plot(df.a);"
       "b = io.BytesIO(); fig.savefig(b, format='png'); print(df.a.sum(), b.getvalue()[:4])"},
      env());
  EXPECT_EQ(plot.status, 0) << plot.out;
  EXPECT_EQ(plot.out, "10 b'\\x89PNG'\n");
}

TEST_F(SeccompPrograms, Node) {
  if (::access("/usr/bin/node", X_OK) != 0) GTEST_SKIP() << "/usr/bin/node missing";
  Ran r = runFiltered({"/usr/bin/node", "-e",
                       "require('fs').readFileSync('/etc/hostname'); "
                       "setTimeout(() => console.log(1), 1)"},
                      env());
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "1\n");
}

TEST_F(SeccompPrograms, ShellAndCoreutils) {
  Ran r = runFiltered(
      {"/bin/bash", "-c",
       "cd \"$HOME\" && echo $((1+1)) | awk '{print $1*3}' | sed 's/6/six/' | grep six; "
       "ls / >/dev/null && cat /etc/hostname >/dev/null && sort </dev/null && mkfifo f && "
       "rm f && (sleep 0.01 &) && wait && date +%Y >/dev/null && echo ok"},
      env());
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "six\nok\n");
}

// Argument checks are raw BPF whose conditional jumps reach 255 instructions ahead at most. At
// the limit the program decides right (every listed value refused, others fall through to what
// follows); one value more is refused with an error, never emitted with jumps that wrapped.
TEST(SeccompArgChecks, ChecksPastAJumpsReachAreAnErrorNotAWrappedProgram) {
  auto decide = [](const std::vector<sock_filter>& checks, uint32_t value) {
    std::vector<sock_filter> p = checks;
    p.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));  // what follows the checks
    seccomp_data d{};
    d.arch = AUDIT_ARCH_X86_64;
    d.nr = SYS_ioctl;
    d.args[1] = value;
    return runBpf(std::string(reinterpret_cast<const char*>(p.data()), p.size() * sizeof p[0]), d);
  };
  auto check = [](size_t n) {
    ArgValueCheck c{.nr = SYS_ioctl, .arg = 1, .values = {}, .allow_only = false};
    for (uint32_t v = 0; v < n; ++v) c.values.push_back(1000 + v);
    return std::vector<ArgValueCheck>{c};
  };
  // 3 + (2 + 250 + 2) instructions: the architecture check jumps exactly 255 ahead.
  auto at_limit = buildArgValueChecks(AUDIT_ARCH_X86_64, check(250));
  ASSERT_TRUE(at_limit) << at_limit.error().message();
  for (uint32_t v : {1000u, 1125u, 1249u}) {
    auto r = decide(*at_limit, v);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.action, SECCOMP_RET_ERRNO | EPERM) << v;
  }
  for (uint32_t v : {999u, 1250u}) {
    auto r = decide(*at_limit, v);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.action, SECCOMP_RET_ALLOW) << v;
  }
  auto past = buildArgValueChecks(AUDIT_ARCH_X86_64, check(251));
  ASSERT_FALSE(past) << "a program whose jumps cannot reach was emitted";
  EXPECT_NE(past.error().message().find("more than a BPF conditional jump (255 ahead)"),
            std::string::npos)
      << past.error().message();
}

}  // namespace
}  // namespace airlock::sys
