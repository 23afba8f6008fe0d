// [transfer] and [profiles.<name>.transfer]: parsing, the errors that name the key, relaxations.
#include <gtest/gtest.h>

#include <algorithm>

#include "airlock/policy/keys.h"
#include "airlock/policy/policy.h"

namespace airlock::policy {
namespace {

Result<Policy> parseText(const std::string& text) { return parse("schema = 1\n" + text, "t.toml"); }

std::string errorOf(const std::string& text) {
  auto p = parseText(text);
  return p ? std::string("(parsed)") : p.error().message();
}

TEST(PolicyTransfer, ReadsEveryTableOfAProfileAndTheHost) {
  auto p = parseText(R"(
[transfer]
writable_roots = ["results"]
[transfer.roots]
datasets = "/srv/data"
results = "/srv/results"
[profiles.default.transfer]
plugins = ["archive", "http"]
[profiles.default.transfer.archive]
max_mb = 64
[profiles.default.transfer.http]
allow = ["https://*.example.com/data/", "http://10.1.2.3:8080"]
allow_private = ["10.1.2.0/24"]
redirects = 0
idle_timeout_s = 5
[profiles.default.transfer.hostdir]
roots = ["datasets"]
max_files = 10
)");
  ASSERT_TRUE(p.has_value()) << p.error().message();
  const Transfer& t = p->profiles.at("default").transfer;
  EXPECT_EQ(t.plugins, (std::vector<std::string>{"archive", "http"}));
  EXPECT_EQ(t.archive.max_mb, 64u);
  EXPECT_EQ(t.http.limits.max_mb, 1024u);  // each plugin its own limits
  EXPECT_EQ(t.http.allow.size(), 2u);
  EXPECT_EQ(t.http.redirects, 0u);
  EXPECT_EQ(t.http.idle_timeout_s, 5u);
  EXPECT_EQ(t.hostdir.roots, (std::vector<std::string>{"datasets"}));
  EXPECT_EQ(t.hostdir.limits.max_files, 10u);
  EXPECT_EQ(p->transfer.roots.at("results"), "/srv/results");
  EXPECT_EQ(p->transfer.writable_roots, (std::vector<std::string>{"results"}));
}

TEST(PolicyTransfer, ExtendsInheritsTransferTables) {
  auto p = parseText(R"(
[profiles.default.transfer.http]
allow = ["https://data.example.com/"]
[profiles.small]
extends = "default"
[profiles.small.transfer.http]
max_mb = 8
)");
  ASSERT_TRUE(p.has_value()) << p.error().message();
  EXPECT_EQ(p->profiles.at("small").transfer.http.allow,
            (std::vector<std::string>{"https://data.example.com/"}));
  EXPECT_EQ(p->profiles.at("small").transfer.http.limits.max_mb, 8u);
}

TEST(PolicyTransfer, BadValuesNameTheirKey) {
  EXPECT_NE(errorOf("[profiles.default.transfer.http]\nallow = [\"ftp://x.example\"]\n")
                .find("transfer.http.allow[0] = 'ftp://x.example': must start with https:// or "
                      "http://"),
            std::string::npos);
  EXPECT_NE(errorOf("[profiles.default.transfer.http]\nallow = [\"https://u:p@x.example/\"]\n")
                .find("must not carry credentials"),
            std::string::npos);
  EXPECT_NE(errorOf("[profiles.default.transfer.http]\nallow = [\"https://a.*.example/\"]\n")
                .find("a wildcard may only be the first label"),
            std::string::npos);
  EXPECT_NE(errorOf("[profiles.default.transfer.http]\nallow = [\"https://x.example:99999/\"]\n")
                .find("port '99999' is not a number from 1 to 65535"),
            std::string::npos);
  EXPECT_NE(errorOf("[profiles.default.transfer.http]\nallow_private = [\"10.0.0.1/8\"]\n")
                .find("transfer.http.allow_private[0] = '10.0.0.1/8'"),
            std::string::npos);
  EXPECT_NE(errorOf("[profiles.default.transfer.archive]\nmax_mb = 0\n")
                .find("transfer.archive.max_mb = 0: must be at least 1"),
            std::string::npos);
  EXPECT_NE(errorOf("[profiles.default.transfer.hostdir]\nmax_mb = 100\nsandbox_max_mb = 10\n")
                .find("transfer.hostdir.sandbox_max_mb = 10: below transfer.hostdir.max_mb = 100"),
            std::string::npos);
  EXPECT_NE(errorOf("[profiles.default.transfer.htp]\nallow = []\n")
                .find("unknown key 'htp' in [profiles.default.transfer] (did you mean 'http'?)"),
            std::string::npos);
  EXPECT_NE(errorOf("[transfer]\nwritable_roots = [\"x\"]\n")
                .find("transfer.writable_roots: 'x' is not a root of [transfer.roots]"),
            std::string::npos);
  EXPECT_NE(errorOf("[transfer.roots]\nx = \"relative\"\n")
                .find("transfer.roots.x = 'relative': must be an absolute path"),
            std::string::npos);
  EXPECT_NE(errorOf("[transfer.roots]\nx = \"/\"\n").find("the whole host cannot be a root"),
            std::string::npos);
  EXPECT_NE(errorOf("[profiles.default.transfer.hostdir]\nroots = [\"nope\"]\n")
                .find("profile 'default': transfer.hostdir.roots: 'nope' is not a root"),
            std::string::npos);
}

TEST(PolicyTransfer, LooserSettingsAreRelaxations) {
  auto p = parseText(R"(
[transfer]
writable_roots = ["results"]
[transfer.roots]
results = "/srv/results"
[profiles.default.transfer.http]
allow = ["https://data.example.com/"]
allow_private = ["10.1.0.0/16"]
ca_file = "/etc/airlock/ca.pem"
max_mb = 2048
)");
  ASSERT_TRUE(p.has_value()) << p.error().message();
  const auto r = relaxations(*p);
  for (const char* want :
       {"profile 'default': transfer.http.allow: transfers may fetch from and upload to "
        "'https://data.example.com/'",
        "profile 'default': transfer.http.allow_private: URLs may reach '10.1.0.0/16' inside the "
        "protected ranges (private, loopback, link-local, metadata)",
        "profile 'default': transfer.http.ca_file = '/etc/airlock/ca.pem': its CAs are trusted "
        "besides the system's",
        "profile 'default': transfer.http.max_mb = 2048: above the default 1024",
        "transfer.writable_roots: transfers out may write into root 'results' (/srv/results)"}) {
    EXPECT_NE(std::find(r.begin(), r.end(), want), r.end()) << want;
  }
  EXPECT_TRUE(relaxations(builtinDefault()).empty());
}

TEST(PolicyTransfer, ExplainShowsTheRules) {
  auto p = parseText(R"(
[transfer.roots]
datasets = "/srv/data"
[profiles.default.transfer.http]
allow = ["https://data.example.com/"]
)");
  ASSERT_TRUE(p.has_value()) << p.error().message();
  const std::string text = explainText(*p, p->profiles.at("default"));
  EXPECT_NE(text.find("URLs https://data.example.com/;"), std::string::npos) << text;
  EXPECT_NE(text.find("roots: datasets = /srv/data (read-only);"), std::string::npos) << text;
}

}  // namespace
}  // namespace airlock::policy
