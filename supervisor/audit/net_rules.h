// A sandbox's network policy as the kernel programs see it (bpf/net_policy.bpf.c): a mode and an
// ordered list of CIDR + protocol + port rules, compiled into LPM-trie entries. Pure code: no
// kernel calls, so every rule and decision name is unit-tested.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/result.h"
#include "airlock_wire.h"

namespace airlock::audit {

enum class NetMode : uint8_t {
  kNone = AIRLOCK_NET_NONE,            // loopback only
  kAllowlist = AIRLOCK_NET_ALLOWLIST,  // loopback and what a rule allows
  kOpen = AIRLOCK_NET_OPEN,            // all but the protected ranges, unless a rule says otherwise
};

Result<NetMode> parseNetMode(std::string_view text);  // "none" | "allowlist" | "open"
const char* netModeName(NetMode mode);

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

struct NetPolicy {
  NetMode mode = NetMode::kNone;
  std::vector<NetRule> rules;  // first match wins; indices are what events report
};

// Resolves a host name to its addresses (each a /32 or /128), or fails naming the host.
using Resolver = std::function<Result<std::vector<Cidr>>(const std::string& host)>;
// getaddrinfo() on the supervisor's host (its /etc/hosts and DNS), deduplicated, in the order
// the resolver returned them.
Resolver systemResolver();
// Every host rule replaced, in place, by one rule per address of its host (in order, so
// first-match-wins is unchanged); other rules are kept as they are. Fails naming the rule and
// host that did not resolve.
Result<NetPolicy> resolveHosts(const NetPolicy& policy, const Resolver& resolve);

// What the programs refuse in every mode unless a rule allows it: private, link-local, shared
// (CGNAT) and cloud metadata ranges, and the loopback of the supervisor's own network namespace
// (a sandbox's private loopback is always allowed before this table is consulted). The longest
// matching range names the refusal. Index i is reported as AIRLOCK_RULE_PROTECTED_BASE + i.
struct ProtectedRange {
  const char* cidr;
  const char* why;
};
const std::vector<ProtectedRange>& protectedRanges();

// A decision's rule as people read it: "rule 2 (allow tcp 10.0.0.0/8 443)",
// "protected range 169.254.0.0/16 (link-local, cloud metadata)", "mode none (loopback only)".
std::string describeRule(uint32_t rule, const NetPolicy& policy);
// A stable short id for logs and JSON: "rule:2", "protected:169.254.0.0/16", "mode:none",
// "loopback", "no-sandbox".
std::string ruleId(uint32_t rule);

// LPM-trie contents for one sandbox slot and rule generation.
struct CompiledRules {
  std::vector<std::pair<airlock_rule_key_v4, airlock_rule_set>> v4;
  std::vector<std::pair<airlock_rule_key_v6, airlock_rule_set>> v6;
};
// One entry per distinct prefix; each carries every rule whose CIDR contains that prefix, in rule
// order (so the longest match sees all rules that match the address). Fails naming the rule when
// there are too many rules or too many overlap one prefix.
Result<CompiledRules> compileRules(const NetPolicy& policy, uint32_t slot, uint32_t generation);

}  // namespace airlock::audit
