// [packages] and [profiles.<name>.packages]: parsing, the rule grammar and version order, the
// errors that name the key and entry, relaxations.
#include <gtest/gtest.h>

#include <algorithm>

#include "airlock/policy/keys.h"
#include "airlock/policy/package_rule.h"
#include "airlock/policy/policy.h"

namespace airlock::policy {
namespace {

Result<Policy> parseText(const std::string& text) { return parse("schema = 1\n" + text, "t.toml"); }

std::string errorOf(const std::string& text) {
  auto p = parseText(text);
  return p ? std::string("(parsed)") : p.error().message();
}

TEST(PolicyPackages, ReadsTheProfileAndTheHostTables) {
  auto p = parseText(R"(
[packages]
pypi_index = "http://127.0.0.1:3999/simple/"
npm_registry = "https://npm.example/"
cache_dir = "/srv/pkgcache"
port = 8000
[profiles.default.packages]
allow = ["pandas", "requests>=2,<3", "@types/*", "npm:left-pad"]
deny = ["evil*"]
max_file_mb = 20
sdists = true
[profiles.default.packages.pins]
tqdm = "sha256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
[profiles.small]
extends = "default"
)");
  ASSERT_TRUE(p.has_value()) << p.error().message();
  const Packages& k = p->profiles.at("default").packages;
  EXPECT_TRUE(k.enabled());
  EXPECT_EQ(k.allow.size(), 4u);
  EXPECT_EQ(k.deny, (std::vector<std::string>{"evil*"}));
  EXPECT_EQ(k.max_file_mb, 20u);
  EXPECT_EQ(k.max_sandbox_mb, 1024u);
  EXPECT_TRUE(k.sdists);
  EXPECT_EQ(k.pins.size(), 1u);
  EXPECT_EQ(p->profiles.at("small").packages.allow, k.allow);  // inherited
  EXPECT_EQ(p->packages.port, 8000u);
  EXPECT_EQ(p->packages.cache_dir, "/srv/pkgcache");
  EXPECT_FALSE(Profile{}.packages.enabled());  // off by default
  auto r = relaxations(p->profiles.at("default"));
  EXPECT_TRUE(std::any_of(r.begin(), r.end(), [](const std::string& line) {
    return line.find("packages.allow = [pandas, requests>=2,<3") != std::string::npos;
  })) << r.size();
}

TEST(PolicyPackages, BadEntriesNameTheKeyTheEntryAndTheLine) {
  EXPECT_EQ(errorOf("[profiles.default.packages]\nallow = [\"pandas\", \"requests>=\"]\n"),
            "t.toml:3:20: profile 'default': packages.allow[1] = 'requests>=': version missing "
            "after '>='");
  EXPECT_NE(
      errorOf("[profiles.default.packages]\ndeny = [\"a b\"]\n").find("packages.deny[0] = 'a b': "),
      std::string::npos);
  EXPECT_NE(errorOf("[profiles.default.packages]\nallow = [\"x~=1\"]\n").find("packages.allow[0]"),
            std::string::npos);
  EXPECT_NE(
      errorOf("[profiles.default.packages]\nallow = [\">=1\"]\n").find("package name missing"),
      std::string::npos);
  EXPECT_NE(errorOf("[profiles.default.packages.pins]\ntqdm = \"md5:abc\"\n")
                .find("packages.pins.tqdm = 'md5:abc': each pin is 'sha256:' followed by 64 hex"),
            std::string::npos);
  EXPECT_NE(errorOf("[profiles.default.packages]\nmax_file_mb = 2000\nmax_sandbox_mb = 1000\n")
                .find("packages.max_file_mb = 2000: above packages.max_sandbox_mb = 1000"),
            std::string::npos);
  EXPECT_NE(errorOf("[profiles.default.packages]\nalow = []\n")
                .find("unknown key 'alow' in [profiles.default.packages] (did you mean 'allow'?)"),
            std::string::npos);
  EXPECT_NE(errorOf("[packages]\npypi_index = \"ftp://x/\"\n")
                .find("packages.pypi_index = 'ftp://x/': must be an http:// or https:// URL"),
            std::string::npos);
  EXPECT_NE(errorOf("[packages]\ncache_dir = \"relative\"\n").find("packages.cache_dir"),
            std::string::npos);
  EXPECT_NE(errorOf("[packages]\nport = 0\n").find("packages.port = 0: must be at least 1"),
            std::string::npos);
}

// The grammar and version order are tested at length with the proxy's rules
// (packages_rules_test.cc); here, what the policy library itself offers.
TEST(PackageRule, ParsesNamesEcosystemsAndConstraints) {
  auto r = PackageRule::parse("pypi:Requests>=2.1,<3");
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ(r->only, PackageEcosystem::pypi);
  EXPECT_EQ(r->name, "Requests");
  ASSERT_EQ(r->spec.size(), 2u);
  EXPECT_TRUE(r->matchesName(PackageEcosystem::pypi, "requests"));
  EXPECT_FALSE(r->matchesName(PackageEcosystem::npm, "requests"));
  EXPECT_TRUE(r->matchesVersion("2.31.0", false));
  EXPECT_FALSE(r->matchesVersion("2.0", false));
  EXPECT_FALSE(r->matchesVersion("3.0.0", false));
  EXPECT_FALSE(r->matchesVersion("1!2.0", false));  // not a version: an allow says no
  EXPECT_TRUE(r->matchesVersion("1!2.0", true));    // and a deny says yes

  auto scoped = PackageRule::parse("@types/*");
  ASSERT_TRUE(scoped.has_value());
  EXPECT_TRUE(scoped->matchesName(PackageEcosystem::npm, "@types/node"));
  EXPECT_FALSE(scoped->matchesName(PackageEcosystem::npm, "@typesx/node"));

  auto glob = PackageRule::parse("django-*");
  ASSERT_TRUE(glob.has_value());
  EXPECT_TRUE(glob->matchesName(PackageEcosystem::pypi, "Django_REST.framework"));
  EXPECT_FALSE(glob->matchesName(PackageEcosystem::pypi, "django"));
  EXPECT_FALSE(glob->matchesName(PackageEcosystem::npm, "Django-x"));  // npm: exact case
  EXPECT_EQ(normalizePypiName("Foo__Bar.baz"), "foo-bar-baz");

  for (const char* bad : {"", "x==", "x>=1,", "x~=1", "x>=1;y", "gem:x"})
    EXPECT_FALSE(PackageRule::parse(bad).has_value()) << bad;
}

TEST(PackageRule, ParsesPins) {
  const std::string a(64, 'a'), b(64, 'B');
  auto pins = parsePins("sha256:" + a + ", sha256:" + b);
  ASSERT_TRUE(pins.has_value()) << pins.error().message();
  EXPECT_EQ(*pins, (std::vector<std::string>{a, std::string(64, 'b')}));
  EXPECT_FALSE(parsePins("sha256:abc").has_value());
  EXPECT_FALSE(parsePins("").has_value());
}

}  // namespace
}  // namespace airlock::policy
