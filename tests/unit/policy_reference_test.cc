// policy/examples/reference.toml, the struct in policy.h, the parser's key table and
// docs/policy.md describe the same keys; these tests fail when one of them drifts.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>

#include "airlock/policy/keys.h"
#include "airlock/policy/policy.h"
#include "airlock/toml.h"
#include "policy_test_util.h"

namespace airlock::policy {
namespace {

using test::examplesDir;
using test::slurp;

const std::string kReference = examplesDir() + "/reference.toml";

// Dotted keys under one profile table; env and packages.pins are one key each (their entries are
// free-form).
void collectKeys(const toml::table& table, const std::string& prefix, std::set<std::string>& out) {
  for (auto&& [k, v] : table) {
    const std::string path = prefix + std::string(k.str());
    if (v.is_table() && path != "env" && path != "packages.pins") {
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

TEST(PolicyReference, ListsEveryServerAndTenantKeyAndNoOther) {
  toml::table doc = toml::parse_file(kReference);
  const toml::table* server = doc["server"].as_table();
  ASSERT_NE(server, nullptr);
  std::set<std::string> in_server;
  collectKeys(*server, "", in_server);
  const auto server_keys = serverKeys();
  EXPECT_EQ(in_server, std::set<std::string>(server_keys.begin(), server_keys.end()));
  EXPECT_EQ(server_keys.size(), in_server.size());

  const toml::table* audit = doc["audit"].as_table();
  ASSERT_NE(audit, nullptr);
  std::set<std::string> in_audit;
  collectKeys(*audit, "", in_audit);
  const auto audit_keys = auditKeys();
  EXPECT_EQ(in_audit, std::set<std::string>(audit_keys.begin(), audit_keys.end()));
  EXPECT_EQ(audit_keys.size(), in_audit.size());

  const toml::table* egress = doc["egress"].as_table();
  ASSERT_NE(egress, nullptr);
  std::set<std::string> in_egress;
  collectKeys(*egress, "", in_egress);
  const auto egress_keys = egressKeys();
  EXPECT_EQ(in_egress, std::set<std::string>(egress_keys.begin(), egress_keys.end()));
  EXPECT_EQ(egress_keys.size(), in_egress.size());

  const toml::table* transfer = doc["transfer"].as_table();
  ASSERT_NE(transfer, nullptr);
  std::set<std::string> in_transfer;
  collectKeys(*transfer, "", in_transfer);
  // [transfer.roots] is empty by default: the table stands for its key.
  ASSERT_NE(transfer->get_as<toml::table>("roots"), nullptr);
  in_transfer.insert("roots");
  const auto transfer_keys = transferKeys();
  EXPECT_EQ(in_transfer, std::set<std::string>(transfer_keys.begin(), transfer_keys.end()));

  const toml::table* packages = doc["packages"].as_table();
  ASSERT_NE(packages, nullptr);
  std::set<std::string> in_packages;
  collectKeys(*packages, "", in_packages);
  const auto packages_keys = packageSettingsKeys();
  EXPECT_EQ(in_packages, std::set<std::string>(packages_keys.begin(), packages_keys.end()));

  const toml::table* tenant = doc["tenants"]["default"].as_table();
  ASSERT_NE(tenant, nullptr);
  std::set<std::string> in_tenant;
  collectKeys(*tenant, "", in_tenant);
  const auto tenant_keys = tenantKeys();
  EXPECT_EQ(in_tenant, std::set<std::string>(tenant_keys.begin(), tenant_keys.end()));
  EXPECT_EQ(tenant_keys.size(), in_tenant.size());
}

TEST(PolicyReference, DefaultProfileHoldsTheStructDefaults) {
  auto p = loadFile(kReference);
  ASSERT_TRUE(p.has_value()) << p.error().message();
  Profile defaults;
  defaults.name = "default";
  EXPECT_EQ(profileToToml(p->profiles.at("default")), profileToToml(defaults));
  EXPECT_TRUE(relaxations(p->profiles.at("default")).empty());
  EXPECT_EQ(p->profiles.at("quick").limits.timeout_s, 5u);
  EXPECT_EQ(serverToToml(p->server), serverToToml(Server{}));
  EXPECT_EQ(auditSettingsToToml(p->audit), auditSettingsToToml(AuditSettings{}));
  EXPECT_EQ(egressSettingsToToml(p->egress), egressSettingsToToml(EgressSettings{}));
  EXPECT_EQ(transferSettingsToToml(p->transfer), transferSettingsToToml(TransferSettings{}));
  EXPECT_EQ(packageSettingsToToml(p->packages), packageSettingsToToml(PackageSettings{}));
  ASSERT_EQ(p->tenants.size(), 1u);
  Tenant tenant_defaults;
  tenant_defaults.name = "default";
  EXPECT_EQ(tenantToToml(p->tenants.at("default")), tenantToToml(tenant_defaults));
  EXPECT_TRUE(relaxations(*p).empty());
}

TEST(PolicyReference, EveryKeyLineHasAComment) {
  std::istringstream in(slurp(kReference));
  std::string line;
  int key_lines = 0;
  bool in_default = false;
  while (std::getline(in, line)) {
    if (line.starts_with("[")) {
      in_default = line.starts_with("[profiles.default") || line.starts_with("[server]") ||
                   line.starts_with("[audit]") || line.starts_with("[egress]") ||
                   line.starts_with("[transfer]") || line.starts_with("[packages]") ||
                   line.starts_with("[tenants.default]");
    }
    if (!in_default || line.empty() || line.starts_with("#") || line.starts_with("[")) continue;
    ++key_lines;
    EXPECT_NE(line.find('#'), std::string::npos) << "no unit comment on: " << line;
  }
  // Profile keys minus env and extends, then every server, audit, egress, transfer (minus the
  // roots table), packages and tenant key.
  EXPECT_EQ(key_lines,
            static_cast<int>(profileKeys().size() - 2 + serverKeys().size() + auditKeys().size() +
                             egressKeys().size() + transferKeys().size() - 1 +
                             packageSettingsKeys().size() + tenantKeys().size()));
}

// Structured bindings only compile with the exact member count: a field added to policy.h
// breaks this test until the key table in policy/schema.cc, reference.toml and
// docs/policy.md learn about it (then update the counts here).
TEST(PolicyReference, StructFieldCountsMatchTheKeyTable) {
  [[maybe_unused]] auto [l1, l2, l3, l4, l5, l6, l7, l8, l9] = Limits{};
  [[maybe_unused]] auto [f1, f2] = Filesystem{};
  [[maybe_unused]] auto [n1, n2] = Network{};
  [[maybe_unused]] auto [a1, a2, a3, a4] = Audit{};
  [[maybe_unused]] auto [g1, g2, g3, g4, g5, g6, g7, g8, g9, g10, g11, g12] = AuditSettings{};
  [[maybe_unused]] auto [x1, x2, x3, x4] = EgressSettings{};
  [[maybe_unused]] auto [s1, s2] = Seccomp{};
  [[maybe_unused]] auto [t1, t2, t3, t4, t5, t6, t7, t8] = Lifetime{};
  [[maybe_unused]] auto [w1, w2, w3, w4] = Gvisor{};
  [[maybe_unused]] auto [m1, m2, m3, m4, m5, m6, m7, m8] = Microvm{};
  [[maybe_unused]] auto [p1, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11, p12, p13, p14, p15, p16, p17,
                         p18, p19, p20, p21, p22] = Profile{};
  [[maybe_unused]] auto [i1, i2, i3, i4, i5, i6] = Packages{};
  [[maybe_unused]] auto [j1, j2, j3, j4, j5, j6] = PackageSettings{};
  [[maybe_unused]] auto [k1, k2, k3, k4] = Transfer{};
  [[maybe_unused]] auto [k5, k6, k7, k8, k9] = TransferLimits{};
  [[maybe_unused]] auto [h1, h2, h3, h4, h5, h6, h7, h8] = TransferHttp{};
  [[maybe_unused]] auto [d1, d2] = TransferHostdir{};
  [[maybe_unused]] auto [z1, z2, z3] = TransferSettings{};
  [[maybe_unused]] auto [r1, r2, r3, r4, r5, r6, r7, r8, r9, r10, r11] = Review{};
  [[maybe_unused]] auto [v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14, v15, v16, v17,
                         v18, v19, v20, v21, v22, v23, v24, v25, v26] = Server{};
  [[maybe_unused]] auto [e1, e2, e3, e4, e5] = Tenant{};
  [[maybe_unused]] auto [y1, y2, y3, y4, y5, y6, y7, y8, y9, y10, y11] = Policy{};
  // Profile: 22 members minus name, minus the 11 sub-tables, plus their 9 + 8 + 2 + 2 + 2 + 4 + 4
  // + 8 keys, plus `extends`, plus review's 5 own keys and its reviewers' 3 + 2 + 6 + 2 + 2 + 3,
  // plus transfer's 1 own key and its plugins' 5, 5 + 7, 5 + 1, plus packages' 6.
  EXPECT_EQ(profileKeys().size(), 22u - 1 - 11 + 9 + 8 + 2 + 2 + 2 + 4 + 4 + 8 + 1 + 5 + 3 + 2 + 6 +
                                      2 + 2 + 3 + 1 + 5 + 12 + 6 + 6);
  EXPECT_EQ(packageSettingsKeys().size(), 6u);
  EXPECT_EQ(transferKeys().size(), 3u);
  EXPECT_EQ(serverKeys().size(), 26u);
  EXPECT_EQ(auditKeys().size(), 12u);
  EXPECT_EQ(egressKeys().size(), 4u);
  EXPECT_EQ(tenantKeys().size(), 5u - 1);  // minus name
}

// A valid value for every [server] and [tenants.<name>] key, different from its default. A key
// added to the schema fails here until it gets one.
const std::map<std::string, std::string> kServerValues = {
    {"socket", "\"/run/x/a.sock\""},
    {"socket_mode", "\"0600\""},
    {"socket_group", "\"airlock\""},
    {"tcp", "\"127.0.0.1:9\""},
    {"node", "\"node-7\""},
    {"agent_check", "\"127.0.0.1:7\""},
    {"max_connections", "7"},
    {"max_json_body_kb", "7"},
    {"max_upload_mb", "7"},
    {"max_sandboxes", "7"},
    {"state_dir", "\"/srv/airlock\""},
    {"drain_timeout_s", "7"},
    {"reattach_grace_s", "7"},
    {"max_connections_per_client", "7"},
    {"max_requests", "7"},
    {"max_requests_per_client", "7"},
    {"idle_timeout_s", "7"},
    {"header_timeout_s", "7"},
    {"io_timeout_s", "7"},
    {"mcp_max_sessions_per_tenant", "7"},
    {"mcp_idle_timeout_s", "7"},
    {"tls_cert", "\"/etc/airlock/tls.crt\""},
    {"tls_key", "\"/etc/airlock/tls.key\""},
    {"tls_client_ca", "\"/etc/airlock/clients.pem\""},
    {"log_level", "\"debug\""},
    {"log_format", "\"json\""},
};
const std::map<std::string, std::string> kAuditValues = {
    {"log", "\"/var/log/airlock/audit.jsonl\""},
    {"max_mb", "7"},
    {"keep", "7"},
    {"ring_kb", "64"},
    {"run_ring_kb", "64"},
    {"record_code", "true"},
    {"webhook_url", "\"http://127.0.0.1:9000/hook\""},
    {"webhook_secret_file", "\"/etc/airlock/webhook.key\""},
    {"webhook_events", "[\"sandbox\", \"execution\"]"},
    {"webhook_timeout_ms", "700"},
    {"webhook_max_retries", "7"},
    {"webhook_queue", "7"},
};
const std::map<std::string, std::string> kEgressValues = {
    {"ipv4_range", "\"10.77.0.0/16\""},
    {"ipv6_range", "\"\""},
    {"nameservers", "[\"192.0.2.53\"]"},
    {"mtu", "1400"},
};
const std::map<std::string, std::string> kTransferValues = {
    {"roots", "{ data = \"/srv/data\" }"},
    {"writable_roots", "[\"data\"]"},
    {"spool_dir", "\"/srv/spool\""},
};
const std::map<std::string, std::string> kPackagesValues = {
    {"pypi_index", "\"https://mirror.example/simple/\""},
    {"npm_registry", "\"http://127.0.0.1:4873/\""},
    {"cache_dir", "\"/srv/cache\""},
    {"ca_file", "\"/etc/ssl/mirror.pem\""},
    {"timeout_s", "5"},
    {"port", "8000"},
};
const std::string kHashA(64, 'a');
const std::map<std::string, std::string> kTenantValues = {
    {"max_sandboxes", "7"},
    {"max_memory_mb", "7777"},
    {"profiles", "[\"default\"]"},
    {"token_sha256", "\"" + std::string(64, 'b') + "\""},
};

// Lines that differ between two renderings of the same table.
std::vector<std::string> changedLines(const std::string& before, const std::string& after) {
  std::istringstream a(before), b(after);
  std::string la, lb;
  std::vector<std::string> changed;
  while (std::getline(a, la) && std::getline(b, lb)) {
    if (la != lb) changed.push_back(lb);
  }
  return changed;
}

TEST(PolicyReference, EveryServerAndTenantKeyWritesItsOwnField) {
  // A token tenant so that server.tcp is accepted.
  const std::string token_tenant = "[tenants.ci]\ntoken_sha256 = \"" + kHashA + "\"\n";
  for (const std::string& key : serverKeys()) {
    ASSERT_TRUE(kServerValues.contains(key)) << "give " << key << " a value in kServerValues";
    // The TLS keys are valid only together (and with tcp): each is set beside the others, and
    // compared with a Server holding just the others.
    const bool tls_key = key.starts_with("tls_");
    std::string others;
    Server baseline;
    if (tls_key) {
      baseline.tcp = "127.0.0.1:9";
      others = "tcp = \"127.0.0.1:9\"\n";
      for (auto [name, field] : {std::pair{"tls_cert", &Server::tls_cert},
                                 {"tls_key", &Server::tls_key},
                                 {"tls_client_ca", &Server::tls_client_ca}}) {
        if (name == key) continue;
        others += std::string(name) + " = " + kServerValues.at(name) + "\n";
        const std::string& quoted = kServerValues.at(name);
        baseline.*field = quoted.substr(1, quoted.size() - 2);
      }
    }
    auto p = parse("schema = 1\n[server]\n" + others + key + " = " + kServerValues.at(key) + "\n" +
                       token_tenant,
                   "k.toml");
    ASSERT_TRUE(p.has_value()) << key << ": " << p.error().message();
    auto changed = changedLines(serverToToml(baseline), serverToToml(p->server));
    ASSERT_EQ(changed.size(), 1u) << key;
    EXPECT_EQ(changed[0], key + " = " + kServerValues.at(key)) << key;
  }
  for (const std::string& key : auditKeys()) {
    ASSERT_TRUE(kAuditValues.contains(key)) << "give " << key << " a value in kAuditValues";
    // A webhook needs a log.
    AuditSettings base;
    if (key == "webhook_url") base.log = "/var/log/airlock/audit.jsonl";
    const std::string log = base.log.empty() ? "" : "log = \"" + base.log + "\"\n";
    auto p =
        parse("schema = 1\n[audit]\n" + log + key + " = " + kAuditValues.at(key) + "\n", "k.toml");
    ASSERT_TRUE(p.has_value()) << key << ": " << p.error().message();
    auto changed = changedLines(auditSettingsToToml(base), auditSettingsToToml(p->audit));
    ASSERT_EQ(changed.size(), 1u) << key;
    EXPECT_EQ(changed[0], key + " = " + kAuditValues.at(key)) << key;
  }
  for (const std::string& key : egressKeys()) {
    ASSERT_TRUE(kEgressValues.contains(key)) << "give " << key << " a value in kEgressValues";
    auto p = parse("schema = 1\n[egress]\n" + key + " = " + kEgressValues.at(key) + "\n", "k.toml");
    ASSERT_TRUE(p.has_value()) << key << ": " << p.error().message();
    auto changed =
        changedLines(egressSettingsToToml(EgressSettings{}), egressSettingsToToml(p->egress));
    ASSERT_EQ(changed.size(), 1u) << key;
    EXPECT_EQ(changed[0], key + " = " + kEgressValues.at(key)) << key;
  }
  for (const std::string& key : transferKeys()) {
    ASSERT_TRUE(kTransferValues.contains(key)) << "give " << key << " a value in kTransferValues";
    // writable_roots must name a declared root.
    const std::string roots = key == "writable_roots" ? "roots = { data = \"/srv/data\" }\n" : "";
    auto p =
        parse("schema = 1\n[transfer]\n" + roots + key + " = " + kTransferValues.at(key) + "\n",
              "k.toml");
    ASSERT_TRUE(p.has_value()) << key << ": " << p.error().message();
    EXPECT_NE(transferSettingsToToml(p->transfer), transferSettingsToToml(TransferSettings{}))
        << key;
  }
  for (const std::string& key : packageSettingsKeys()) {
    ASSERT_TRUE(kPackagesValues.contains(key)) << "give " << key << " a value in kPackagesValues";
    auto p =
        parse("schema = 1\n[packages]\n" + key + " = " + kPackagesValues.at(key) + "\n", "k.toml");
    ASSERT_TRUE(p.has_value()) << key << ": " << p.error().message();
    auto changed =
        changedLines(packageSettingsToToml(PackageSettings{}), packageSettingsToToml(p->packages));
    ASSERT_EQ(changed.size(), 1u) << key;
    EXPECT_EQ(changed[0], key + " = " + kPackagesValues.at(key)) << key;
  }
  Tenant defaults;
  defaults.name = "default";
  for (const std::string& key : tenantKeys()) {
    ASSERT_TRUE(kTenantValues.contains(key)) << "give " << key << " a value in kTenantValues";
    auto p = parse("schema = 1\n[tenants.default]\n" + key + " = " + kTenantValues.at(key) + "\n",
                   "k.toml");
    ASSERT_TRUE(p.has_value()) << key << ": " << p.error().message();
    auto changed = changedLines(tenantToToml(defaults), tenantToToml(p->tenants.at("default")));
    ASSERT_EQ(changed.size(), 1u) << key;
    EXPECT_EQ(changed[0], key + " = " + kTenantValues.at(key)) << key;
  }
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
    // The first value of the key's type that differs from its default.
    for (const char* value :
         {"12345", "\"zz\"", "false", "true", "[\"zz\"]", "[{id = \"zz\", pattern = \"zz\"}]",
          "[{name = \"zz\"}]", "{zz = \"zz\"}"}) {
      p = defaults;
      if (applyOverride(p, key + "=" + value) && profileToToml(p) != base) {
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

  // Lifetimes: data science keeps warm sandboxes and lives longer; strict lives shorter.
  EXPECT_EQ((*d)->lifetime.pool_size, 2u);
  EXPECT_GT((*d)->lifetime.keep_alive_s, Lifetime{}.keep_alive_s);
  EXPECT_GT((*d)->lifetime.lifetime_s, Lifetime{}.lifetime_s);
  EXPECT_EQ(ds->profiles.at("data-science-small").lifetime.pool_size, 0u);
  EXPECT_EQ(ds->profiles.at("data-science-small").lifetime.keep_alive_s,
            (*d)->lifetime.keep_alive_s);  // inherited through extends
  EXPECT_LT((*s)->lifetime.keep_alive_s, Lifetime{}.keep_alive_s);
  EXPECT_LT((*s)->lifetime.lifetime_s, Lifetime{}.lifetime_s);
  EXPECT_LT((*s)->lifetime.max_lifetime_s, Lifetime{}.max_lifetime_s);
}

TEST(PolicyDocs, OperatorGuideMentionsEveryKey) {
  const std::string doc = slurp(AIRLOCK_POLICY_DOCS);
  ASSERT_FALSE(doc.empty());
  std::vector<std::string> keys = profileKeys();
  for (const auto& k : serverKeys()) keys.push_back("server." + k);
  for (const auto& k : tenantKeys()) keys.push_back("tenants." + k);
  for (const auto& k : auditKeys()) keys.push_back("audit." + k);
  for (const auto& k : egressKeys()) keys.push_back("egress." + k);
  for (const auto& k : transferKeys()) keys.push_back("transfer." + k);
  for (const auto& k : packageSettingsKeys()) keys.push_back("packages." + k);
  for (const std::string& key : keys) {
    const std::string leaf = key.substr(key.rfind('.') + 1);
    EXPECT_NE(doc.find("`" + leaf + "`"), std::string::npos) << "docs/policy.md misses " << key;
  }
  for (const char* table :
       {"[server]", "[audit]", "[egress]", "[transfer]", "[packages]", "[tenants.<name>]",
        "[profiles.<name>.lifetime]", "[profiles.<name>.audit]", "[profiles.<name>.gvisor]",
        "[profiles.<name>.microvm]", "[profiles.<name>.transfer]", "[profiles.<name>.packages]"}) {
    EXPECT_NE(doc.find(std::string("`") + table + "`"), std::string::npos)
        << "docs/policy.md has no section for " << table;
  }
}

}  // namespace
}  // namespace airlock::policy
