// The audit trail of `airlock serve` end to end (docs/audit.md): a sandbox's create, each
// execution with its sha256 (and, with [audit] record_code, its text) and the destroy land in
// the audit log with the tenant, and the lifecycle webhook receives create and destroy signed,
// after retrying the receiver's first 503. One supervisor for the whole file.
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <fstream>

#include "serve_harness.h"
#include "test_support.h"
#include "webhook_receiver.h"

namespace airlock::testing {
namespace {

std::string hex(const unsigned char* b, size_t n) {
  std::string out;
  char two[3];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(two, sizeof two, "%02x", b[i]);
    out += two;
  }
  return out;
}

std::string sha256(const std::string& text) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), d);
  return hex(d, sizeof d);
}

std::string hmac(const std::string& key, const std::string& body) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(body.data()), body.size(), mac, &len);
  return "sha256=" + hex(mac, len);
}

std::vector<Json> records(const std::string& path) {
  std::vector<Json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(Json::parse(line));
  return out;
}

TEST_F(ServeTest, AuditTrailAndSignedLifecycleWebhooks) {
  WebhookReceiver receiver(/*fail_first=*/1);
  dir_.write("webhook.key", "e2e-secret\n", 0600);
  const std::string log = dir_.file("audit.jsonl");
  Serve serve(
      dir_, "[audit]\nlog = \"" + log + "\"\nrecord_code = true\nwebhook_url = \"" +
                receiver.url("/hooks") + "\"\nwebhook_secret_file = \"" + dir_.file("webhook.key") +
                "\"\n[profiles.default.limits]\nmemory_mb = 256\nworkspace_mb = 64\ntmp_mb = 64\n"
                "[profiles.default.review]\nchain = [\"patterns\"]\n"
                "[[profiles.default.review.patterns.rules]]\nid = \"py-subprocess\"\n"
                "pattern = '\\bsubprocess\\b'\nreason = \"no processes\"\n"
                "languages = [\"python\"]\n");

  auto created = http(serve.sock(), "POST", "/v1/sandboxes", R"({"language": "python"})");
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = Json::parse(created.body)["id"];
  const std::string code = "print(6 * 7)";
  auto ran = http(serve.sock(), "POST", "/v1/sandboxes/" + id + "/code",
                  Json{{"code", code}, {"stream", false}}.dump());
  ASSERT_EQ(ran.status, 200) << ran.body;
  EXPECT_EQ(Json::parse(ran.body)["status"], "ok") << ran.body;
  auto cmd = http(serve.sock(), "POST", "/v1/sandboxes/" + id + "/commands",
                  R"({"cmd": "exit 3", "stream": false})");
  ASSERT_EQ(cmd.status, 200) << cmd.body;
  // tail keeps its one endless line in memory: the OOM killer ends it.
  auto oom = http(serve.sock(), "POST", "/v1/sandboxes/" + id + "/commands",
                  R"({"cmd": "head -c 1000m /dev/zero | tail", "stream": false})");
  ASSERT_EQ(oom.status, 200) << oom.body;
  // Refused by the review: it never reaches the sandbox, yet has its record.
  auto denied = http(serve.sock(), "POST", "/v1/sandboxes/" + id + "/code",
                     Json{{"code", "import subprocess"}, {"stream", false}}.dump());
  ASSERT_EQ(denied.status, 403) << denied.body;
  const std::string csv = "a,b\n1,2\n";
  ASSERT_EQ(http(serve.sock(), "PUT", "/v1/sandboxes/" + id + "/files?path=/home/user/in.csv", csv,
                 "application/octet-stream")
                .status,
            201);
  ASSERT_EQ(http(serve.sock(), "GET", "/v1/sandboxes/" + id + "/files?path=/home/user/in.csv").body,
            csv);
  ASSERT_EQ(http(serve.sock(), "DELETE", "/v1/sandboxes/" + id).status, 204);

  // The webhook: create answered 503 (Retry-After: 0), retried, then destroy; all signed.
  ASSERT_TRUE(
      receiver.waitFor([](const auto& r) { return r.size() >= 3; }, std::chrono::seconds(20)))
      << receiver.requests().size() << " webhook request(s) arrived";
  auto hooks = receiver.requests();
  ASSERT_EQ(hooks.size(), 3u);
  EXPECT_EQ(hooks[0].answered, 503);
  EXPECT_EQ(hooks[0].delivery, hooks[1].delivery) << "a retry keeps its delivery id";
  EXPECT_NE(hooks[1].delivery, hooks[2].delivery);
  std::vector<std::string> events;
  for (const auto& h : hooks) {
    EXPECT_EQ(h.target, "/hooks");
    EXPECT_EQ(h.event, "sandbox");
    EXPECT_EQ(h.signature, hmac("e2e-secret", h.body)) << h.body;
    auto body = Json::parse(h.body);
    EXPECT_EQ(body["type"], "sandbox");
    EXPECT_EQ(body["sandbox"], id);
    EXPECT_EQ(body["tenant"], "default");
    events.push_back(body["event"]);
  }
  EXPECT_EQ(events, (std::vector<std::string>{"create", "create", "destroy"}));

  // The log: create, the two executions, destroy, each with the tenant.
  std::vector<Json> mine;
  for (auto& r : records(log))
    if (r["sandbox"] == id &&
        (r["type"] == "sandbox" || (r["type"] == "execution" && r.contains("kind"))))
      mine.push_back(r);
  ASSERT_EQ(mine.size(), 6u) << Json(mine).dump(1);
  for (const auto& r : mine) EXPECT_EQ(r["tenant"], "default") << r.dump();
  EXPECT_EQ(mine[0]["event"], "create");
  EXPECT_EQ(mine[0]["profile"], "default");
  EXPECT_FALSE(mine[0]["backend"].is_null());
  const Json& code_run = mine[1];
  EXPECT_EQ(code_run["kind"], "code");
  EXPECT_EQ(code_run["language"], "python");
  EXPECT_EQ(code_run["sha256"], sha256(code));
  EXPECT_EQ(code_run["code"], code) << "record_code = true keeps the text";
  EXPECT_EQ(code_run["status"], "ok");
  EXPECT_EQ(code_run["denied"], false);
  EXPECT_EQ(code_run["timed_out"], false);
  EXPECT_FALSE(code_run["execution"].is_null());
  const Json& command = mine[2];
  EXPECT_EQ(command["kind"], "command");
  EXPECT_EQ(command["sha256"], sha256("exit 3"));
  EXPECT_EQ(command["exit_code"], 3);
  EXPECT_EQ(command["status"], "exited");
  EXPECT_EQ(command["oom"], false);
  EXPECT_EQ(mine[3]["oom"], true) << mine[3].dump();
  EXPECT_EQ(mine[4]["status"], "denied");
  EXPECT_EQ(mine[4]["denied"], true);
  EXPECT_EQ(mine[4]["sha256"], sha256("import subprocess"));
  EXPECT_NE(mine[4]["reason"].get<std::string>().find("py-subprocess"), std::string::npos);
  EXPECT_EQ(mine[5]["event"], "destroy");
  EXPECT_EQ(mine[5]["reason"], "client");

  // The file API's write and read, as transfers with the bytes' sha256.
  std::vector<Json> files;
  for (auto& r : records(log))
    if (r["sandbox"] == id && r["type"] == "transfer" && r["plugin"] == "files") files.push_back(r);
  ASSERT_EQ(files.size(), 2u) << Json(files).dump(1);
  EXPECT_EQ(files[0]["direction"], "in");
  EXPECT_EQ(files[1]["direction"], "out");
  for (const auto& f : files) {
    EXPECT_EQ(f["tenant"], "default");
    EXPECT_EQ(f["sandbox_path"], "/home/user/in.csv");
    EXPECT_EQ(f["bytes"], csv.size());
    EXPECT_EQ(f["sha256"], sha256(csv));
    EXPECT_EQ(f["status"], "ok");
  }
}

