// Network rules as the kernel sees them: naming, host resolution, and compilation into the LPM
// tries of net_policy.bpf.c. Parsing is the policy library's (policy/net_rule.cc).
#include "supervisor/audit/net_rules.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

namespace airlock::audit {

const std::vector<ProtectedRange>& protectedRanges() {
  static const std::vector<ProtectedRange> ranges = {
      {"0.0.0.0/8", "this network: 0.0.0.0 reaches the local host"},
      {"10.0.0.0/8", "private network"},
      {"100.64.0.0/10", "shared address space (carrier-grade NAT)"},
      {"127.0.0.0/8", "loopback of the supervisor's network namespace (host services)"},
      {"169.254.0.0/16", "link-local"},
      {"169.254.169.254/32", "cloud metadata service"},
      {"172.16.0.0/12", "private network"},
      {"192.168.0.0/16", "private network"},
      {"::/128", "unspecified address: reaches the local host"},
      {"::1/128", "loopback of the supervisor's network namespace (host services)"},
      {"fc00::/7", "unique local addresses (private network)"},
      {"fd00:ec2::254/128", "cloud metadata service (IPv6)"},
      {"fe80::/10", "link-local"},
  };
  return ranges;
}

std::string ruleId(uint32_t rule) {
  if (rule < AIRLOCK_MAX_RULES) return "rule:" + std::to_string(rule);
  switch (rule) {
    case AIRLOCK_RULE_LOOPBACK:
      return "loopback";
    case AIRLOCK_RULE_MODE_NONE:
      return "mode:none";
    case AIRLOCK_RULE_NOT_ALLOWED:
      return "mode:allowlist";
    case AIRLOCK_RULE_MODE_OPEN:
      return "mode:open";
    case AIRLOCK_RULE_NO_SANDBOX:
      return "no-sandbox";
    default:
      break;
  }
  const auto& ranges = protectedRanges();
  if (rule >= AIRLOCK_RULE_PROTECTED_BASE && rule - AIRLOCK_RULE_PROTECTED_BASE < ranges.size()) {
    return std::string("protected:") + ranges[rule - AIRLOCK_RULE_PROTECTED_BASE].cidr;
  }
  return "unknown:" + std::to_string(rule);
}

std::string describeRule(uint32_t rule, const NetPolicy& policy) {
  if (rule < AIRLOCK_MAX_RULES) {
    std::string s = "rule " + std::to_string(rule);
    if (rule < policy.rules.size()) {
      const NetRule& r = policy.rules[rule];
      s += " (" + r.toString() + (r.resolved ? ", an address of " + r.host : "") + ")";
    }
    return s;
  }
  switch (rule) {
    case AIRLOCK_RULE_LOOPBACK:
      return "loopback of the sandbox's own network namespace (always allowed)";
    case AIRLOCK_RULE_MODE_NONE:
      return "mode none (loopback only)";
    case AIRLOCK_RULE_NOT_ALLOWED:
      return "mode allowlist: no rule allows this destination";
    case AIRLOCK_RULE_MODE_OPEN:
      return "mode open";
    case AIRLOCK_RULE_NO_SANDBOX:
      return "socket of a sandbox cgroup with no sandbox attached (refused)";
    default:
      break;
  }
  const auto& ranges = protectedRanges();
  if (rule >= AIRLOCK_RULE_PROTECTED_BASE && rule - AIRLOCK_RULE_PROTECTED_BASE < ranges.size()) {
    const auto& r = ranges[rule - AIRLOCK_RULE_PROTECTED_BASE];
    return std::string("protected range ") + r.cidr + " (" + r.why +
           "; refused in every mode unless a rule allows it)";
  }
  return "unknown rule " + std::to_string(rule);
}

Resolver systemResolver() {
  return [](const std::string& host) -> Result<std::vector<Cidr>> {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;  // one entry per address, not one per socket type
    addrinfo* list = nullptr;
    int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &list);
    if (rc != 0) return fail(std::string("cannot resolve host name: ") + ::gai_strerror(rc), host);
    std::vector<Cidr> out;
    for (addrinfo* a = list; a != nullptr; a = a->ai_next) {
      Cidr c;
      if (a->ai_family == AF_INET) {
        c.family = 4;
        c.prefix = 32;
        std::memcpy(c.addr.data(), &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, 4);
      } else if (a->ai_family == AF_INET6) {
        c.family = 6;
        c.prefix = 128;
        std::memcpy(c.addr.data(), &reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr, 16);
      } else {
        continue;
      }
      if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
    }
    ::freeaddrinfo(list);
    if (out.empty()) return fail("host name has no IPv4 or IPv6 address", host);
    return out;
  };
}

Result<NetPolicy> resolveHosts(const NetPolicy& policy, const Resolver& resolve) {
  NetPolicy out;
  out.mode = policy.mode;
  for (size_t i = 0; i < policy.rules.size(); ++i) {
    const NetRule& rule = policy.rules[i];
    if (!rule.needsResolving()) {
      out.rules.push_back(rule);
      continue;
    }
    auto addresses = resolve(rule.host);
    if (!addresses)
      return Unexpected(
          std::move(addresses.error())
              .wrap("network rule " + std::to_string(i) + " '" + rule.toString() + "'"));
    for (const Cidr& address : *addresses) {
      NetRule one = rule;
      one.cidr = address;
      one.resolved = true;
      out.rules.push_back(std::move(one));
    }
  }
  return out;
}

