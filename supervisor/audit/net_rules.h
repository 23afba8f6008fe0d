// A sandbox's network policy as the kernel programs see it (bpf/net_policy.bpf.c): a mode and an
// ordered list of CIDR + protocol + port rules, compiled into LPM-trie entries. The rules
// themselves are parsed by the policy library (airlock/policy/net_rule.h). Pure code apart from
// systemResolver: no kernel calls, so every rule and decision name is unit-tested.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/policy/net_rule.h"
#include "airlock/result.h"
#include "airlock_wire.h"

namespace airlock::audit {

// The rule grammar is the policy library's, which validates rules without the supervisor; the
// audit engine and its callers use the same types under these names.
using policy::addressText;
using policy::Cidr;
using policy::NetMode;
using policy::netModeName;
using policy::NetRule;
using policy::parseNetMode;

// The policy library cannot include the kernel programs' header, so its copies of their
// constants are checked here, where both are visible.
static_assert(static_cast<uint8_t>(NetMode::kNone) == AIRLOCK_NET_NONE);
static_assert(static_cast<uint8_t>(NetMode::kAllowlist) == AIRLOCK_NET_ALLOWLIST);
static_assert(static_cast<uint8_t>(NetMode::kOpen) == AIRLOCK_NET_OPEN);
static_assert(policy::kMaxNetRules == AIRLOCK_MAX_RULES);

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
// The decision bpf/net_policy.bpf.c makes, made in user space for a connection a backend's own
// monitoring reports (gVisor's sandboxes, whose connections the programs never see; their link's
// filter, net/link_filter.h, enforces the same order): loopback, the rules in order, the
// protected ranges (the longest match names the refusal), the mode. A v4-mapped IPv6 address is
// decided as the IPv4 address it reaches. `destination` is one address (/32 or /128).
struct NetDecision {
  bool allowed = false;
  uint32_t rule = 0;  // as in NetEvent: a rule index or an airlock_builtin_rule
};
NetDecision decideConnection(const NetPolicy& policy, const Cidr& destination, uint8_t protocol,
                             uint16_t port);

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
