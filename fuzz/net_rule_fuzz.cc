// Network rules ("allow tcp 10.0.0.0/8 443", policy/net_rule.cc): the policy holds them, and API
// clients send their own in PUT /v1/sandboxes/{sb}/network, so the grammar meets tenants' text.
// Each line of the input is one rule; the same text also goes to Cidr::parse.
//
// Invariants checked: a parsed rule prints (toString) as text that parses back to the same rule,
// and a parsed prefix prints as one that parses back equal; port ranges are ordered; a prefix
// length fits its family.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "airlock/policy/net_rule.h"
#include "support/fuzz_check.h"

namespace policy = airlock::policy;

namespace {

bool sameRule(const policy::NetRule& a, const policy::NetRule& b) {
  return a.allow == b.allow && a.cidr == b.cidr && a.host == b.host && a.resolved == b.resolved &&
         a.protocol == b.protocol && a.port_lo == b.port_lo && a.port_hi == b.port_hi;
}

void checkLine(std::string_view line) {
  if (auto rule = policy::NetRule::parse(line)) {
    FUZZ_CHECK(rule->port_lo <= rule->port_hi);
    FUZZ_CHECK(rule->cidr.prefix <= rule->cidr.addressBits());
    const std::string text = rule->toString();
    auto again = policy::NetRule::parse(text);
    FUZZ_CHECK(again.has_value());
    FUZZ_CHECK(sameRule(*rule, *again));
  } else {
    FUZZ_CHECK(!rule.error().message().empty());
  }
  if (auto cidr = policy::Cidr::parse(line)) {
    FUZZ_CHECK(cidr->prefix <= cidr->addressBits());
    FUZZ_CHECK(cidr->contains(*cidr));
    auto again = policy::Cidr::parse(cidr->toString());
    FUZZ_CHECK(again.has_value());
    FUZZ_CHECK(*again == *cidr);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    checkLine(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return 0;
}
