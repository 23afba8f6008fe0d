// The sandbox's seccomp program: an allowlist compiled in the supervisor, installed by the child as
// its last step before execve (prctl(PR_SET_NO_NEW_PRIVS) + seccomp(SECCOMP_SET_MODE_FILTER)).
//
// Unknown syscalls get ENOSYS (libc falls back from newer calls); the dangerous ones Docker also
// refuses get EPERM, each with a reason; a foreign architecture (i386, x32) kills the process.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "airlock/result.h"

namespace airlock::sys {

// Argument checks that go with some allowed syscalls (x86_64 argument order).
enum class SeccompArgFilter : uint8_t {
  kNone,
  kCloneWithoutNamespaces,  // clone: EPERM when flags hold any CLONE_NEW*
  kSocketFamilies,          // socket: AF_UNIX, AF_INET(6) stream/dgram; others refused
  kMknodNoDevices,          // mknod/mknodat: regular files, FIFOs, sockets; EPERM for devices
  kIoctlNoTiocsti,          // ioctl: EPERM for TIOCSTI and TIOCLINUX
  kPersonalitySafe,         // personality: only Docker's safe values, else EPERM
};

struct SyscallRule {
  const char* name;
  int errnum;  // 0 = allow
  const char* reason;
  SeccompArgFilter filter = SeccompArgFilter::kNone;  // refines an allow (errnum 0)
};

// The default profile, as data. Syscalls not listed get ENOSYS.
std::span<const SyscallRule> defaultSeccompRules();

// Extra allow/deny by name, from policy and plugins. An allowed name loses its argument checks;
// a denied one returns EPERM. Unknown names are an error naming the syscall.
struct SeccompOptions {
  std::vector<std::string> allow;
  std::vector<std::string> deny;
};

// The raw struct sock_filter array for the native architecture, ready for
// seccomp(SECCOMP_SET_MODE_FILTER) (size() / sizeof(sock_filter) instructions). The default
// profile comes precompiled (build time); other option sets are compiled once per process.
Result<std::string> compileSeccompFilter(const SeccompOptions& opts);

// How the program is laid out. kRangeTree: the plain rules as a binary search over ranges of
// syscall numbers, libseccomp's program only for the syscalls with argument checks (≈ 1/3 the
// instructions, which the kernel JIT-compiles for every process). kLibseccompOnly: every rule
// through libseccomp; the reference the tests hold the range tree to, decision for decision.
enum class SeccompCodegen : uint8_t { kRangeTree, kLibseccompOnly };

// Always compiles with libseccomp (≈ 5 ms); what compileSeccompFilter caches.
Result<std::string> buildSeccompFilter(const SeccompOptions& opts,
                                       SeccompCodegen codegen = SeccompCodegen::kRangeTree);

}  // namespace airlock::sys
