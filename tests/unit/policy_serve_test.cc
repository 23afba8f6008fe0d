// The parts of the policy that `airlock serve` reads: [server], [tenants.*], each profile's
// lifetime table, the helpers the service calls, validate(Policy), relaxations and explain.
#include <gtest/gtest.h>

#include <string>

#include "airlock/policy/keys.h"
#include "airlock/policy/policy.h"
#include "policy_test_util.h"

namespace airlock::policy {
namespace {

using test::dataDir;
using test::slurp;

const std::string kHash1(64, '1');
const std::string kHash2(64, '2');

Policy parseOk(const std::string& text) {
  auto p = parse(text, "t.toml");
  EXPECT_TRUE(p.has_value()) << (p ? "" : p.error().message()) << "\n" << text;
  return p ? *p : Policy{};
}

std::string parseErr(const std::string& text) {
  auto p = parse(text, "t.toml");
  EXPECT_FALSE(p.has_value()) << "parsed:\n" << text;
  return p ? "" : p.error().message();
}

// ---- parsing ----

TEST(PolicyServe, NoServerOrTenantsGivesTheDefaults) {
  Policy p = parseOk("schema = 1\n");
  EXPECT_EQ(serverToToml(p.server), serverToToml(Server{}));
  EXPECT_EQ(p.server.socket, "/run/airlock/airlock.sock");
  EXPECT_EQ(p.server.socketModeBits(), 0660u);
  EXPECT_EQ(p.server.max_sandboxes, 1000u);
  ASSERT_EQ(p.tenants.size(), 1u);
  const Tenant& t = p.tenants.at("default");
  EXPECT_EQ(t.name, "default");
  EXPECT_EQ(t.max_sandboxes, 100u);
  EXPECT_EQ(t.max_memory_mb, 65536u);
  EXPECT_TRUE(t.profiles.empty());
  EXPECT_TRUE(t.token_sha256.empty());
  const Lifetime& l = p.profiles.at("default").lifetime;
  EXPECT_EQ(l.keep_alive_s, 300u);
  EXPECT_EQ(l.max_keep_alive_s, 3600u);
  EXPECT_EQ(l.lifetime_s, 3600u);
  EXPECT_EQ(l.max_lifetime_s, 86400u);
  EXPECT_EQ(l.pool_size, 0u);

  Policy b = builtinDefault();
  EXPECT_TRUE(b.tenants.contains("default"));
  EXPECT_TRUE(validate(b));
}

TEST(PolicyServe, ServerAndTenantsAreRead) {
  auto p = loadFile(dataDir() + "/valid/server_and_tenants.toml");
  ASSERT_TRUE(p.has_value()) << p.error().message();
  const Server& s = p->server;
  EXPECT_EQ(s.socket, "/run/airlock/api.sock");
  EXPECT_EQ(s.socketModeBits(), 0660u);
  EXPECT_EQ(s.socket_group, "airlock");
  EXPECT_EQ(s.tcp, "[::1]:8720");
  EXPECT_EQ(s.max_connections, 64u);
  EXPECT_EQ(s.max_json_body_kb, 1024u);
  EXPECT_EQ(s.max_upload_mb, 64u);
  EXPECT_EQ(s.max_sandboxes, 20u);
  EXPECT_EQ(s.state_dir, "/srv/airlock/state");
  EXPECT_EQ(s.drain_timeout_s, 0u);
  EXPECT_EQ(s.reattach_grace_s, 600u);

  ASSERT_EQ(p->tenants.size(), 3u);
  const Tenant& def = p->tenants.at("default");
  EXPECT_EQ(def.max_sandboxes, 4u);
  EXPECT_EQ(def.max_memory_mb, 4096u);
  EXPECT_TRUE(def.token_sha256.empty());
  const Tenant& ci = p->tenants.at("ci");
  EXPECT_EQ(ci.name, "ci");
  EXPECT_EQ(ci.profiles, std::vector<std::string>{"quick"});
  EXPECT_EQ(ci.max_memory_mb, 8192u);
  EXPECT_EQ(p->tenants.at("notebooks").max_sandboxes, 100u);  // default

  EXPECT_EQ(p->profiles.at("default").lifetime.pool_size, 2u);
  EXPECT_EQ(p->profiles.at("quick").lifetime.pool_size, 4u);
  EXPECT_EQ(p->profiles.at("quick").lifetime.keep_alive_s, 30u);
  EXPECT_TRUE(validate(*p));
}

TEST(PolicyServe, LifetimeIsInheritedKeyByKeyThroughExtends) {
  auto p = loadFile(dataDir() + "/valid/lifetime_extends.toml");
  ASSERT_TRUE(p.has_value()) << p.error().message();
  const Lifetime& child = p->profiles.at("child").lifetime;
  EXPECT_EQ(child.keep_alive_s, 60u);
  EXPECT_EQ(child.max_keep_alive_s, 7200u);
  EXPECT_EQ(child.lifetime_s, 7200u);
  EXPECT_EQ(child.max_lifetime_s, 172800u);
  EXPECT_EQ(child.pool_size, 1u);
  const Lifetime& grandchild = p->profiles.at("grandchild").lifetime;
  EXPECT_EQ(grandchild.keep_alive_s, 60u);
  EXPECT_EQ(grandchild.max_lifetime_s, 7200u);
  EXPECT_EQ(grandchild.pool_size, 0u);
}

TEST(PolicyServe, InheritedLifetimeErrorPointsAtTheKeyThatBrokeIt) {
  // The base is fine; the child lowers max_lifetime_s below the inherited max_keep_alive_s.
  EXPECT_EQ(parseErr(R"(schema = 1
[profiles.default.lifetime]
max_keep_alive_s = 7200
[profiles.short]
extends = "default"
[profiles.short.lifetime]
lifetime_s = 600
max_lifetime_s = 3600
)"),
            "t.toml:8:18: profile 'short': lifetime.max_keep_alive_s = 7200 must be at most "
            "lifetime.max_lifetime_s = 3600: a sandbox never lives past its lifetime, so it could "
            "never be idle that long");
}

TEST(PolicyServe, LogKeysTakeTheirNamesAndABadOnePointsAtItsValue) {
  auto p = parse("schema = 1\n[server]\nlog_level = \"debug\"\nlog_format = \"json\"\n", "t.toml");
  ASSERT_TRUE(p) << p.error().message();
  EXPECT_EQ(p->server.log_level, "debug");
  EXPECT_EQ(p->server.log_format, "json");
  EXPECT_EQ(builtinDefault().server.log_level, "info");
  EXPECT_EQ(builtinDefault().server.log_format, "text");
  EXPECT_EQ(parseErr("schema = 1\n[server]\nlog_format = 'xml'\n"),
            "t.toml:3:14: server.log_format = 'xml': expected 'text' or 'json'");
  EXPECT_EQ(parseErr("schema = 1\n[server]\nlog_level = \"warning\"\n"),
            "t.toml:3:13: server.log_level = 'warning': expected 'debug', 'info', 'warn' or "
            "'error'");
}

TEST(PolicyServe, TheFirstErrorInFileOrderWinsAcrossSections) {
  // A tenant error on line 3 is reported before a profile error on line 5.
  EXPECT_EQ(parseErr(R"(schema = 1
[tenants.ci]
max_memory_mb = 1
[profiles.default.limits]
pids = 1
)"),
            "t.toml:3:17: tenant 'ci': max_memory_mb = 1: must be at least 16");
  EXPECT_EQ(parseErr(R"(schema = 1
[profiles.default.limits]
pids = 1
[tenants.ci]
max_memory_mb = 1
)"),
            "t.toml:3:8: profile 'default': limits.pids = 1: must be at least 8");
}

TEST(PolicyServe, TenantWithoutTokenIsFineWhenAnotherHasOne) {
  Policy p =
      parseOk("schema = 1\n[server]\ntcp = \"localhost:8720\"\n[tenants.ci]\ntoken_sha256 = \"" +
              kHash1 + "\"\n[tenants.local]\nmax_sandboxes = 3\n");
  EXPECT_TRUE(p.tenants.at("local").token_sha256.empty());
  EXPECT_EQ(p.tenants.size(), 3u);
}

TEST(PolicyServe, PoolsWithinServerMaxSandboxesAreAccepted) {
  Policy p = parseOk(R"(schema = 1
[server]
max_sandboxes = 4
[profiles.default.lifetime]
pool_size = 2
[profiles.other.lifetime]
pool_size = 2
)");
  EXPECT_EQ(p.profiles.at("other").lifetime.pool_size, 2u);
}

TEST(PolicyServe, ServerAndTenantTablesRoundTrip) {
  auto p = loadFile(dataDir() + "/valid/server_and_tenants.toml");
  ASSERT_TRUE(p.has_value()) << p.error().message();
  std::string text = "schema = 1\n" + serverToToml(p->server);
  for (const auto& [name, tenant] : p->tenants) text += tenantToToml(tenant);
  for (const auto& [name, profile] : p->profiles) text += profileToToml(profile);
  auto again = parse(text, "rt.toml");
  ASSERT_TRUE(again.has_value()) << again.error().message() << "\n" << text;
  EXPECT_EQ(serverToToml(again->server), serverToToml(p->server));
  ASSERT_EQ(again->tenants.size(), p->tenants.size());
  for (const auto& [name, tenant] : p->tenants) {
    EXPECT_EQ(tenantToToml(again->tenants.at(name)), tenantToToml(tenant));
  }
}

// ---- validate(Policy) for policies built in code ----

Policy codePolicy() {
  Policy p = builtinDefault();
  Tenant ci;
  ci.name = "ci";
  ci.token_sha256 = kHash1;
  p.tenants.emplace("ci", ci);
  return p;
}

TEST(PolicyServe, ValidatePolicyRules) {
  struct Case {
    const char* what;
    std::function<void(Policy&)> change;
    std::optional<std::string> error;
  };
  const std::vector<Case> cases = {
      {"as built", [](Policy&) {}, std::nullopt},
      {"socket relative", [](Policy& p) { p.server.socket = "a.sock"; },
       "server.socket = 'a.sock': must be an absolute path"},
      {"socket dotdot", [](Policy& p) { p.server.socket = "/run/../a.sock"; },
       "server.socket = '/run/../a.sock': must not contain '..'"},
      {"socket 107 bytes", [](Policy& p) { p.server.socket = "/" + std::string(106, 's'); },
       std::nullopt},
      {"socket 108 bytes", [](Policy& p) { p.server.socket = "/" + std::string(107, 's'); },
       "server.socket = '/" + std::string(107, 's') +
           "': 108 bytes, longer than the 107 a Unix socket address holds"},
      {"tls cert without key",
       [](Policy& p) {
         p.server.tcp = "127.0.0.1:8443";
         p.server.tls_cert = "/etc/airlock/tls.crt";
       },
       "server.tls_key is empty: TLS needs both tls_cert (PEM certificate chain) and tls_key "
       "(PEM private key)"},
      {"tls client ca without tls", [](Policy& p) { p.server.tls_client_ca = "/etc/ca.pem"; },
       "server.tls_client_ca = '/etc/ca.pem': client certificates need TLS; set "
       "server.tls_cert and server.tls_key"},
      {"tls without tcp",
       [](Policy& p) {
         p.server.tls_cert = "/etc/airlock/tls.crt";
         p.server.tls_key = "/etc/airlock/tls.key";
       },
       "server.tls_cert is set but server.tcp is empty: TLS applies to the TCP listener; set "
       "server.tcp (e.g. '0.0.0.0:8443') or remove the TLS keys"},
      {"tls key relative",
       [](Policy& p) {
         p.server.tcp = "0.0.0.0:8443";
         p.server.tls_cert = "/etc/airlock/tls.crt";
         p.server.tls_key = "tls.key";
       },
       "server.tls_key = 'tls.key': must be an absolute path"},
      {"mode 0777", [](Policy& p) { p.server.socket_mode = "0777"; }, std::nullopt},
      {"mode 600", [](Policy& p) { p.server.socket_mode = "600"; }, std::nullopt},
      {"mode 0", [](Policy& p) { p.server.socket_mode = "0"; }, std::nullopt},
      {"mode 01777", [](Policy& p) { p.server.socket_mode = "01777"; },
       "server.socket_mode = '01777': must be octal permission bits such as '0660', at most "
       "'0777' (no setuid, setgid or sticky bit)"},
      {"mode 0668", [](Policy& p) { p.server.socket_mode = "0668"; },
       "server.socket_mode = '0668': must be octal permission bits such as '0660', at most "
       "'0777' (no setuid, setgid or sticky bit)"},
      {"mode empty", [](Policy& p) { p.server.socket_mode = ""; },
       "server.socket_mode = '': must be octal permission bits such as '0660', at most '0777' "
       "(no setuid, setgid or sticky bit)"},
      {"group gid", [](Policy& p) { p.server.socket_group = "1001"; }, std::nullopt},
      {"group dash", [](Policy& p) { p.server.socket_group = "-x"; },
       "server.socket_group = '-x': must be a group name (letters, digits, '_', '-', '.'), a "
       "numeric gid, or '' for root's group"},
      {"tcp v4", [](Policy& p) { p.server.tcp = "127.0.0.1:1"; }, std::nullopt},
      {"tcp v6", [](Policy& p) { p.server.tcp = "[::1]:65535"; }, std::nullopt},
      {"tcp other loopback", [](Policy& p) { p.server.tcp = "127.0.0.2:80"; },
       "server.tcp = '127.0.0.2:80': only 127.0.0.1, [::1] or localhost may serve plain HTTP; "
       "another address needs TLS: set server.tls_cert and server.tls_key (or put a TLS proxy "
       "in front, docs/api.md)"},
      {"tcp any v6", [](Policy& p) { p.server.tcp = "[::]:80"; },
       "server.tcp = '[::]:80': only 127.0.0.1, [::1] or localhost may serve plain HTTP; "
       "another address needs TLS: set server.tls_cert and server.tls_key (or put a TLS proxy "
       "in front, docs/api.md)"},
      {"tcp port 0", [](Policy& p) { p.server.tcp = "127.0.0.1:0"; },
       "server.tcp = '127.0.0.1:0': the port must be a number from 1 to 65535"},
      {"tcp no port", [](Policy& p) { p.server.tcp = "127.0.0.1"; },
       "server.tcp = '127.0.0.1': expected HOST:PORT, e.g. '127.0.0.1:8720'"},
      {"tcp empty port", [](Policy& p) { p.server.tcp = "localhost:"; },
       "server.tcp = 'localhost:': the port must be a number from 1 to 65535"},
      {"tcp v6 no close", [](Policy& p) { p.server.tcp = "[::1:80"; },
       "server.tcp = '[::1:80': expected [IPV6]:PORT, e.g. '[::1]:8720'"},
      {"tcp no tokens",
       [](Policy& p) {
         p.tenants.erase("ci");
         p.server.tcp = "127.0.0.1:8720";
       },
       "server.tcp = '127.0.0.1:8720': no tenant has a token_sha256, so every TCP request would "
       "be refused; give a tenant a token or set tcp = ''"},
      {"connections 0", [](Policy& p) { p.server.max_connections = 0; },
       "server.max_connections = 0: must be at least 1"},
      {"connections 65537", [](Policy& p) { p.server.max_connections = 65537; },
       "server.max_connections = 65537: must be at most 65536"},
      {"header timeout 0", [](Policy& p) { p.server.header_timeout_s = 0; },
       "server.header_timeout_s = 0: must be at least 1"},
      {"requests per client 16385", [](Policy& p) { p.server.max_requests_per_client = 16385; },
       "server.max_requests_per_client = 16385: must be at most 16384"},
      {"json 0", [](Policy& p) { p.server.max_json_body_kb = 0; },
       "server.max_json_body_kb = 0: must be at least 1"},
      {"upload 0", [](Policy& p) { p.server.max_upload_mb = 0; },
       "server.max_upload_mb = 0: must be at least 1"},
      {"sandboxes 0", [](Policy& p) { p.server.max_sandboxes = 0; },
       "server.max_sandboxes = 0: must be at least 1"},
      {"state dir root", [](Policy& p) { p.server.state_dir = "/"; },
       "server.state_dir = '/': must not be '/' (that is the whole host)"},
      {"drain 0", [](Policy& p) { p.server.drain_timeout_s = 0; }, std::nullopt},
      {"reattach grace 0", [](Policy& p) { p.server.reattach_grace_s = 0; }, std::nullopt},
      {"reattach grace a day and a second", [](Policy& p) { p.server.reattach_grace_s = 86401; },
       "server.reattach_grace_s = 86401: must be at most 86400"},
      {"drain 3601", [](Policy& p) { p.server.drain_timeout_s = 3601; },
       "server.drain_timeout_s = 3601: must be at most 3600"},
      {"audit log absolute", [](Policy& p) { p.audit.log = "/var/log/airlock/audit.jsonl"; },
       std::nullopt},
      {"audit log relative", [](Policy& p) { p.audit.log = "audit.jsonl"; },
       "audit.log = 'audit.jsonl': must be an absolute path"},
      {"audit max_mb 0", [](Policy& p) { p.audit.max_mb = 0; },
       "audit.max_mb = 0: must be at least 1"},
      {"audit keep 0", [](Policy& p) { p.audit.keep = 0; }, std::nullopt},
      {"audit keep 1001", [](Policy& p) { p.audit.keep = 1001; },
       "audit.keep = 1001: must be at most 1000"},
      {"audit ring one page", [](Policy& p) { p.audit.ring_kb = 4; }, std::nullopt},
      {"audit ring not a power of two", [](Policy& p) { p.audit.ring_kb = 3000; },
       "audit.ring_kb = 3000: must be a power of two from 4 (one page) to 1048576 (1 GiB)"},
      {"run ring not a power of two", [](Policy& p) { p.audit.run_ring_kb = 100; },
       "audit.run_ring_kb = 100: must be a power of two from 4 (one page) to 1048576 (1 GiB)"},
      {"audit ring below a page", [](Policy& p) { p.audit.ring_kb = 2; },
       "audit.ring_kb = 2: must be a power of two from 4 (one page) to 1048576 (1 GiB)"},
      {"audit webhook",
       [](Policy& p) {
         p.audit.log = "/var/log/airlock/audit.jsonl";
         p.audit.webhook_url = "http://127.0.0.1:9000/hook";
         p.audit.webhook_secret_file = "/etc/airlock/webhook.key";
         p.audit.record_code = true;
       },
       std::nullopt},
      {"audit webhook https",
       [](Policy& p) {
         p.audit.log = "/var/log/airlock/audit.jsonl";
         p.audit.webhook_url = "https://hooks.example/airlock";
       },
       "audit.webhook_url = 'https://hooks.example/airlock': https is not supported; reach a TLS "
       "service through a local proxy"},
      {"audit webhook without a log",
       [](Policy& p) { p.audit.webhook_url = "http://127.0.0.1:9000/hook"; },
       "audit.webhook_url = 'http://127.0.0.1:9000/hook': needs audit.log (the webhook sends the "
       "records the log is written)"},
      {"audit webhook unknown event",
       [](Policy& p) {
         p.audit.webhook_events = {"sandbox", "exce"};
       },
       "audit.webhook_events[1] = 'exce': not an audit record type; expected one of sandbox, "
       "execution, transfer, review, exec, net, package, port"},
      {"audit webhook no events",
       [](Policy& p) {
         p.audit.log = "/var/log/airlock/audit.jsonl";
         p.audit.webhook_url = "http://127.0.0.1:9000/hook";
         p.audit.webhook_events = {};
       },
       "audit.webhook_events = []: name at least one record type to send, or leave webhook_url "
       "empty"},
      {"audit webhook timeout 0", [](Policy& p) { p.audit.webhook_timeout_ms = 0; },
       "audit.webhook_timeout_ms = 0: must be at least 100"},
      {"audit webhook retries 21", [](Policy& p) { p.audit.webhook_max_retries = 21; },
       "audit.webhook_max_retries = 21: must be at most 20"},
      {"audit webhook queue 0", [](Policy& p) { p.audit.webhook_queue = 0; },
       "audit.webhook_queue = 0: must be at least 1"},
      {"audit webhook secret relative", [](Policy& p) { p.audit.webhook_secret_file = "key"; },
       "audit.webhook_secret_file = 'key': must be an absolute path"},
      {"tenant disabled", [](Policy& p) { p.tenants.at("default").max_sandboxes = 0; },
       std::nullopt},
      {"tenant too many", [](Policy& p) { p.tenants.at("default").max_sandboxes = 100001; },
       "tenant 'default': max_sandboxes = 100001: must be at most 100000"},
      {"tenant unknown profile", [](Policy& p) { p.tenants.at("ci").profiles = {"defualt"}; },
       "tenant 'ci': profiles[0] = 'defualt': no such profile (did you mean 'default'?)"},
      {"token duplicate", [](Policy& p) { p.tenants.at("default").token_sha256 = kHash1; },
       "tenant 'default': token_sha256 is also the token_sha256 of tenant 'ci': each token must "
       "name one tenant"},
      {"token short", [](Policy& p) { p.tenants.at("ci").token_sha256 = "abc"; },
       "tenant 'ci': token_sha256: must be 64 lowercase hex digits, the sha256 of the token (e.g. "
       "`printf %s \"$TOKEN\" | sha256sum`), not the token itself; got 3 characters"},
      {"no default tenant", [](Policy& p) { p.tenants.erase("default"); },
       "tenants: there is no tenant 'default'"},
      {"tenant misnamed", [](Policy& p) { p.tenants.at("ci").name = "cj"; },
       "tenants.ci: the tenant's name is 'cj'"},
      {"pool over host",
       [](Policy& p) {
         p.server.max_sandboxes = 5;
         p.profiles.at("default").lifetime.pool_size = 6;
       },
       "profile 'default': lifetime.pool_size: the profiles' pools add up to 6 warm sandboxes, "
       "above server.max_sandboxes = 5: warm sandboxes count as live sandboxes of this host"},
      {"profile rule", [](Policy& p) { p.profiles.at("default").lifetime.lifetime_s = 0; },
       "profile 'default': lifetime.lifetime_s = 0: must be at least 1"},
      {"default profile missing", [](Policy& p) { p.default_profile = "x"; },
       "default_profile = 'x' names no profile"},
  };
  for (const Case& c : cases) {
    Policy p = codePolicy();
    c.change(p);
    auto r = validate(p);
    if (!c.error) {
      EXPECT_TRUE(r.has_value()) << c.what << ": " << r.error().message();
    } else {
      ASSERT_FALSE(r.has_value()) << c.what;
      EXPECT_EQ(r.error().message(), *c.error) << c.what;
    }
  }
}

TEST(PolicyServe, LifetimeRulesAtAndPastTheirBounds) {
  struct Case {
    const char* what;
    std::function<void(Lifetime&)> change;
    std::optional<std::string> error;
  };
  const std::vector<Case> cases = {
      {"keep-alive 1", [](Lifetime& l) { l.keep_alive_s = 1; }, std::nullopt},
      {"keep-alive = max",
       [](Lifetime& l) {
         l.keep_alive_s = 3600;
         l.lifetime_s = 3600;
       },
       std::nullopt},
      {"keep-alive above max",
       [](Lifetime& l) {
         l.keep_alive_s = 3601;
         l.lifetime_s = 7200;
       },
       "lifetime.keep_alive_s = 3601 must be at most lifetime.max_keep_alive_s = 3600: the "
       "default must be a value a request may ask for"},
      {"lifetime above max", [](Lifetime& l) { l.lifetime_s = 86401; },
       "lifetime.lifetime_s = 86401 must be at most lifetime.max_lifetime_s = 86400: the default "
       "must be a value a request may ask for"},
      {"a year", [](Lifetime& l) { l.max_lifetime_s = 31536000; }, std::nullopt},
      {"past a year", [](Lifetime& l) { l.max_lifetime_s = 31536001; },
       "lifetime.max_lifetime_s = 31536001: must be at most 31536000"},
      {"max keep-alive 0", [](Lifetime& l) { l.max_keep_alive_s = 0; },
       "lifetime.max_keep_alive_s = 0: must be at least 1"},
      {"pool 1000", [](Lifetime& l) { l.pool_size = 1000; }, std::nullopt},
      {"pool 1001", [](Lifetime& l) { l.pool_size = 1001; },
       "lifetime.pool_size = 1001: must be at most 1000"},
  };
  for (const Case& c : cases) {
    Profile p;
    p.name = "t";
    c.change(p.lifetime);
    auto r = validate(p);
    if (!c.error) {
      EXPECT_TRUE(r.has_value()) << c.what << ": " << r.error().message();
    } else {
      ASSERT_FALSE(r.has_value()) << c.what;
      EXPECT_EQ(r.error().message(), "profile 't': " + *c.error) << c.what;
    }
  }
}

// ---- helpers the service calls ----

TEST(PolicyServe, KeepAliveAndLifetimeForARequest) {
  Lifetime l;
  EXPECT_EQ(l.keepAliveFor(std::nullopt).value(), 300);
  EXPECT_EQ(l.keepAliveFor(1).value(), 1);
  EXPECT_EQ(l.keepAliveFor(3600).value(), 3600);
  auto over = l.keepAliveFor(3601);
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().message(),
            "keep_alive_s = 3601: above this profile's maximum of 3600 s "
            "(lifetime.max_keep_alive_s)");
  auto zero = l.keepAliveFor(0);
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error().message(), "keep_alive_s = 0: must be at least 1");
  EXPECT_FALSE(l.keepAliveFor(-5));

