#include "supervisor/sys/seccomp_arg_checks.h"

#include <linux/seccomp.h>

#include <bit>
#include <cerrno>
#include <cstddef>
#include <string>

namespace airlock::sys {
namespace {

uint32_t argLowOffset(unsigned arg) {
  uint32_t off = offsetof(struct seccomp_data, args) + 8 * arg;
  if constexpr (std::endian::native == std::endian::big) off += 4;
  return off;
}

}  // namespace

Result<std::vector<sock_filter>> buildArgValueChecks(uint32_t audit_arch,
                                                     const std::vector<ArgValueCheck>& checks) {
  std::vector<sock_filter> p;
  if (checks.empty()) return p;
  // Lengths first, so forward jumps can be computed: group = jeq nr, ld arg, values, 2 returns.
  size_t total = 3;
  for (const auto& c : checks) total += 2 + c.values.size() + 2;
  // Every conditional jump below is shorter than the whole program less its first two
  // instructions (the longest, from the architecture check to the end).
  if (total - 2 > 255)
    return fail("seccomp argument checks: " + std::to_string(total) +
                " instructions, more than a BPF conditional jump (255 ahead) can cross");
  auto ret = [](uint32_t action) { return sock_filter BPF_STMT(BPF_RET | BPF_K, action); };
  p.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
  p.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, audit_arch, 0, static_cast<uint8_t>(total - 2)));
  p.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
  const uint32_t eperm = SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA);
  for (const auto& c : checks) {
    size_t n = c.values.size();
    p.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<uint32_t>(c.nr), 0,
                         static_cast<uint8_t>(1 + n + 2)));
    p.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, argLowOffset(c.arg)));
    for (size_t i = 0; i < n; ++i) {
      // Match → the last instruction of the group (n - i - 1 values, then one return, ahead).
      p.push_back(
          BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, c.values[i], static_cast<uint8_t>(n - i - 1 + 1), 0));
    }
    if (c.allow_only) {
      p.push_back(ret(eperm));
      p.push_back(ret(SECCOMP_RET_ALLOW));
    } else {
      size_t after = p.size() + 1;  // the jump's own pc + 1
      p.push_back(BPF_STMT(BPF_JMP | BPF_JA, static_cast<uint32_t>(total - after)));
      p.push_back(ret(eperm));
    }
  }
  return p;
}

}  // namespace airlock::sys
