// The network rule grammar: modes, CIDRs and rules as operators write them in a policy
// ("allow tcp 203.0.113.0/24 443"). It lives here, once, so the policy library validates rules
// with their file position without depending on the supervisor, and the supervisor's audit
// engine (supervisor/audit/net_rules.h) compiles the very same parsed rules for the kernel.
// Pure code: no kernel calls and no DNS.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "airlock/result.h"

namespace airlock::policy {

// The values are the kernel programs' AIRLOCK_NET_* (bpf/airlock_wire.h), which the policy
// library does not include; supervisor/audit/net_rules.h static_asserts that they agree, so a
// mode goes into the BPF map as is.
enum class NetMode : uint8_t {
  kNone = 0,       // loopback only
  kAllowlist = 1,  // loopback and what a rule allows
  kOpen = 2,       // all but the protected ranges, unless a rule says otherwise
};

Result<NetMode> parseNetMode(std::string_view text);  // "none" | "allowlist" | "open"
const char* netModeName(NetMode mode);

// How many rules one sandbox holds: AIRLOCK_MAX_RULES of bpf/airlock_wire.h (static_asserted
// beside the modes), so the policy refuses what the kernel tables could not take.
inline constexpr size_t kMaxNetRules = 1024;

// An address prefix. IPv4 is family 4 with 4 bytes used, IPv6 family 6 with 16.
struct Cidr {
  int family = 4;
  std::array<uint8_t, 16> addr{};
  uint8_t prefix = 0;

  // "10.0.0.0/8", "fd00::/8", "192.0.2.1" (a host: /32 or /128). Host bits must be zero.
  static Result<Cidr> parse(std::string_view text);
  std::string toString() const;
  int addressBits() const { return family == 4 ? 32 : 128; }
  // Whether every address of `inner` is in this prefix (same family).
  bool contains(const Cidr& inner) const;
  bool operator==(const Cidr&) const = default;
};

// Renders an address of the given family ("10.0.0.1", "::1").
std::string addressText(int family, const uint8_t* addr);

struct NetRule {
  bool allow = true;
  Cidr cidr;
  // A DNS name in the rule ("allow tcp pypi.org 443"). The supervisor resolves it when the
  // sandbox is created or its rules change (resolveHosts): one rule per address, each keeping
  // the name. Until then `cidr` is unset and the rule cannot be compiled.
  std::string host;
  bool resolved = false;  // cidr holds one of host's addresses
  uint8_t protocol = 0;   // 0 any, 6 tcp, 17 udp
  uint16_t port_lo = 0;
  uint16_t port_hi = 65535;

  // "allow tcp 10.0.0.0/8 443", "deny udp ::/0 53", "allow any 192.0.2.7 8000-8100",
  // "allow tcp 203.0.113.0/24 *", "allow tcp api.example.com 443". The form docs/audit.md
  // documents and the policy can embed.
  static Result<NetRule> parse(std::string_view text);
  // The rule as written; a resolved host rule reads "allow tcp 93.184.216.34/32 443", which
  // parses back to the same destination.
  std::string toString() const;
  bool needsResolving() const { return !host.empty() && !resolved; }
};

}  // namespace airlock::policy
