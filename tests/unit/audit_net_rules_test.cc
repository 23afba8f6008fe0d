// Network rules in the kernel's terms: host resolution, rule naming, and the LPM entries the
// kernel reads. Parsing is tested with the policy library (policy_net_rule_test.cc).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include "supervisor/audit/net_rules.h"

namespace airlock::audit {
namespace {

TEST(AuditNetRule, HostNamesParseAndResolveInPlace) {
  auto r = NetRule::parse("allow tcp API.Example.com 443");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->host, "api.example.com");
  EXPECT_TRUE(r->needsResolving());
  EXPECT_EQ(r->toString(), "allow tcp api.example.com 443");

  NetPolicy policy;
  policy.mode = NetMode::kAllowlist;
  policy.rules = {*NetRule::parse("deny tcp 192.0.2.0/24 *"), *r,
                  *NetRule::parse("allow udp 198.51.100.53 53")};
  // Unresolved rules never reach the kernel.
  auto early = compileRules(policy, 1, 1);
  ASSERT_FALSE(early);
  EXPECT_NE(early.error().message().find("api.example.com"), std::string::npos);

  std::vector<std::string> asked;
  Resolver fake = [&](const std::string& host) -> Result<std::vector<Cidr>> {
    asked.push_back(host);
    return std::vector<Cidr>{*Cidr::parse("203.0.113.10"), *Cidr::parse("2001:db8::10")};
  };
  auto resolved = resolveHosts(policy, fake);
  ASSERT_TRUE(resolved) << resolved.error().message();
  EXPECT_EQ(asked, std::vector<std::string>{"api.example.com"});
  ASSERT_EQ(resolved->rules.size(), 4u);
  // In place and in order: first match still wins as written.
  EXPECT_EQ(resolved->rules[0].toString(), "deny tcp 192.0.2.0/24 *");
  EXPECT_EQ(resolved->rules[1].toString(), "allow tcp 203.0.113.10/32 443");
  EXPECT_EQ(resolved->rules[2].toString(), "allow tcp 2001:db8::10/128 443");
  EXPECT_EQ(resolved->rules[3].toString(), "allow udp 198.51.100.53/32 53");
  EXPECT_EQ(describeRule(2, *resolved),
            "rule 2 (allow tcp 2001:db8::10/128 443, an address of api.example.com)");
  EXPECT_TRUE(compileRules(*resolved, 1, 1));
  // The resolved text parses back to the same destination (GET, then PUT, keeps the rules).
  EXPECT_EQ(NetRule::parse(resolved->rules[1].toString())->cidr, resolved->rules[1].cidr);