Result<CompiledRules> compileRules(const NetPolicy& policy, uint32_t slot, uint32_t generation) {
  for (const auto& r : policy.rules)
    if (r.needsResolving())
      return fail("network rule '" + r.toString() + "' names a host that was not resolved");
  if (policy.rules.size() > AIRLOCK_MAX_RULES) {
    return fail("network policy has " + std::to_string(policy.rules.size()) + " rules; at most " +
                std::to_string(AIRLOCK_MAX_RULES) + " are supported");
  }
  const uint32_t owner = htonl(AIRLOCK_RULE_OWNER(slot, generation));
  // Distinct prefixes in first-seen order (std::map for dedup by family/prefix/address).
  std::vector<Cidr> prefixes;
  std::map<std::tuple<int, int, std::array<uint8_t, 16>>, bool> seen;
  for (const auto& r : policy.rules) {
    auto key = std::make_tuple(r.cidr.family, int{r.cidr.prefix}, r.cidr.addr);
    if (seen.emplace(key, true).second) prefixes.push_back(r.cidr);
  }
  CompiledRules out;
  for (const auto& p : prefixes) {
    airlock_rule_set set{};
    for (size_t i = 0; i < policy.rules.size(); ++i) {
      const NetRule& r = policy.rules[i];
      if (!r.cidr.contains(p)) continue;
      if (set.count == AIRLOCK_RULES_PER_PREFIX) {
        return fail("network policy: more than " + std::to_string(AIRLOCK_RULES_PER_PREFIX) +
                        " rules overlap " + p.toString() + " (rule " + std::to_string(i) +
                        " is one too many)",
                    r.toString());
      }
      set.rules[set.count++] = {
          .index = static_cast<uint16_t>(i),
          .action = static_cast<uint8_t>(r.allow ? AIRLOCK_ACTION_ALLOW : AIRLOCK_ACTION_DENY),
          .protocol = r.protocol,
          .port_lo = r.port_lo,
          .port_hi = r.port_hi};
    }
    if (p.family == 4) {
      airlock_rule_key_v4 key{};
      key.prefixlen = 32u + p.prefix;
      key.owner = owner;
      std::memcpy(key.addr, p.addr.data(), 4);
      out.v4.emplace_back(key, set);
    } else {
      airlock_rule_key_v6 key{};
      key.prefixlen = 32u + p.prefix;
      key.owner = owner;
      std::memcpy(key.addr, p.addr.data(), 16);
      out.v6.emplace_back(key, set);
    }
  }
  return out;
}

NetDecision decideConnection(const NetPolicy& policy, const Cidr& destination, uint8_t protocol,
                             uint16_t port) {
  Cidr to = destination;
  static constexpr uint8_t kV4Mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (to.family == 6 && std::equal(kV4Mapped, kV4Mapped + 12, to.addr.begin())) {
    Cidr v4;
    v4.family = 4;
    std::copy(to.addr.begin() + 12, to.addr.begin() + 16, v4.addr.begin());
    v4.prefix = 32;
    to = v4;
  } else {
    to.prefix = static_cast<uint8_t>(to.addressBits());
  }
  const bool loopback = to.family == 4 ? to.addr[0] == 127
                                       : std::all_of(to.addr.begin(), to.addr.begin() + 15,
                                                     [](uint8_t b) { return b == 0; }) &&
                                             to.addr[15] == 1;
  if (loopback) return {true, AIRLOCK_RULE_LOOPBACK};
  for (size_t i = 0; i < policy.rules.size(); ++i) {
    const NetRule& r = policy.rules[i];
    if (r.needsResolving() || r.cidr.family != to.family || !r.cidr.contains(to)) continue;
    if (r.protocol != 0 && r.protocol != protocol) continue;
    if (port < r.port_lo || port > r.port_hi) continue;
    return {r.allow, static_cast<uint32_t>(i)};
  }
  const auto& ranges = protectedRanges();
  int best = -1;
  for (size_t i = 0; i < ranges.size(); ++i) {
    auto range = Cidr::parse(ranges[i].cidr);
    if (!range || range->family != to.family || !range->contains(to)) continue;
    if (best < 0 || range->prefix > Cidr::parse(ranges[static_cast<size_t>(best)].cidr)->prefix)
      best = static_cast<int>(i);
  }
  if (best >= 0) return {false, AIRLOCK_RULE_PROTECTED_BASE + static_cast<uint32_t>(best)};
  if (policy.mode == NetMode::kOpen) return {true, AIRLOCK_RULE_MODE_OPEN};
  if (policy.mode == NetMode::kAllowlist) return {false, AIRLOCK_RULE_NOT_ALLOWED};
  return {false, AIRLOCK_RULE_MODE_NONE};
}

}  // namespace airlock::audit
