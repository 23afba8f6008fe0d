// policy/examples/reference.toml, the struct in policy.h, the parser's key table and
// docs/policy.md describe the same keys; these tests fail when one of them drifts.
#include <gtest/gtest.h>

#include <toml++/toml.h>
#include <set>
#include <sstream>

#include "airlock/policy/keys.h"
#include "airlock/policy/policy.h"
#include "policy_test_util.h"

namespace airlock::policy {
namespace {

using test::examplesDir;
using test::slurp;

const std::string kReference = examplesDir() + "/reference.toml";

// Dotted keys under one profile table; env is one key (its entries are free-form).
void collectKeys(const toml::table& table, const std::string& prefix, std::set<std::string>& out) {
  for (auto&& [k, v] : table) {
    const std::string path = prefix + std::string(k.str());
    if (v.is_table() && path != "env") {
      collectKeys(*v.as_table(), path + ".", out);
    } else {
      out.insert(path);
    }
  }
}

TEST(PolicyReference, ListsEveryKeyTheParserKnowsAndNoOther) {
  toml::table doc = toml::parse_file(kReference);
  const toml::table* profiles = doc["profiles"].as_table();
  ASSERT_NE(profiles, nullptr);
  std::set<std::string> in_default;
  collectKeys(*(*profiles)["default"].as_table(), "", in_default);
  // `extends` cannot be set on the default profile of the reference; the second profile shows it.
  std::set<std::string> in_reference = in_default;
  for (auto&& [name, body] : *profiles) {
    if (body.as_table()->contains("extends")) in_reference.insert("extends");
  }
  const auto known = profileKeys();
  EXPECT_EQ(in_reference, std::set<std::string>(known.begin(), known.end()));
  EXPECT_EQ(known.size(), std::set<std::string>(known.begin(), known.end()).size());
}

TEST(PolicyReference, DefaultProfileHoldsTheStructDefaults) {
  auto p = loadFile(kReference);
  ASSERT_TRUE(p.has_value()) << p.error().message();
  Profile defaults;
  defaults.name = "default";
  EXPECT_EQ(profileToToml(p->profiles.at("default")), profileToToml(defaults));
  EXPECT_TRUE(relaxations(p->profiles.at("default")).empty());
  EXPECT_EQ(p->profiles.at("quick").limits.timeout_s, 5u);
}

TEST(PolicyReference, EveryKeyLineHasAComment) {
  std::istringstream in(slurp(kReference));
  std::string line;
  int key_lines = 0;
  bool in_default = false;
  while (std::getline(in, line)) {
    if (line.starts_with("[")) in_default = line.starts_with("[profiles.default");
    if (!in_default || line.empty() || line.starts_with("#") || line.starts_with("[")) continue;
    ++key_lines;
    EXPECT_NE(line.find('#'), std::string::npos) << "no unit comment on: " << line;
  }
  EXPECT_EQ(key_lines, static_cast<int>(profileKeys().size()) - 2);  // minus env and extends
}

// Structured bindings only compile with the exact member count: a field added to policy.h
// breaks this test until the key table in policy/schema.cc, reference.toml and
// docs/policy.md learn about it (then update the counts here).
TEST(PolicyReference, StructFieldCountsMatchTheKeyTable) {
  [[maybe_unused]] auto [l1, l2, l3, l4, l5, l6, l7, l8, l9] = Limits{};
  [[maybe_unused]] auto [f1, f2] = Filesystem{};
  [[maybe_unused]] auto [n1] = Network{};
  [[maybe_unused]] auto [s1, s2] = Seccomp{};
  [[maybe_unused]] auto [p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11, p12, p13] = Profile{};
  [[maybe_unused]] auto [y1, y2, y3, y4, y5] = Policy{};
  // Profile: 13 members minus name, minus the 4 sub-tables, plus their 9 + 2 + 1 + 2 keys,
  // plus `extends`.
  EXPECT_EQ(profileKeys().size(), 13u - 1 - 4 + 9 + 2 + 1 + 2 + 1);
}

// Every key maps to its own field: setting one key changes exactly one line of the profile's
// TOML rendering.
TEST(PolicyReference, EveryKeyWritesItsOwnField) {
  Profile defaults;
  defaults.name = "default";
  const std::string base = profileToToml(defaults);
  for (const std::string& key : profileKeys()) {
    if (key == "extends" || key == "env") continue;
    Profile p = defaults;
    bool set = false;
    for (const char* value : {"12345", "\"zz\"", "false", "[\"zz\"]"}) {
      if (applyOverride(p, key + "=" + value)) {
        set = true;
        break;
      }
    }
    ASSERT_TRUE(set) << key;
    std::istringstream a(base), b(profileToToml(p));
    std::string la, lb;
    int changed = 0;
    std::string changed_line;
    while (std::getline(a, la) && std::getline(b, lb)) {
      if (la != lb) {
        ++changed;
        changed_line = lb;
      }
    }
    EXPECT_EQ(changed, 1) << key;
    const std::string leaf = key.substr(key.rfind('.') + 1);
    EXPECT_TRUE(changed_line.starts_with(leaf + " = ")) << key << ": " << changed_line;
  }
}

TEST(PolicyExamples, AllParseAndValidate) {
  const auto files = test::filesIn(examplesDir(), ".toml");
  EXPECT_EQ(files,
            (std::vector<std::string>{"data-science.toml", "reference.toml", "strict.toml"}));
  for (const auto& f : files) {
    auto p = loadFile(examplesDir() + "/" + f);
    ASSERT_TRUE(p.has_value()) << p.error().message();
    for (const auto& [name, profile] : p->profiles) {
      EXPECT_TRUE(validate(profile).has_value()) << f << " " << name;
    }
  }
}

TEST(PolicyExamples, StrictIsTighterAndDataScienceIsLooser) {
  auto strict = loadFile(examplesDir() + "/strict.toml");
  ASSERT_TRUE(strict.has_value()) << strict.error().message();
  auto s = strict->profile("");
  ASSERT_TRUE(s.has_value());
  EXPECT_TRUE(relaxations(**s).empty());
  EXPECT_LT((*s)->limits.memory_mb, Limits{}.memory_mb);
  EXPECT_LT((*s)->limits.timeout_s, Limits{}.timeout_s);

  auto ds = loadFile(examplesDir() + "/data-science.toml");
  ASSERT_TRUE(ds.has_value()) << ds.error().message();
  auto d = ds->profile("");
  ASSERT_TRUE(d.has_value());
  EXPECT_GE((*d)->limits.memory_mb, 2048u);
  EXPECT_GT((*d)->limits.timeout_s, Limits{}.timeout_s);
  auto r = relaxations(**d);
  EXPECT_NE(std::find(r.begin(), r.end(),
                      "profile 'data-science': limits.memory_mb = 4096: above the default 1024"),
            r.end());
}

TEST(PolicyDocs, OperatorGuideMentionsEveryKey) {
  const std::string doc = slurp(AIRLOCK_POLICY_DOCS);
  ASSERT_FALSE(doc.empty());
  for (const std::string& key : profileKeys()) {
    const std::string leaf = key.substr(key.rfind('.') + 1);
    EXPECT_NE(doc.find("`" + leaf + "`"), std::string::npos) << "docs/policy.md misses " << key;
  }
}

}  // namespace
}  // namespace airlock::policy
