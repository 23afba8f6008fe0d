// [profiles.<name>.review] in policy files: values land in the struct, bad ones are errors that
// name the key, the rule and the position.
#include <gtest/gtest.h>

#include "airlock/policy/keys.h"
#include "airlock/policy/policy.h"

namespace airlock::policy {
namespace {

std::string errorOf(const std::string& toml) {
  auto p = parse("schema = 1\n" + toml, "r.toml");
  return p ? "" : p.error().message();
}

TEST(ReviewPolicy, ReadsEveryTable) {
  auto p = parse(R"(schema = 1
[profiles.default.review]
chain = ["limits", "patterns", "python_ast", "shell", "command", "webhook", "plugin:example"]
fail_open = true
cache_entries = 7
hold_deadline_s = 60

[[profiles.default.review.plugins]]
name = "example"
config = { deny_words = ["rm -rf"] }

[profiles.default.review.limits]
max_bytes = 1000
max_lines = 10
allow_binary = true

[[profiles.default.review.patterns.rules]]
id = "py-subprocess"
pattern = '\bsubprocess\b'
reason = "no processes"
languages = ["python"]

[[profiles.default.review.patterns.rules]]
id = "hold-drop"
pattern = '(?i)drop\s+table'
action = "hold"

[profiles.default.review.python_ast]
deny_imports = ["socket"]
timeout_ms = 2000

[profiles.default.review.shell]
mode = "off"

[profiles.default.review.command]
argv = ["/usr/local/bin/reviewer", "--strict"]
timeout_ms = 100

[profiles.default.review.webhook]
url = "http://127.0.0.1:8080/review"
token_file = "/etc/airlock/judge.token"

[profiles.child]
extends = "default"
[profiles.child.review]
chain = ["limits"]
)",
                 "r.toml");
  ASSERT_TRUE(p.has_value()) << p.error().message();
  const Review& r = p->profiles.at("default").review;
  EXPECT_EQ(r.chain.size(), 7u);
  EXPECT_TRUE(r.fail_open);
  EXPECT_EQ(r.cache_entries, 7u);
  EXPECT_EQ(r.hold_deadline_s, 60u);
  ASSERT_EQ(r.plugins.size(), 1u);
  EXPECT_EQ(r.plugins[0].config, R"({"deny_words":["rm -rf"]})");
  EXPECT_EQ(r.limits.max_bytes, 1000u);
  EXPECT_TRUE(r.limits.allow_binary);
  ASSERT_EQ(r.patterns.rules.size(), 2u);
  EXPECT_EQ(r.patterns.rules[0].pattern, R"(\bsubprocess\b)");
  EXPECT_EQ(r.patterns.rules[0].action, "deny");
  EXPECT_EQ(r.patterns.rules[1].action, "hold");
  EXPECT_EQ(r.python_ast.deny_imports, std::vector<std::string>{"socket"});
  EXPECT_EQ(r.shell.mode, "off");
  EXPECT_EQ(r.command.argv[1], "--strict");
  EXPECT_EQ(r.webhook.url, "http://127.0.0.1:8080/review");
  // extends: the child replaces the chain and keeps the rest.
  const Review& c = p->profiles.at("child").review;
  EXPECT_EQ(c.chain, std::vector<std::string>{"limits"});
  EXPECT_EQ(c.patterns.rules, r.patterns.rules);
  // fail_open is a relaxation.
  auto rel = relaxations(p->profiles.at("default"));
  EXPECT_NE(std::find(rel.begin(), rel.end(),
                      "profile 'default': review.fail_open = true: code runs when a reviewer "
                      "fails or times out"),
            rel.end());
  // The TOML rendering reads back to the same review section.
  auto back = parse("schema = 1\n" + profileToToml(p->profiles.at("default")), "back.toml");
  ASSERT_TRUE(back.has_value()) << back.error().message();
  EXPECT_EQ(profileToToml(back->profiles.at("default")), profileToToml(p->profiles.at("default")));
}

TEST(ReviewPolicy, ErrorsNameKeyRuleAndPosition) {
  EXPECT_EQ(errorOf("[profiles.default.review]\nchain = [\"limits\", \"pattern\"]\n"),
            "r.toml:3:20: profile 'default': review.chain[1] = 'pattern': unknown reviewer (did "
            "you mean 'patterns'?); the built-in ones are limits, patterns, python_ast, shell, "
            "command, webhook, and plugins are 'plugin:<name>'");
  EXPECT_EQ(errorOf("[[profiles.default.review.patterns.rules]]\nid = \"bad-re\"\n"
                    "pattern = '(unclosed'\n"),
            "r.toml:4:11: profile 'default': review.patterns.rules[0] (rule 'bad-re'): invalid "
            "regular expression '(unclosed': missing ): (unclosed");
  EXPECT_NE(errorOf("[[profiles.default.review.patterns.rules]]\nid = \"x\"\npattern = '(?<=a)b'\n")
                .find("rule 'x'): invalid regular expression"),
            std::string::npos)
      << "RE2 has no look-behind";
  EXPECT_EQ(errorOf("[[profiles.default.review.patterns.rules]]\npattern = 'x'\n"),
            "r.toml:2:1: profile 'default': review.patterns.rules[0].id: missing (every entry "
            "needs 'id')");
  EXPECT_EQ(errorOf("[[profiles.default.review.patterns.rules]]\nid = \"a\"\npattern = 'x'\n"
                    "action = \"block\"\n"),
            "r.toml:5:10: profile 'default': review.patterns.rules[0] (rule 'a'): action = "
            "'block': use deny, allow, hold");
  EXPECT_NE(errorOf("[[profiles.default.review.patterns.rules]]\nid = \"a\"\npattern = 'x'\n"
                    "[[profiles.default.review.patterns.rules]]\nid = \"a\"\npattern = 'y'\n")
                .find("another rule already has this id"),
            std::string::npos);
  EXPECT_EQ(errorOf("[[profiles.default.review.patterns.rules]]\nid = \"a\"\npattern = 'x'\n"
                    "severity = 3\n"),
            "r.toml:5:1: unknown key 'severity' in a review.patterns.rules entry");
  EXPECT_EQ(errorOf("[profiles.default.review.limits]\nmax_byte = 3\n"),
            "r.toml:3:1: unknown key 'max_byte' in [profiles.default.review.limits] (did you "
            "mean 'max_bytes'?)");
  EXPECT_EQ(errorOf("[profiles.default.review]\nfial_open = true\n"),
            "r.toml:3:1: unknown key 'fial_open' in [profiles.default.review] (did you mean "
            "'fail_open'?)");
  EXPECT_EQ(errorOf("[profiles.default.review]\nchain = [\"command\"]\n"),
            "r.toml:3:9: profile 'default': review.command.argv is empty: the chain names "
            "'command', so give the reviewer program, e.g. argv = "
            "[\"/usr/local/bin/my-reviewer\"]");
  EXPECT_NE(errorOf("[profiles.default.review]\nchain = [\"webhook\"]\n[profiles.default.review."
                    "webhook]\nurl = \"https://x/\"\n")
                .find("https is not supported"),
            std::string::npos);
  EXPECT_NE(errorOf("[profiles.default.review.shell]\nmode = \"allowlst\"\n")
                .find("(did you mean 'allowlist'?)"),
            std::string::npos);
  EXPECT_NE(
      errorOf("[profiles.default.review]\nchain = [\"limits\", \"limits\"]\n").find("named twice"),
      std::string::npos);
  EXPECT_NE(errorOf("[[profiles.default.review.plugins]]\nname = \"x\"\nconfig = \"[1]\"\n")
                .find("must be a table or a JSON object"),
            std::string::npos);
  EXPECT_NE(errorOf("[profiles.default.review.python_ast]\ntimeout_ms = 5\n").find("at least 100"),
            std::string::npos);
}

TEST(ReviewPolicy, OverridesReachNestedReviewKeys) {
  Profile p;
  ASSERT_TRUE(applyOverride(p, "review.limits.max_bytes=77"));
  EXPECT_EQ(p.review.limits.max_bytes, 77u);
  ASSERT_TRUE(applyOverride(p, "review.chain=[\"limits\"]"));
  EXPECT_EQ(p.review.chain, std::vector<std::string>{"limits"});
  ASSERT_TRUE(applyOverride(p, "review.patterns.rules=[{id = \"a\", pattern = \"b\"}]"));
  EXPECT_EQ(p.review.patterns.rules.at(0).id, "a");
  ASSERT_TRUE(applyOverride(p, "env.A.B=1"));
  EXPECT_EQ(p.env.at("A.B"), "1");
}

TEST(WebhookUrl, Parses) {
  auto u = parseWebhookUrl("http://judge.local:8080/v1/review?x=1");
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->host, "judge.local");
  EXPECT_EQ(u->port, 8080);
  EXPECT_EQ(u->target, "/v1/review?x=1");
  EXPECT_EQ(parseWebhookUrl("http://[::1]:9")->host, "::1");
  EXPECT_EQ(parseWebhookUrl("http://h")->port, 80);
  EXPECT_EQ(parseWebhookUrl("http://h")->target, "/");
  for (const char* bad : {"", "ftp://h/", "http://", "http://:80/", "http://h:0/", "http://h:99999",
                          "http://u:p@h/", "http://h/a b", "http://[::1"}) {
    EXPECT_FALSE(parseWebhookUrl(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace airlock::policy
