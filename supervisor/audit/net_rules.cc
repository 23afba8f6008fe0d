// Network rules: parsing, naming, and compilation into the LPM tries of net_policy.bpf.c.
#include "supervisor/audit/net_rules.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <algorithm>
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

namespace {

// An RFC 1123 host name: dot-separated labels of letters, digits and '-' (not at either end),
// 1-63 characters each, 253 in all, with a letter somewhere so that a mistyped address
// ("10.0.0.256", "10.0.0") is reported as an address error rather than looked up.
bool isHostName(std::string_view s) {
  if (s.empty() || s.size() > 253 || s.back() == '.') return false;
  bool letter = false;
  size_t label = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '.') {
      if (label == 0 || s[i - 1] == '-') return false;
      label = 0;
      continue;
    }
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!alpha && !(c >= '0' && c <= '9') && c != '-') return false;
    if (c == '-' && label == 0) return false;
    if (++label > 63) return false;
    letter = letter || alpha;
  }
  return letter && s.back() != '-';
}

std::string toLower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

}  // namespace

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
  if (isHostName(w[2])) {
    r.host = toLower(w[2]);
  } else {
    auto cidr = Cidr::parse(w[2]);
    if (!cidr) return Unexpected(std::move(cidr.error()).wrap("network rule '" + whole + "'"));
    r.cidr = *cidr;
  }
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
  s += needsResolving() ? host : cidr.toString();
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

}  // namespace airlock::audit