// A one-shot `airlock run` has the same trail: its sandbox's create and destroy ("done"), and an
// execution record with the program's sha256 but, without record_code, not the program.
TEST(AuditCli, ARunsRecordsHoldTheSha256ButNotTheCodeByDefault) {
  AIRLOCK_REQUIRE_ROOT();
  TempDir dir;
  const std::string log = dir.file("audit.jsonl");
  dir.write("policy.toml", withTestIsolation("schema = 1\n[audit]\nlog = \"" + log + "\"\n"));
  const std::string program = "print(42)\n";
  dir.write("p.py", program);
  auto r = runAirlock({"run", "--policy", dir.file("policy.toml"), dir.file("p.py")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<Json> trail;
  for (auto& rec : records(log))
    if (rec["type"] == "sandbox" || (rec["type"] == "execution" && rec.contains("kind")))
      trail.push_back(rec);
  ASSERT_EQ(trail.size(), 3u) << Json(trail).dump(1);
  EXPECT_EQ(trail[0]["event"], "create");
  const Json& run = trail[1];
  EXPECT_EQ(run["kind"], "run");
  EXPECT_EQ(run["language"], "python");
  EXPECT_EQ(run["sha256"], sha256(program));
  EXPECT_FALSE(run.contains("code")) << "record_code is off by default";
  EXPECT_EQ(run["status"], "exited");
  EXPECT_EQ(run["exit_code"], 0);
  EXPECT_EQ(run["sandbox"], trail[0]["sandbox"]);
  EXPECT_EQ(trail[2]["event"], "destroy");
  EXPECT_EQ(trail[2]["reason"], "done");
}

// With no --log and no installed policy, `airlock audit` reads the default log, or says where it
// looked. Needs no root: it only reads.
TEST(AuditCli, WithoutAPolicyReadsTheDefaultLogOrSaysWhereItLooked) {
  if (::access(AIRLOCK_DEFAULT_POLICY, F_OK) == 0)
    GTEST_SKIP() << "an installed policy at " AIRLOCK_DEFAULT_POLICY " names the log here";
  auto r = runAirlock({"audit", "tail", "-n", "1"});
  if (::access("/var/log/airlock/audit.jsonl", F_OK) == 0) {
    EXPECT_NE(r.err.find("reading /var/log/airlock/audit.jsonl (the default path"),
              std::string::npos)
        << r.err;
    return;
  }
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("no log at /var/log/airlock/audit.jsonl (the default path; no installed "
                       "policy at " AIRLOCK_DEFAULT_POLICY),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace airlock::testing
