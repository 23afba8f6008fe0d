// The network policy as the nftables chain on a sandbox's link (backends with their own network
// stack): same order of decisions as the eBPF programs, every path ending in a verdict. That nft
// accepts the text and the kernel enforces it is tested with root (net_test.cc).
#include <gtest/gtest.h>

#include "supervisor/net/link_filter.h"

namespace airlock::net {
namespace {

audit::NetPolicy policyOf(audit::NetMode mode, std::initializer_list<const char*> rules) {
  audit::NetPolicy p;
  p.mode = mode;
  for (const char* r : rules) {
    auto rule = audit::NetRule::parse(r);
    EXPECT_TRUE(rule) << r;
    if (rule) p.rules.push_back(*rule);
  }
  return p;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
    out.push_back(text.substr(start, nl - start));
  EXPECT_EQ(start, text.size()) << "the last statement ends with a newline";
  return out;
}

TEST(LinkFilter, RulesComeFirstInOrderThenProtectedRangesThenTheMode) {
  auto got = lines(linkFilterRules(policyOf(
      audit::NetMode::kAllowlist,
      {"allow tcp 203.0.113.0/24 443", "deny udp 10.1.2.3 53", "allow any 2001:db8::/32 8000-8100",
       "allow any 192.0.2.7 *", "allow tcp 10.0.0.0/8 *"})));
  ASSERT_EQ(got.size(), 8u);
  EXPECT_EQ(got[0], "ip daddr 203.0.113.0/24 meta l4proto tcp th dport 443 accept");
  EXPECT_EQ(got[1], "ip daddr 10.1.2.3/32 meta l4proto udp th dport 53 jump refuse");
  EXPECT_EQ(got[2], "ip6 daddr 2001:db8::/32 meta l4proto { tcp, udp } th dport 8000-8100 accept");
  // Any protocol on every port: ICMP too, as nothing narrows it.
  EXPECT_EQ(got[3], "ip daddr 192.0.2.7/32 accept");
  // A rule may open a protected range: it comes before them.
  EXPECT_EQ(got[4], "ip daddr 10.0.0.0/8 meta l4proto tcp accept");
  EXPECT_TRUE(got[5].starts_with("ip daddr { 0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10, 127.0.0.0/8, "))
      << got[5];
  EXPECT_TRUE(got[5].ends_with(" } jump refuse"));
  EXPECT_TRUE(got[6].starts_with("ip6 daddr { ")) << got[6];
  EXPECT_EQ(got[7], "jump refuse") << "allowlist: what no rule allows is refused";
}

TEST(LinkFilter, ProtectedRangesCoverMetadataOnceWithoutOverlaps) {
  auto got = lines(linkFilterRules(policyOf(audit::NetMode::kOpen, {})));
  ASSERT_EQ(got.size(), 3u);
  // 169.254.169.254/32 lies in 169.254.0.0/16 (nft refuses overlapping set elements); the outer
  // range refuses it.
  EXPECT_NE(got[0].find("169.254.0.0/16"), std::string::npos) << got[0];
  EXPECT_EQ(got[0].find("169.254.169.254"), std::string::npos) << got[0];
  EXPECT_NE(got[1].find("fc00::/7"), std::string::npos) << got[1];
  EXPECT_NE(got[1].find("fe80::/10"), std::string::npos) << got[1];
  EXPECT_EQ(got[1].find("fd00:ec2::254"), std::string::npos) << "inside fc00::/7";
  EXPECT_EQ(got[2], "accept") << "open: the rest of the internet";
}

TEST(LinkFilter, ModeNoneRefusesEverything) {
  auto got = lines(linkFilterRules(policyOf(audit::NetMode::kNone, {})));
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.back(), "jump refuse");
}

TEST(LinkFilter, ChainNamesAreNftIdentifiers) {
  EXPECT_EQ(linkFilterChain("al-0123abcd"), "filter_al_0123abcd");
  EXPECT_EQ(linkFilterChain("x.y-z"), "filter_x_y_z");
}

}  // namespace
}  // namespace airlock::net