  EXPECT_EQ(l.lifetimeFor(std::nullopt).value(), 3600);
  EXPECT_EQ(l.lifetimeFor(86400).value(), 86400);
  auto long_life = l.lifetimeFor(int64_t{1} << 40);
  ASSERT_FALSE(long_life);
  EXPECT_EQ(long_life.error().message(),
            "lifetime_s = 1099511627776: above this profile's maximum of 86400 s "
            "(lifetime.max_lifetime_s)");
}

TEST(PolicyServe, TcpEndpoints) {
  EXPECT_EQ(parseTcp("").value(), std::nullopt);
  auto v4 = parseTcp("127.0.0.1:8720");
  ASSERT_TRUE(v4 && *v4);
  EXPECT_EQ((*v4)->host, "127.0.0.1");
  EXPECT_EQ((*v4)->port, 8720);
  auto local = parseTcp("localhost:1");
  ASSERT_TRUE(local && *local);
  EXPECT_EQ((*local)->host, "127.0.0.1");
  EXPECT_EQ((*local)->port, 1);
  auto v6 = parseTcp("[::1]:65535");
  ASSERT_TRUE(v6 && *v6);
  EXPECT_EQ((*v6)->host, "::1");
  EXPECT_EQ((*v6)->port, 65535);
  for (const char* bad :
       {"0.0.0.0:1", "10.0.0.1:80", "example.com:80", "127.0.0.1:65536", "127.0.0.1:-1",
        "127.0.0.1:+80", "127.0.0.1:8o", "[::1]", "::1:80", ":80", "[127.0.0.1]:80"}) {
    auto r = parseTcp(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_TRUE(r.error().message().starts_with("server.tcp = '" + std::string(bad) + "': "))
        << r.error().message();
  }
}

TEST(PolicyServe, TenantLookup) {
  Policy p = codePolicy();
  Tenant limited;
  limited.name = "limited";
  limited.profiles = {"default"};
  limited.token_sha256 = kHash2;
  p.tenants.emplace("limited", limited);
  ASSERT_TRUE(validate(p));

  auto def = p.tenant("");
  ASSERT_TRUE(def);
  EXPECT_EQ((*def)->name, "default");
  EXPECT_EQ(p.tenant("ci").value()->name, "ci");
  auto missing = p.tenant("nope");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message(), "unknown tenant 'nope' (policy <built-in>)");

  EXPECT_EQ(p.tenantForTokenSha256(kHash1), "ci");
  EXPECT_EQ(p.tenantForTokenSha256(kHash2), "limited");
  EXPECT_EQ(p.tenantForTokenSha256(std::string(64, '3')), std::nullopt);
  // Tenants without a token are never found by one, whatever is presented.
  EXPECT_EQ(p.tenantForTokenSha256(""), std::nullopt);
  EXPECT_EQ(p.tenantForTokenSha256(kHash1.substr(0, 63)), std::nullopt);
  EXPECT_EQ(p.tenantForTokenSha256(kHash1 + "1"), std::nullopt);
  // The service hashes the presented token with the same function.
  p.tenants.at("ci").token_sha256 = sha256Hex("s3cret");
  EXPECT_EQ(p.tenantForTokenSha256(sha256Hex("s3cret")), "ci");
  EXPECT_EQ(p.tenantForTokenSha256(sha256Hex("s3cret\n")), std::nullopt);

  EXPECT_TRUE(p.tenants.at("default").allowsProfile("default"));
  EXPECT_TRUE(p.tenants.at("default").allowsProfile("anything"));  // []: all
  EXPECT_TRUE(p.tenants.at("limited").allowsProfile("default"));
  EXPECT_FALSE(p.tenants.at("limited").allowsProfile("other"));
  EXPECT_FALSE(p.tenants.at("limited").allowsProfile(""));
}

