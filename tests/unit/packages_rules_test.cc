// The version comparator and package rules (airlock/policy/package_version.h, rules.h).
#include <gtest/gtest.h>

#include "airlock/policy/package_version.h"
#include "supervisor/packages/rules.h"

namespace airlock::packages {
namespace {

using policy::compareVersions;
using policy::Constraint;
using policy::parseVersion;
using policy::parseVersionSpec;

int cmp(const char* a, const char* b) {
  auto va = parseVersion(a), vb = parseVersion(b);
  EXPECT_TRUE(va) << a;
  EXPECT_TRUE(vb) << b;
  if (!va || !vb) return 99;
  const int c = compareVersions(*va, *vb);
  return c < 0 ? -1 : c > 0 ? 1 : 0;
}

TEST(PackagesVersion, OrdersReleasesAndPreReleases) {
  struct Case {
    const char *a, *b;
    int want;
  };
  const Case cases[] = {
      {"1.0", "1.0.0", 0},
      {"1.0", "1.0.1", -1},
      {"1.10", "1.9", 1},
      {"2", "1.99.99", 1},
      {"v1.2.3", "1.2.3", 0},
      {"1.26.4", "1.26.4", 0},
      {"1.0a1", "1.0", -1},
      {"1.0b2", "1.0a9", 1},
      {"1.0rc1", "1.0b9", 1},
      {"1.0rc1", "1.0", -1},
      {"1.0.dev0", "1.0a1", -1},
      {"1.0.post1", "1.0", 1},
      {"1.0.post1", "1.0.1", -1},
      {"1.0a1.dev0", "1.0a1", -1},
      {"1.0.0-beta.1", "1.0.0", -1},
      {"1.0.0-alpha", "1.0.0-alpha.1", -1},
      {"1.0.0-alpha.1", "1.0.0-beta", -1},
      {"1.0.0-beta.2", "1.0.0-beta.11", -1},
      {"1.0.0-rc.1", "1.0.0", -1},
      {"1.0.0+build.5", "1.0.0", 0},
      {"2.0.0+cpu", "2.0.0", 0},
      {"1.0.0-1", "1.0.0", -1},
      {"1.0.0-canary.3", "1.0.0-rc.1", -1},
      {"1.0RC1", "1.0rc1", 0},
      {"1.0-beta1", "1.0b1", 0},
      {"1.0.0-alpha.1", "1.0a1", 0},
      {"1.0c1", "1.0rc1", 0},
      {"1.0-r1", "1.0.post1", 0},
  };
  for (const Case& c : cases) EXPECT_EQ(cmp(c.a, c.b), c.want) << c.a << " vs " << c.b;
}

TEST(PackagesVersion, RefusesWhatIsNotAVersion) {
  for (const char* bad : {"", "abc", "1.0-", "1..0", "1!2.0", "latest", "*", "1.0.", "v", "1.0-.1"})
    EXPECT_FALSE(parseVersion(bad)) << bad;
}

TEST(PackagesVersion, SpecsMeanAllOf) {
  auto satisfied = [](const char* spec, const char* version) {
    std::string error;
    auto s = parseVersionSpec(spec, error);
    EXPECT_TRUE(s) << spec << ": " << error;
    auto v = parseVersion(version);
    EXPECT_TRUE(v) << version;
    for (const Constraint& c : *s)
      if (!c.satisfiedBy(*v)) return false;
    return true;
  };
  EXPECT_TRUE(satisfied(">=2", "2.0"));
  EXPECT_TRUE(satisfied(">=2,<3", "2.31.0"));
  EXPECT_FALSE(satisfied(">=2,<3", "3.0"));
  EXPECT_FALSE(satisfied(">=2,<3", "1.9"));
  // Plain ordering: a pre-release of 3.0 sorts before 3 (PEP 440's special case is not copied).
  EXPECT_TRUE(satisfied(">=2,<3", "3.0rc1"));
  EXPECT_TRUE(satisfied("==1.26.4", "1.26.4"));
  EXPECT_FALSE(satisfied("==1.26.4", "1.26.5"));
  EXPECT_TRUE(satisfied("!=1.3.0", "1.3.1"));
  EXPECT_FALSE(satisfied("!=1.3.0", "1.3"));
  EXPECT_TRUE(satisfied("<=1.0", "1.0"));
  EXPECT_TRUE(satisfied(">1.0", "1.0.post1"));
  EXPECT_FALSE(satisfied(">1.0", "1.0"));
  EXPECT_TRUE(satisfied("< 2 , > 1", "1.5"));
}

TEST(PackagesVersion, SpecErrorsSayWhatIsWrong) {
  struct Case {
    const char *spec, *error;
  };
  const Case cases[] = {
      {">=", "version missing after '>='"},
      {">=2,", "empty version constraint"},
      {"~2", "'~2' does not start with ==, !=, >=, <=, > or <"},
      {"==abc", "'abc' is not a version (dotted numbers such as 1.2.3)"},
  };
  for (const Case& c : cases) {
    std::string error;
    EXPECT_FALSE(parseVersionSpec(c.spec, error)) << c.spec;
    EXPECT_EQ(error, c.error) << c.spec;
  }
}

TEST(PackagesRules, NormalizesPypiNames) {
  EXPECT_EQ(normalizePypiName("Foo.Bar__baz-QUX"), "foo-bar-baz-qux");
  EXPECT_EQ(normalizePypiName("zope.interface"), "zope-interface");
  EXPECT_EQ(normalizePypiName("a-._b"), "a-b");
}

std::shared_ptr<const Rules> compile(RuleSet set) {
  set.key = "profiles.x.packages";
  auto rules = compileRules(set);
  EXPECT_TRUE(rules) << (rules ? "" : rules.error().message());
  return rules ? *rules : nullptr;
}

TEST(PackagesRules, Decides) {
  auto rules = compile({.allow = {"pandas", "requests>=2,<3", "numpy==1.26.4", "@types/*",
                                  "pypi:tqdm", "npm:left-pad", "Zope.Interface", "evil-*"},
                        .deny = {"evil*", "requests==2.5.0", "@types/bad"}});
  ASSERT_TRUE(rules);
  struct Case {
    Ecosystem eco;
    const char *name, *version;
    bool allowed;
    const char* rule;
  };
  const Case cases[] = {
      {Ecosystem::pypi, "pandas", "", true, "profiles.x.packages.allow[0] = 'pandas'"},
      {Ecosystem::pypi, "Pandas", "2.2.0", true, "profiles.x.packages.allow[0] = 'pandas'"},
      {Ecosystem::npm, "pandas", "1.0.0", true, "profiles.x.packages.allow[0] = 'pandas'"},
      {Ecosystem::pypi, "requests", "", true, "profiles.x.packages.allow[1] = 'requests>=2,<3'"},
      {Ecosystem::pypi, "requests", "2.31.0", true,
       "profiles.x.packages.allow[1] = 'requests>=2,<3'"},
      {Ecosystem::pypi, "requests", "1.2.3", false,
       "profiles.x.packages.allow (no entry matches 'requests' 1.2.3)"},
      {Ecosystem::pypi, "requests", "3.0", false,
       "profiles.x.packages.allow (no entry matches 'requests' 3.0)"},
      {Ecosystem::pypi, "requests", "2.5.0", false,
       "profiles.x.packages.deny[1] = 'requests==2.5.0'"},
      {Ecosystem::pypi, "numpy", "1.26.4", true, "profiles.x.packages.allow[2] = 'numpy==1.26.4'"},
      {Ecosystem::pypi, "numpy", "2.0.0", false,
       "profiles.x.packages.allow (no entry matches 'numpy' 2.0.0)"},
      {Ecosystem::pypi, "numpy", "not-a-version", false,
       "profiles.x.packages.allow (no entry matches 'numpy' not-a-version)"},
      {Ecosystem::npm, "@types/node", "20.1.0", true, "profiles.x.packages.allow[3] = '@types/*'"},
      {Ecosystem::npm, "@types/bad", "", false, "profiles.x.packages.deny[2] = '@types/bad'"},
      {Ecosystem::npm, "@typesx/node", "", false,
       "profiles.x.packages.allow (no entry matches '@typesx/node')"},
      {Ecosystem::pypi, "tqdm", "4.0", true, "profiles.x.packages.allow[4] = 'pypi:tqdm'"},
      {Ecosystem::npm, "tqdm", "4.0.0", false,
       "profiles.x.packages.allow (no entry matches 'tqdm' 4.0.0)"},
      {Ecosystem::npm, "left-pad", "1.3.0", true, "profiles.x.packages.allow[5] = 'npm:left-pad'"},
      {Ecosystem::pypi, "left-pad", "1.3.0", false,
       "profiles.x.packages.allow (no entry matches 'left-pad' 1.3.0)"},
      {Ecosystem::pypi, "zope_interface", "", true,
       "profiles.x.packages.allow[6] = 'Zope.Interface'"},
      {Ecosystem::npm, "zope_interface", "", false,
       "profiles.x.packages.allow (no entry matches 'zope_interface')"},
      {Ecosystem::pypi, "evil-pkg", "1.0", false, "profiles.x.packages.deny[0] = 'evil*'"},
      {Ecosystem::pypi, "evilpkg", "", false, "profiles.x.packages.deny[0] = 'evil*'"},
      {Ecosystem::npm, "unlisted", "", false,
       "profiles.x.packages.allow (no entry matches 'unlisted')"},
  };
  for (const Case& c : cases) {
    const Verdict v = rules->decide(c.eco, c.name, c.version);
    EXPECT_EQ(v.allowed, c.allowed) << c.name << " " << c.version;
    EXPECT_EQ(v.rule, c.rule) << c.name << " " << c.version;
  }
  const Verdict v = rules->decide(Ecosystem::pypi, "evilpkg", "");
  EXPECT_EQ(v.reason, "package 'evilpkg' refused by profiles.x.packages.deny[0] = 'evil*'");
}

TEST(PackagesRules, VersionedDenyLeavesThePackageAndFailsClosed) {
  auto rules = compile({.allow = {"requests"}, .deny = {"requests<2"}});
  ASSERT_TRUE(rules);
  EXPECT_TRUE(rules->decide(Ecosystem::pypi, "requests", "").allowed);
  EXPECT_TRUE(rules->decide(Ecosystem::pypi, "requests", "2.0").allowed);
  EXPECT_FALSE(rules->decide(Ecosystem::pypi, "requests", "1.9").allowed);
  // A version the comparator cannot read is denied by a versioned deny: never fail open.
  EXPECT_FALSE(rules->decide(Ecosystem::pypi, "requests", "weird!").allowed);
}

TEST(PackagesRules, EmptyAllowAdmitsNothing) {
  auto rules = compile({});
  ASSERT_TRUE(rules);
  EXPECT_FALSE(rules->decide(Ecosystem::pypi, "pandas", "").allowed);
  EXPECT_FALSE(rules->decide(Ecosystem::npm, "left-pad", "1.0.0").allowed);
}

TEST(PackagesRules, PinsAndLimits) {
  const std::string sha(64, 'a');
  auto rules = compile({.allow = {"*"},
                        .max_file_bytes = 10,
                        .max_sandbox_bytes = 20,
                        .sdists = true,
                        .pins = {{"NumPy", {std::string(64, 'A')}}}});
  ASSERT_TRUE(rules);
  std::string key;
  const auto* pins = rules->pinsFor(Ecosystem::pypi, "numpy", &key);
  ASSERT_NE(pins, nullptr);
  EXPECT_EQ(*pins, std::vector<std::string>{sha});  // lowercased
  EXPECT_EQ(key, "profiles.x.packages.pins['NumPy']");
  EXPECT_EQ(rules->pinsFor(Ecosystem::npm, "numpy"), nullptr);  // npm names compare exactly
  EXPECT_EQ(rules->pinsFor(Ecosystem::pypi, "pandas"), nullptr);
  EXPECT_EQ(rules->maxFileBytes(), 10u);
  EXPECT_EQ(rules->maxSandboxBytes(), 20u);
  EXPECT_TRUE(rules->sdists());
}

TEST(PackagesRules, BadEntriesNameTheKeyAndEntry) {
  struct Case {
    RuleSet set;
    const char* error;
  };
  const Case cases[] = {
      {{.allow = {"pandas", "numpy", "requests>="}},
       "profiles.x.packages.allow[2] = 'requests>=': version missing after '>='"},
      {{.deny = {"requests>=abc"}},
       "profiles.x.packages.deny[0] = 'requests>=abc': 'abc' is not a version (dotted numbers "
       "such as 1.2.3)"},
      {{.allow = {""}}, "profiles.x.packages.allow[0] = '': package name missing"},
      {{.allow = {">=2"}}, "profiles.x.packages.allow[0] = '>=2': package name missing"},
      {{.allow = {"pip:requests"}},
       "profiles.x.packages.allow[0] = 'pip:requests': unknown ecosystem 'pip' (pypi: or npm:)"},
      {{.allow = {"req$uests"}},
       "profiles.x.packages.allow[0] = 'req$uests': '$' cannot be part of a package name"},
      {{.allow = {"requests~=2.0"}},
       "profiles.x.packages.allow[0] = 'requests~=2.0': '~=' is not supported (write >=X,<Y)"},
      {{.allow = {"requests>=2,,<3"}},
       "profiles.x.packages.allow[0] = 'requests>=2,,<3': empty version constraint"},
      {{.pins = {{"numpy", {"abc"}}}},
       "profiles.x.packages.pins['numpy'][0] = 'abc': not a sha256 (64 hex digits)"},
      {{.max_file_bytes = 0},
       "profiles.x.packages: max_file_bytes and max_sandbox_bytes must be > 0"},
  };
  for (Case c : cases) {
    c.set.key = "profiles.x.packages";
    auto rules = compileRules(c.set);
    ASSERT_FALSE(rules) << c.error;
    EXPECT_EQ(rules.error().message(), c.error);
  }
}

}  // namespace
}  // namespace airlock::packages
