// GET /metrics and GET /v1/sandboxes/{id}/metrics against a real `airlock serve`: an OOM kill, a
// timeout, a review denial and a refused connection move their counters, labelled by profile;
// a memory hog shows in the sandbox's own numbers, read from its cgroup.
#include <nlohmann/json.hpp>
#include <string>

#include "serve_harness.h"
#include "test_support.h"

namespace airlock::testing {
namespace {

// One profile with small limits, a patterns rule to deny, and a network rule to refuse.
constexpr const char* kPolicy = R"(
[profiles.default.limits]
memory_mb = 256
workspace_mb = 64
tmp_mb = 32
timeout_s = 20
[profiles.default.network]
rules = ["deny tcp 192.0.2.0/24 443"]
[profiles.default.review]
chain = ["patterns"]
[[profiles.default.review.patterns.rules]]
id = "no-launch-codes"
pattern = 'launch-codes'
reason = "the test's denial"
)";

// The value of one sample of GET /metrics ("name{labels}"), or -1 when absent.
double sample(const std::string& sock, const std::string& series) {
  auto r = http(sock, "GET", "/metrics");
  if (r.status != 200) return -1;
  const std::string key = "\n" + series + " ";
  const size_t at = ("\n" + r.body).find(key);
  if (at == std::string::npos) return -1;
  return std::stod(r.body.substr(at + key.size() - 1));
}

Json usage(const std::string& sock, const std::string& id) {
  auto r = http(sock, "GET", "/v1/sandboxes/" + id + "/metrics");
  EXPECT_EQ(r.status, 200) << r.body;
  return r.status == 200 ? Json::parse(r.body) : Json::object();
}

Json command(const std::string& sock, const std::string& id, const Json& body) {
  Json req = body;
  req["stream"] = false;
  auto r = http(sock, "POST", "/v1/sandboxes/" + id + "/commands", req.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  return r.status == 200 ? Json::parse(r.body) : Json::object();
}

TEST_F(ServeTest, CountersMoveAndOneSandboxShowsItsResourceUse) {
  Serve serve(dir_, kPolicy);
  const std::string& sock = serve.sock();
  auto created = http(sock, "POST", "/v1/sandboxes", R"({"language": "python"})");
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = Json::parse(created.body)["id"];

  Json fresh = usage(sock, id);
  EXPECT_EQ(fresh["sandbox_id"], id);
  EXPECT_EQ(fresh["memory_limit_bytes"], 256ull << 20) << fresh;
  EXPECT_EQ(fresh["pids_limit"], 256) << fresh;
  EXPECT_EQ(fresh["disk_limit_bytes"], 64ull << 20) << fresh;
  EXPECT_EQ(fresh["oom_kills"], 0);
  EXPECT_EQ(fresh["executions"], 0);
  EXPECT_GT(fresh["memory_bytes"].get<uint64_t>(), 0u);
  EXPECT_GE(fresh["pids"].get<uint64_t>(), 1u);
  EXPECT_TRUE(fresh["sampled_at"].get<std::string>().ends_with("Z")) << fresh;
  // Tenant-scoped like every sandbox route: an unknown id is a 404 naming it.
  auto missing = http(sock, "GET", "/v1/sandboxes/nosuchsandbox/metrics");
  EXPECT_EQ(missing.status, 404);
  EXPECT_NE(missing.body.find("nosuchsandbox"), std::string::npos) << missing.body;

  const std::string live =
      "airlock_sandboxes_live{tenant=\"default\",profile=\"default\",backend=\"namespaces\"}";
  EXPECT_EQ(sample(sock, live), 1);
  EXPECT_EQ(sample(sock,
                   "airlock_sandbox_create_seconds_count{profile=\"default\","
                   "backend=\"namespaces\"}"),
            1);

  // A memory hog that keeps what it took (the code context lives on) and a file on the disk.
  Json hog = {{"code", "hog = bytearray(96 << 20)\nfor i in range(0, len(hog), 4096): hog[i] = 1"},
              {"stream", false}};
  auto code = http(sock, "POST", "/v1/sandboxes/" + id + "/code", hog.dump());
  ASSERT_EQ(code.status, 200) << code.body;
  EXPECT_EQ(Json::parse(code.body)["status"], "ok") << code.body;
  command(sock, id, {{"cmd", "head -c 8388608 /dev/zero > /home/user/blob"}});
  Json grown = usage(sock, id);
  EXPECT_GE(grown["memory_bytes"].get<uint64_t>(),
            fresh["memory_bytes"].get<uint64_t>() + (80ull << 20))
      << fresh << "\n"
      << grown;
  EXPECT_GE(grown["memory_peak_bytes"].get<uint64_t>(), grown["memory_bytes"].get<uint64_t>());
  EXPECT_GE(grown["disk_bytes"].get<uint64_t>(), 8ull << 20) << grown;
  EXPECT_GT(grown["cpu_seconds"].get<double>(), 0) << grown;
  EXPECT_EQ(grown["executions"], 2);
  EXPECT_EQ(sample(sock, "airlock_execution_seconds_count{kind=\"code\",profile=\"default\"}"), 1);
  http(sock, "DELETE", "/v1/sandboxes/" + id + "/contexts/python");

  // A timeout.
  const std::string timeouts = "airlock_execution_timeouts_total{profile=\"default\"}";
  EXPECT_EQ(sample(sock, timeouts), -1) << "no timeout yet, no sample";
  Json slow = command(sock, id, {{"cmd", "sleep 30"}, {"timeout_s", 1}});
  EXPECT_EQ(slow["timed_out"], true) << slow;
  EXPECT_EQ(sample(sock, timeouts), 1);

  // An OOM kill: more than the profile's 256 MiB.
  Json oom = command(sock, id, {{"argv", {"python3", "-c", "b = bytearray(400 << 20)"}}});
  EXPECT_NE(oom["exit_code"], 0) << oom;
  EXPECT_GE(sample(sock, "airlock_oom_kills_total{profile=\"default\"}"), 1);
  EXPECT_GE(usage(sock, id)["oom_kills"].get<uint64_t>(), 1u);

  // A review denial.
  auto denied = http(sock, "POST", "/v1/sandboxes/" + id + "/commands",
                     R"({"cmd": "echo launch-codes", "stream": false})");
  EXPECT_EQ(denied.status, 403) << denied.body;
  EXPECT_EQ(sample(sock, "airlock_review_denials_total{profile=\"default\",reviewer=\"patterns\"}"),
            1);
  EXPECT_EQ(sample(sock, "airlock_review_seconds_count{verdict=\"deny\"}"), 1);

  // A connection the network rules refuse, seen by the audit engine.
  command(sock, id,
          {{"argv",
            {"python3", "-c",
             "import socket\ntry: socket.create_connection(('192.0.2.1', 443), 1)\n"
             "except OSError: pass"}}});
  EXPECT_GE(sample(sock, "airlock_network_denials_total{profile=\"default\"}"), 1);

  EXPECT_EQ(http(sock, "DELETE", "/v1/sandboxes/" + id).status, 204);
  EXPECT_EQ(sample(sock, live), -1);
  EXPECT_EQ(sample(sock,
                   "airlock_sandboxes_created_total{tenant=\"default\",profile=\"default\","
                   "backend=\"namespaces\",start=\"cold\"}"),
            1);
}

}  // namespace
}  // namespace airlock::testing
