// Network rules: parsing, naming, and compilation into the LPM tries of net_policy.bpf.c.
#include "supervisor/audit/net_rules.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>
#include <cstring>
#include <map>
#include <tuple>

namespace airlock::audit {

namespace {

std::vector<std::string_view> words(std::string_view text) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    size_t start = i;
    while (i < text.size() && text[i] != ' ' && text[i] != '\t') ++i;
    if (i > start) out.push_back(text.substr(start, i - start));
  }
  return out;
}

Result<uint16_t> parsePort(std::string_view text, std::string_view whole) {
  unsigned v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v > 65535) {
    return fail("network rule: '" + std::string(text) + "' is not a port (0-65535)",
                std::string(whole));
  }
  return static_cast<uint16_t>(v);
}

}  // namespace

Result<NetMode> parseNetMode(std::string_view text) {
  if (text == "none") return NetMode::kNone;
  if (text == "allowlist") return NetMode::kAllowlist;
  if (text == "open") return NetMode::kOpen;
  return fail("network mode must be none, allowlist or open", std::string(text));
}

const char* netModeName(NetMode mode) {
  switch (mode) {
    case NetMode::kNone:
      return "none";
    case NetMode::kAllowlist:
      return "allowlist";
    case NetMode::kOpen:
      return "open";
  }
  return "?";
}

std::string addressText(int family, const uint8_t* addr) {
  char buf[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(family == 4 ? AF_INET : AF_INET6, addr, buf, sizeof buf);
  return buf;
}

Result<Cidr> Cidr::parse(std::string_view text) {
  std::string whole(text);
  std::string host = whole;
  int prefix = -1;
  if (auto slash = whole.find('/'); slash != std::string::npos) {
    host = whole.substr(0, slash);
    std::string_view len = std::string_view(whole).substr(slash + 1);
    auto [p, ec] = std::from_chars(len.data(), len.data() + len.size(), prefix);
    if (ec != std::errc() || p != len.data() + len.size() || prefix < 0) {
      return fail("CIDR: prefix length after '/' is not a number", whole);
    }
  }
  Cidr c;
  if (::inet_pton(AF_INET, host.c_str(), c.addr.data()) == 1) {
    c.family = 4;
  } else if (::inet_pton(AF_INET6, host.c_str(), c.addr.data()) == 1) {
    c.family = 6;
  } else {
    return fail("CIDR: not an IPv4 or IPv6 address", whole);
  }
  if (prefix < 0) prefix = c.addressBits();
  if (prefix > c.addressBits()) {
    return fail("CIDR: prefix length is longer than the address (" +
                    std::to_string(c.addressBits()) + " bits)",
                whole);
  }
  c.prefix = static_cast<uint8_t>(prefix);
  for (int bit = prefix; bit < c.addressBits(); ++bit) {
    if (c.addr[bit / 8] & (0x80 >> (bit % 8))) {
      return fail(
          "CIDR: address has bits set past the prefix length (did you mean " +
              [&] {
                Cidr fixed = c;
                for (int b = prefix; b < c.addressBits(); ++b)
                  fixed.addr[b / 8] &= static_cast<uint8_t>(~(0x80 >> (b % 8)));
                return fixed.toString();
              }() +
              "?)",
          whole);
    }
  }
  return c;
}

std::string Cidr::toString() const {
  return addressText(family, addr.data()) + "/" + std::to_string(prefix);
}

bool Cidr::contains(const Cidr& inner) const {
  if (family != inner.family || prefix > inner.prefix) return false;
  for (int bit = 0; bit < prefix; ++bit) {
    uint8_t mask = static_cast<uint8_t>(0x80 >> (bit % 8));
    if ((addr[bit / 8] & mask) != (inner.addr[bit / 8] & mask)) return false;
  }
  return true;
}

Result<NetRule> NetRule::parse(std::string_view text) {
  std::string whole(text);
  auto w = words(text);
  if (w.size() < 3 || w.size() > 4) {
    return fail("network rule must read '<allow|deny> <tcp|udp|any> <cidr> [port|lo-hi|*]'", whole);
  }
  NetRule r;
  if (w[0] == "allow") {
    r.allow = true;
  } else if (w[0] == "deny") {
    r.allow = false;
  } else {
    return fail("network rule: action must be allow or deny, not '" + std::string(w[0]) + "'",
                whole);
  }
  if (w[1] == "tcp") {
    r.protocol = IPPROTO_TCP;
  } else if (w[1] == "udp") {
    r.protocol = IPPROTO_UDP;
  } else if (w[1] == "any") {
    r.protocol = 0;
  } else {
    return fail("network rule: protocol must be tcp, udp or any, not '" + std::string(w[1]) + "'",
                whole);
  }
  auto cidr = Cidr::parse(w[2]);
  if (!cidr) return Unexpected(std::move(cidr.error()).wrap("network rule '" + whole + "'"));
  r.cidr = *cidr;
  if (w.size() == 4 && w[3] != "*") {
    std::string_view ports = w[3];
    auto dash = ports.find('-');
    AIRLOCK_TRY_CTX(lo, parsePort(ports.substr(0, dash), whole), "network rule");
    uint16_t hi = lo;
    if (dash != std::string_view::npos) {
      AIRLOCK_TRY_CTX(h, parsePort(ports.substr(dash + 1), whole), "network rule");
      hi = h;
    }
    if (hi < lo) return fail("network rule: port range runs backwards", whole);
    r.port_lo = lo;
    r.port_hi = hi;
  }
  return r;
}

std::string NetRule::toString() const {
  std::string s = allow ? "allow " : "deny ";
  s += protocol == IPPROTO_TCP ? "tcp " : protocol == IPPROTO_UDP ? "udp " : "any ";
  s += cidr.toString();
  if (port_lo == 0 && port_hi == 65535) return s + " *";
  s += " " + std::to_string(port_lo);
  if (port_hi != port_lo) s += "-" + std::to_string(port_hi);
  return s;
}

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
    if (rule < policy.rules.size()) s += " (" + policy.rules[rule].toString() + ")";
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

Result<CompiledRules> compileRules(const NetPolicy& policy, uint32_t slot, uint32_t generation) {
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

}  // namespace airlock::audit