TEST(PolicyServe, SocketModeBits) {
  Server s;
  EXPECT_EQ(s.socketModeBits(), 0660u);
  s.socket_mode = "600";
  EXPECT_EQ(s.socketModeBits(), 0600u);
  s.socket_mode = "0777";
  EXPECT_EQ(s.socketModeBits(), 0777u);
  s.socket_mode = "9";
  EXPECT_EQ(s.socketModeBits(), UINT32_MAX);
}

// ---- relaxations and explain ----

// Plain HTTP only on 127.0.0.1 and ::1; with TLS any IP address, never a host name.
TEST(PolicyServe, TcpBeyondLoopbackNeedsTls) {
  for (const char* spec : {"0.0.0.0:8443", "127.0.0.2:8443", "192.0.2.7:443", "[::]:8443"}) {
    auto plain = parseTcp(spec);
    ASSERT_FALSE(plain) << spec;
    EXPECT_NE(plain.error().message().find("needs TLS: set server.tls_cert and server.tls_key"),
              std::string::npos)
        << plain.error().message();
    auto tls = parseTcp(spec, true);
    ASSERT_TRUE(tls && *tls) << spec;
    EXPECT_FALSE((*tls)->loopback) << spec;
  }
  auto local = parseTcp("127.0.0.1:8443", true);
  ASSERT_TRUE(local && *local);
  EXPECT_TRUE((*local)->loopback);
  auto v6 = parseTcp("[::]:8443", true);
  EXPECT_EQ((*v6)->host, "::");
  for (const char* bad : {"example.com:443", "[127.0.0.1]:80", "0.0.0.0:0", "::1:80"}) {
    EXPECT_FALSE(parseTcp(bad, true)) << bad;
  }
}