  Resolver broken = [](const std::string& host) -> Result<std::vector<Cidr>> {
    return fail("cannot resolve host name: Name or service not known", host);
  };
  auto failed = resolveHosts(policy, broken);
  ASSERT_FALSE(failed);
  EXPECT_NE(failed.error().message().find("network rule 1 'allow tcp api.example.com 443'"),
            std::string::npos)
      << failed.error().message();
}

TEST(AuditNetRule, SystemResolverReadsTheHostsFile) {
  // localhost is in every /etc/hosts; no DNS traffic is needed.
  auto addresses = systemResolver()("localhost");
  ASSERT_TRUE(addresses) << addresses.error().message();
  bool loopback = false;
  for (const auto& a : *addresses)
    loopback = loopback || a.toString() == "127.0.0.1/32" || a.toString() == "::1/128";
  EXPECT_TRUE(loopback);
  EXPECT_FALSE(systemResolver()("no-such-host.invalid"));  // RFC 6761: never resolves
}

TEST(AuditRuleNames, BuiltinsAndProtectedRangesAreNamed) {
  NetPolicy policy{NetMode::kAllowlist, {*NetRule::parse("allow tcp 10.0.0.0/8 443")}};
  EXPECT_EQ(ruleId(0), "rule:0");
  EXPECT_EQ(describeRule(0, policy), "rule 0 (allow tcp 10.0.0.0/8 443)");
  EXPECT_EQ(ruleId(AIRLOCK_RULE_MODE_NONE), "mode:none");
  EXPECT_EQ(ruleId(AIRLOCK_RULE_NOT_ALLOWED), "mode:allowlist");
  EXPECT_EQ(ruleId(AIRLOCK_RULE_LOOPBACK), "loopback");
  const auto& ranges = protectedRanges();
  for (size_t i = 0; i < ranges.size(); ++i) {
    auto c = Cidr::parse(ranges[i].cidr);
    ASSERT_TRUE(c) << ranges[i].cidr << ": " << c.error().message();
    uint32_t rule = AIRLOCK_RULE_PROTECTED_BASE + static_cast<uint32_t>(i);
    EXPECT_EQ(ruleId(rule), std::string("protected:") + ranges[i].cidr);
    EXPECT_NE(describeRule(rule, policy).find(ranges[i].why), std::string::npos);
  }
  // The ranges the issue names are in the table.
  for (const char* must : {"169.254.169.254/32", "fd00:ec2::254/128", "10.0.0.0/8", "172.16.0.0/12",
                           "192.168.0.0/16", "fc00::/7", "fe80::/10", "100.64.0.0/10"}) {
    bool found = false;
    for (const auto& r : ranges) found = found || std::string(r.cidr) == must;
    EXPECT_TRUE(found) << must;
  }
}

TEST(AuditCompile, EveryPrefixCarriesAllRulesContainingItInOrder) {
  NetPolicy policy{
      NetMode::kAllowlist,
      {*NetRule::parse("allow tcp 0.0.0.0/0 443"), *NetRule::parse("deny any 10.0.0.0/8"),
       *NetRule::parse("allow tcp 10.1.0.0/16 5432"), *NetRule::parse("allow udp ::/0 53")}};
  auto compiled = compileRules(policy, 7, 1);
  ASSERT_TRUE(compiled) << compiled.error().message();
  ASSERT_EQ(compiled->v4.size(), 3u);
  ASSERT_EQ(compiled->v6.size(), 1u);
  // 10.1.0.0/16 is inside 0/0 and 10/8: a connect to 10.1.2.3 sees rules 0, 1, 2 in order.
  const auto& [key, set] = compiled->v4[2];
  EXPECT_EQ(key.prefixlen, 32u + 16u);
  EXPECT_EQ(ntohl(key.owner), AIRLOCK_RULE_OWNER(7, 1));
  EXPECT_EQ(key.addr[0], 10);
  EXPECT_EQ(key.addr[1], 1);
  ASSERT_EQ(set.count, 3u);
  EXPECT_EQ(set.rules[0].index, 0);
  EXPECT_EQ(set.rules[1].index, 1);
  EXPECT_EQ(set.rules[1].action, AIRLOCK_ACTION_DENY);
  EXPECT_EQ(set.rules[2].index, 2);
  EXPECT_EQ(set.rules[2].port_lo, 5432);
  // 0.0.0.0/0 carries only itself.
  EXPECT_EQ(compiled->v4[0].first.prefixlen, 32u);
  EXPECT_EQ(compiled->v4[0].second.count, 1u);
  EXPECT_EQ(compiled->v6[0].second.rules[0].protocol, IPPROTO_UDP);
}

TEST(AuditCompile, TooManyOverlappingRulesIsAnError) {
  NetPolicy policy{NetMode::kOpen, {}};
  for (int i = 0; i <= AIRLOCK_RULES_PER_PREFIX; ++i) {
    policy.rules.push_back(*NetRule::parse("allow tcp 10.0.0.0/8 " + std::to_string(1000 + i)));
  }
  auto compiled = compileRules(policy, 1, 0);
  ASSERT_FALSE(compiled);
  EXPECT_NE(compiled.error().message().find("overlap 10.0.0.0/8"), std::string::npos)
      << compiled.error().message();
}

TEST(AuditCompile, DuplicatePrefixesShareOneEntry) {
  NetPolicy policy{NetMode::kAllowlist,
                   {*NetRule::parse("allow tcp 192.0.2.0/24 80"),
                    *NetRule::parse("allow tcp 192.0.2.0/24 443")}};
  auto compiled = compileRules(policy, 1, 0);
  ASSERT_TRUE(compiled);
  ASSERT_EQ(compiled->v4.size(), 1u);
  EXPECT_EQ(compiled->v4[0].second.count, 2u);
}

}  // namespace
}  // namespace airlock::audit
