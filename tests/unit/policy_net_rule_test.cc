// The network rule grammar of the policy library: modes, CIDRs, and rules' text form and errors.
#include "airlock/policy/net_rule.h"

#include <gtest/gtest.h>
#include <netinet/in.h>

#include <string>

namespace airlock::policy {
namespace {

TEST(PolicyCidr, ParsesBothFamiliesAndHosts) {
  auto v4 = Cidr::parse("10.1.0.0/16");
  ASSERT_TRUE(v4) << v4.error().message();
  EXPECT_EQ(v4->family, 4);
  EXPECT_EQ(v4->prefix, 16);
  EXPECT_EQ(v4->toString(), "10.1.0.0/16");
  auto host = Cidr::parse("192.0.2.7");
  ASSERT_TRUE(host);
  EXPECT_EQ(host->prefix, 32);
  auto v6 = Cidr::parse("fd00:ec2::254");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->family, 6);
  EXPECT_EQ(v6->prefix, 128);
  EXPECT_EQ(v6->toString(), "fd00:ec2::254/128");
}

TEST(PolicyCidr, RefusesBadInputNamingIt) {
  auto bits = Cidr::parse("10.1.2.3/8");
  ASSERT_FALSE(bits);
  EXPECT_NE(bits.error().message().find("did you mean 10.0.0.0/8"), std::string::npos)
      << bits.error().message();
  auto too_long = Cidr::parse("10.0.0.0/33");
  ASSERT_FALSE(too_long);
  EXPECT_NE(too_long.error().message().find("longer than the address"), std::string::npos);
  EXPECT_FALSE(Cidr::parse("example.com/24"));
  EXPECT_FALSE(Cidr::parse("10.0.0.0/x"));
  EXPECT_FALSE(Cidr::parse("::/129"));
}

TEST(PolicyCidr, Containment) {
  auto outer = *Cidr::parse("10.0.0.0/8");
  auto inner = *Cidr::parse("10.2.0.0/16");
  auto other = *Cidr::parse("11.0.0.0/8");
  auto v6 = *Cidr::parse("::/0");
  EXPECT_TRUE(outer.contains(inner));
  EXPECT_TRUE(outer.contains(outer));
  EXPECT_FALSE(inner.contains(outer));
  EXPECT_FALSE(outer.contains(other));
  EXPECT_FALSE(v6.contains(outer)) << "families never contain each other";
}

TEST(PolicyNetRule, TextFormRoundTrips) {
  auto r = NetRule::parse("allow tcp 203.0.113.0/24 443");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(r->allow);
  EXPECT_EQ(r->protocol, IPPROTO_TCP);
  EXPECT_EQ(r->port_lo, 443);
  EXPECT_EQ(r->port_hi, 443);
  EXPECT_EQ(r->toString(), "allow tcp 203.0.113.0/24 443");
  auto range = NetRule::parse("deny  udp ::/0 5000-5100");
  ASSERT_TRUE(range);
  EXPECT_FALSE(range->allow);
  EXPECT_EQ(range->port_lo, 5000);
  EXPECT_EQ(range->port_hi, 5100);
  auto any = NetRule::parse("allow any 192.0.2.1");
  ASSERT_TRUE(any);
  EXPECT_EQ(any->protocol, 0);
  EXPECT_EQ(any->toString(), "allow any 192.0.2.1/32 *");
}

TEST(PolicyNetRule, BadRulesSayWhatIsWrong) {
  struct Case {
    const char* text;
    const char* says;
  } cases[] = {
      {"permit tcp 10.0.0.0/8", "action must be allow or deny"},
      {"allow sctp 10.0.0.0/8", "protocol must be tcp, udp or any"},
      {"allow tcp 10.0.0.0/8 70000", "not a port"},
      {"allow tcp 10.0.0.0/8 90-80", "runs backwards"},
      {"allow tcp", "must read"},
      {"allow tcp 10.0.0.1/8", "bits set past the prefix"},
      // Not host names: all digits, or characters a name cannot have.
      {"allow tcp 10.0.0.256 80", "10.0.0.256"},
      {"allow tcp 10.0.0 80", "10.0.0"},
      {"allow tcp -bad.example 80", "-bad.example"},
      {"allow tcp bad_name.example 80", "bad_name.example"},
      {"allow tcp example.com. 80", "example.com."},
  };
  for (const auto& c : cases) {
    auto r = NetRule::parse(c.text);
    ASSERT_FALSE(r) << c.text;
    EXPECT_NE(r.error().message().find(c.says), std::string::npos)
        << c.text << " → " << r.error().message();
  }
}

TEST(PolicyNetRule, ModesParse) {
  EXPECT_EQ(*parseNetMode("none"), NetMode::kNone);
  EXPECT_EQ(*parseNetMode("allowlist"), NetMode::kAllowlist);
  EXPECT_EQ(*parseNetMode("open"), NetMode::kOpen);
  EXPECT_FALSE(parseNetMode("closed"));
}

}  // namespace
}  // namespace airlock::policy