TEST(PolicyServe, TcpAndWorldWritableSocketAreRelaxations) {
  Policy p = codePolicy();
  EXPECT_TRUE(relaxations(p).empty());
  p.server.tcp = "127.0.0.1:8720";
  p.server.socket_mode = "0666";
  p.profiles.at("default").landlock = false;
  EXPECT_EQ(relaxations(p),
            (std::vector<std::string>{
                "profile 'default': landlock = false: no Landlock ruleset on top of the "
                "namespaces",
                "server.tcp = '127.0.0.1:8720': the API also listens on loopback TCP (tenants "
                "with a token_sha256)",
                "server.socket_mode = '0666': every local user may connect to the API as tenant "
                "'default'",
            }));
  // Group-writable is what socket_group is for; lifetimes and pools loosen no isolation.
  p = codePolicy();
  p.server.socket_mode = "0770";
  p.profiles.at("default").lifetime.pool_size = 5;
  p.profiles.at("default").lifetime.max_lifetime_s = 31536000;
  EXPECT_TRUE(relaxations(p).empty());
}

TEST(PolicyServe, ExplainShowsProfileServerAndTenants) {
  auto p = loadFile(dataDir() + "/valid/server_and_tenants.toml");
  ASSERT_TRUE(p.has_value()) << p.error().message();
  const std::string text = explainText(*p, p->profiles.at("quick"));
  const std::string path = dataDir() + "/valid/server_and_tenants.toml";
  EXPECT_EQ(
      text,
      "policy " + path + " (sha256 " + p->hash +
          ")\n"
          "profile 'quick'\n"
          "  isolation namespaces, user user, network none, landlock on\n"
          "  limits: timeout 30 s, memory 256 MiB, pids 256, cpu 100 %, file size 256 MiB, "
          "open files 1024, output 1048576 bytes/stream, workspace 64 MiB, /tmp 32 MiB\n"
          "  lifetime: keep-alive 30 s (requests up to 3600 s), lifetime 120 s (requests "
          "up to 86400 s), warm pool 4\n"
          "  network rules: none\n"
          "  audit: exec on, network on, syscall counts off, drops are counted\n"
          "  transfers: plugins archive, http, hostdir\n"
          "    archive: 1024 MiB per transfer, 4096 MiB per sandbox, 100000 files, depth "
          "64, ratio 200\n"
          "    http: 1024 MiB per transfer, 4096 MiB per sandbox, 100000 files, depth 64, "
          "ratio 200; URLs none; redirects 3; timeouts connect 10 s, idle 30 s, total 600 "
          "s; protected ranges blocked; CAs the system's\n"
          "    hostdir: 1024 MiB per transfer, 4096 MiB per sandbox, 100000 files, depth "
          "64, ratio 200; roots all declared\n"
          "  languages: python node shell\n"
          "  relaxations: none\n"
          "server\n"
          "  socket /run/airlock/api.sock, mode 660, group airlock\n"
          "  tcp [::1]:8720 (bearer tokens only)\n"
          "  connections 64 (1024 a client), requests 512 (256 a client), timeouts idle 60 s, "
          "header 10 s, io 60 s\n"
          "  JSON body 1024 KiB, upload 64 MiB, sandboxes 20 (warm pools "
          "6), drain 0 s, reattach grace 600 s\n"
          "  state dir /srv/airlock/state\n"
          "  relaxation: server.tcp = '[::1]:8720': the API also listens on loopback TCP "
          "(tenants with a token_sha256)\n"
          "audit\n"
          "  log off, ring buffer 4096 KiB (serve), 256 KiB (run)\n"
          "  execution records: sha256 only\n"
          "transfer\n"
          "  roots: none\n"
          "  uploads spooled in /var/tmp\n"
          "tenants\n"
          "  tenant 'ci': sandboxes 10, memory 8192 MiB, profiles quick, token sha256 "
          "5b4d7e1c2a3f...\n"
          "  tenant 'default': sandboxes 4, memory 4096 MiB, profiles all, token none "
          "(Unix socket only)\n"
          "  tenant 'notebooks': sandboxes 100, memory 65536 MiB, profiles default, quick, "
          "token sha256 000000000000...\n");

  const std::string one = explainText(*p, p->profiles.at("default"), &p->tenants.at("ci"));
  EXPECT_NE(one.find("tenants\n  tenant 'ci': sandboxes 10"), std::string::npos) << one;
  EXPECT_EQ(one.find("tenant 'default'"), std::string::npos) << one;
  EXPECT_NE(one.find("profile 'default'\n"), std::string::npos) << one;
}

TEST(PolicyServe, ExplainOfTheBuiltInDefault) {
  Policy p = builtinDefault();
  const std::string text = explainText(p, p.profiles.at("default"));
  EXPECT_NE(text.find("memory 1024 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("  socket /run/airlock/airlock.sock, mode 0660, group root's\n  tcp off\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  lifetime: keep-alive 300 s (requests up to 3600 s), lifetime 3600 s "
                      "(requests up to 86400 s), warm pool 0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("tenants\n  tenant 'default': sandboxes 100, memory 65536 MiB, profiles "
                      "all, token none (Unix socket only)\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("relaxation:"), std::string::npos) << text;
}

}  // namespace
}  // namespace airlock::policy
