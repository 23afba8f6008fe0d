// Mutated, truncated and random policy text: parse() returns a policy or a located message;
// it never crashes, hangs or throws. (Run under -DAIRLOCK_SANITIZE=address,undefined too.)
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <regex>

#include "airlock/policy/keys.h"
#include "airlock/policy/policy.h"
#include "policy_test_util.h"
#include "test_support.h"

namespace airlock::policy {
namespace {

const std::string kReferenceText = test::slurp(test::examplesDir() + "/reference.toml");

// A successful parse is a whole, valid policy; a failure names the source first.
void expectSane(const std::string& text, const std::string& what) {
  Result<Policy> p;
  ASSERT_NO_THROW(p = parse(text, "fuzz.toml")) << what;
  if (p) {
    ASSERT_TRUE(p->profiles.contains(p->default_profile)) << what;
    ASSERT_TRUE(p->tenants.contains("default")) << what;
    for (const auto& [name, profile] : p->profiles) {
      ASSERT_TRUE(validate(profile).has_value()) << what << ": " << name;
    }
    auto whole = validate(*p);
    ASSERT_TRUE(whole.has_value()) << what << ": " << whole.error().message();
    ASSERT_EQ(p->hash.size(), 64u);
  } else {
    const std::string msg = p.error().message();
    ASSERT_TRUE(msg.starts_with("fuzz.toml: ") || msg.starts_with("fuzz.toml:")) << msg;
    ASSERT_GT(msg.size(), 12u) << what;
  }
}

TEST(PolicyFuzz, EveryTruncationOfTheReference) {
  ASSERT_GT(kReferenceText.size(), 1000u);
  for (size_t len = 0; len <= kReferenceText.size(); len += 2) {
    expectSane(kReferenceText.substr(0, len), "truncated at " + std::to_string(len));
  }
}

// Random byte edits of `source`; returns how many mutants still parsed.
int mutate(const std::string& source, uint32_t seed, int rounds) {
  std::mt19937 rng(seed);
  const std::string alphabet = "[]{}=\"'.,#\n\\ -_0123456789abcxyz\t\r\x01\x7f\xff\xc3";
  int parsed = 0;
  for (int i = 0; i < rounds; ++i) {
    std::string text = source;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % (text.size() + 1);
      switch (rng() % 6) {
        case 0:  // overwrite a byte
          if (at < text.size()) text[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:  // insert bytes
          text.insert(at, 1 + rng() % 3, alphabet[rng() % alphabet.size()]);
          break;
        case 2:  // delete a run
          text.erase(at, rng() % 16);
          break;
        case 3:  // random raw byte, NUL included
          if (at < text.size()) text[at] = static_cast<char>(rng() % 256);
          break;
        case 4: {  // duplicate a line elsewhere
          size_t start = text.rfind('\n', at == 0 ? 0 : at - 1);
          start = start == std::string::npos ? 0 : start + 1;
          size_t end = text.find('\n', start);
          std::string line = text.substr(start, end == std::string::npos ? end : end - start + 1);
          text.insert(rng() % (text.size() + 1), line);
          break;
        }
        default:  // change a number into something huge or negative
          if (size_t d = text.find_first_of("0123456789", at); d != std::string::npos) {
            text.replace(d, 1, rng() % 2 ? "-1" : "99999999999999999999");
          }
      }
    }
    expectSane(text, "mutation " + std::to_string(i));
    if (::testing::Test::HasFatalFailure()) return parsed;
    if (parse(text, "fuzz.toml")) ++parsed;
  }
  return parsed;
}

// Some mutations land in comments or values and still parse: the valid path is exercised too.
TEST(PolicyFuzz, MutatedReferenceBytes) { EXPECT_GT(mutate(kReferenceText, 20261122, 2000), 50); }

TEST(PolicyFuzz, MutatedServerAndTenants) {
  const std::string text = test::slurp(test::dataDir() + "/valid/server_and_tenants.toml");
  ASSERT_FALSE(text.empty());
  EXPECT_GT(mutate(text, 8720, 2000), 50);
}

TEST(PolicyFuzz, RandomGarbage) {
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    std::string text(rng() % 512, '\0');
    for (char& c : text) c = static_cast<char>(rng() % 256);
    if (i % 2 == 0) text = "schema = 1\n" + text;
    expectSane(text, "garbage " + std::to_string(i));
    if (HasFatalFailure()) return;
  }
}

TEST(PolicyFuzz, PathologicalShapes) {
  expectSane(std::string(100000, '['), "open brackets");
  expectSane("schema = 1\nx = " + std::string(5000, '[') + std::string(5000, ']'), "deep array");
  expectSane("schema = 1\nx = " + std::string(5000, '{'), "deep inline table");
  expectSane("schema = 1\n" + std::string(100000, 'k') + " = 1\n", "long key");
  expectSane(
      "schema = 1\n[profiles.default]\ndescription = \"" + std::string(1 << 20, 'd') + "\"\n",
      "long string");
  std::string many = "schema = 1\n";
  for (int i = 0; i < 2000; ++i) {
    many += "[profiles.p" + std::to_string(i) + "]\nextends = \"p" + std::to_string(i + 1) + "\"\n";
  }
  many += "[profiles.p2000]\n[profiles.default]\n";
  auto chain = parse(many, "fuzz.toml");
  ASSERT_TRUE(chain.has_value()) << chain.error().message();
  EXPECT_EQ(chain->profiles.size(), 2002u);
  std::string cycle = many;
  cycle.replace(cycle.find("[profiles.p2000]\n"), 17, "[profiles.p2000]\nextends = \"p0\"\n");
  auto looped = parse(cycle, "fuzz.toml");
  ASSERT_FALSE(looped.has_value());
  EXPECT_NE(looped.error().message().find("makes a cycle: p0 -> p1 -> p2 -> "), std::string::npos)
      << looped.error().message().substr(0, 200);
}

TEST(PolicyFuzz, ManyTenants) {
  std::string text = "schema = 1\n[server]\ntcp = \"127.0.0.1:1\"\n";
  for (int i = 0; i < 3000; ++i) {
    std::string hex = sha256Hex(std::to_string(i));
    text += "[tenants.t" + std::to_string(i) + "]\ntoken_sha256 = \"" + hex + "\"\n";
  }
  auto p = parse(text, "fuzz.toml");
  ASSERT_TRUE(p.has_value()) << p.error().message();
  EXPECT_EQ(p->tenants.size(), 3001u);
  EXPECT_EQ(p->tenantForTokenSha256(sha256Hex("2999")), "t2999");
  text += "[tenants.dup]\ntoken_sha256 = \"" + sha256Hex("17") + "\"\n";
  auto dup = parse(text, "fuzz.toml");
  ASSERT_FALSE(dup.has_value());
  EXPECT_NE(dup.error().message().find("tenant 't17': token_sha256 is also the token_sha256 of "
                                       "tenant 'dup'"),
            std::string::npos)
      << dup.error().message();
}

TEST(PolicyFuzz, ParsingTheReferenceIsFast) {
  // The CLI parses the policy on every `airlock run`. Loose bound: shared, sanitized CI hosts.
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(parse(kReferenceText, "reference.toml"));
  auto per_parse = (std::chrono::steady_clock::now() - start) / 200;
  std::printf("policy parse: %.3f ms per parse of reference.toml\n",
              std::chrono::duration<double, std::milli>(per_parse).count());
  if (!airlock::testing::kSanitizedBuild) {
    EXPECT_LT(per_parse, std::chrono::milliseconds(5));
  }
}

}  // namespace
}  // namespace airlock::policy
