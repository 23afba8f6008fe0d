// The network rule grammar (net_rule.h): parsing and printing of modes, CIDRs and rules.
#include "airlock/policy/net_rule.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <charconv>
#include <string>
#include <vector>

namespace airlock::policy {

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

}  // namespace airlock::policy
