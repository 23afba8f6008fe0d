// Argument checks as raw BPF, run in front of libseccomp's program. libseccomp drops conditional
// rules on a syscall that also has an unconditional one, so "allow ioctl except TIOCSTI" cannot
// be said there. The kernel truncates these arguments to 32 bits (unsigned int cmd), so only the
// low half is compared, or high bits would slip past.
#pragma once

#include <linux/filter.h>

#include <cstdint>
#include <vector>

#include "airlock/result.h"

namespace airlock::sys {

// One syscall's check on the low 32 bits of one argument.
struct ArgValueCheck {
  int nr;
  unsigned arg;
  std::vector<uint32_t> values;
  bool allow_only;  // true: values allowed, others EPERM; false: values EPERM, others go on
};

// The checks as one program for `audit_arch` that falls through to what follows it for every
// other syscall and architecture. A BPF conditional jump reaches at most 255 instructions ahead:
// checks too long for that are an error, never a program whose jumps wrapped around.
Result<std::vector<sock_filter>> buildArgValueChecks(uint32_t audit_arch,
                                                     const std::vector<ArgValueCheck>& checks);

}  // namespace airlock::sys
