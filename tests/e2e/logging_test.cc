// `airlock serve`'s operational log as an operator's collector reads it: with --log-format json
// every stderr line is one JSON object, each API request has its line, and a sandbox's create
// and destroy are logged with their fields.
#include <gtest/gtest.h>

#include <sstream>

#include "serve_harness.h"

namespace airlock::testing {
namespace {

// The lines of `log` whose "event" is `event`; every line must be a JSON object.
std::vector<Json> eventsNamed(const std::vector<Json>& log, const std::string& event) {
  std::vector<Json> out;
  for (const auto& j : log)
    if (j.value("event", "") == event) out.push_back(j);
  return out;
}

TEST_F(ServeTest, JsonLogHasRequestLinesAndTheSandboxLifecycle) {
  const std::string log_file = dir_.file("serve.log");
  Serve serve(dir_, "", log_file, {"--log-format", "json"});
  auto created = http(serve.sock(), "POST", "/v1/sandboxes", R"({"language": "python"})");
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = Json::parse(created.body)["id"];
  auto code = http(serve.sock(), "POST", "/v1/sandboxes/" + id + "/code",
                   R"({"code": "6 * 7", "stream": false})");
  ASSERT_EQ(code.status, 200) << code.body;
  ASSERT_EQ(http(serve.sock(), "DELETE", "/v1/sandboxes/" + id).status, 204);
  int st = serve.stop(SIGTERM);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st;

  std::vector<Json> log;
  std::istringstream in(readFile(log_file));
  for (std::string line; std::getline(in, line);) {
    auto j = Json::parse(line, nullptr, false);
    ASSERT_TRUE(j.is_object()) << "not a JSON log line: " << line;
    for (const char* key : {"ts", "level", "event"})
      ASSERT_TRUE(j.contains(key)) << key << " missing: " << line;
    log.push_back(std::move(j));
  }

  // One line per request, with its route pattern (not the path), tenant, status and timing.
  auto requests = eventsNamed(log, "api.request");
  auto find = [&](const std::string& method, const std::string& route) -> Json {
    for (const auto& r : requests)
      if (r["method"] == method && r["route"] == route) return r;
    return nullptr;
  };
  Json create_req = find("POST", "/v1/sandboxes");
  ASSERT_TRUE(create_req.is_object()) << readFile(log_file);
  EXPECT_EQ(create_req["level"], "info");
  EXPECT_EQ(create_req["tenant"], "default");
  EXPECT_EQ(create_req["status"], 201);
  EXPECT_TRUE(create_req["ms"].is_number()) << create_req;
  EXPECT_GT(create_req["bytes_out"].get<uint64_t>(), 0u) << create_req;
  Json code_req = find("POST", "/v1/sandboxes/{sb}/code");
  ASSERT_TRUE(code_req.is_object()) << readFile(log_file);
  EXPECT_EQ(code_req["status"], 200);
  EXPECT_EQ(code_req["bytes_out"].get<uint64_t>(), code.body.size());
  Json delete_req = find("DELETE", "/v1/sandboxes/{sb}");
  ASSERT_TRUE(delete_req.is_object()) << readFile(log_file);
  EXPECT_EQ(delete_req["status"], 204);
  // The connection lines are debug, below the default level.
  EXPECT_TRUE(eventsNamed(log, "api.connection").empty());

  auto creates = eventsNamed(log, "sandbox.create");
  ASSERT_EQ(creates.size(), 1u) << readFile(log_file);
  EXPECT_EQ(creates[0]["sandbox"], id);
  EXPECT_EQ(creates[0]["tenant"], "default");
  EXPECT_EQ(creates[0]["profile"], "default");
  EXPECT_EQ(creates[0]["backend"], testIsolation());
  EXPECT_TRUE(creates[0]["start"] == "cold" || creates[0]["start"] == "warm") << creates[0];
  EXPECT_GT(creates[0]["ms"].get<double>(), 0.0);

  auto destroys = eventsNamed(log, "sandbox.destroy");
  ASSERT_EQ(destroys.size(), 1u) << readFile(log_file);
  EXPECT_EQ(destroys[0]["sandbox"], id);
  EXPECT_EQ(destroys[0]["tenant"], "default");
  EXPECT_EQ(destroys[0]["reason"], "deleted");

  EXPECT_EQ(eventsNamed(log, "serve.start").size(), 1u);
  EXPECT_EQ(eventsNamed(log, "serve.stop").size(), 1u);
}

TEST_F(ServeTest, ABadLogFlagIsRefusedBeforeServing) {
  dir_.write("policy.toml", "schema = 1\n[server]\nsocket = \"" + dir_.file("a.sock") + "\"\n");
  auto r = runAirlock({"serve", "--policy", dir_.file("policy.toml"), "--log-format", "xml"});
  EXPECT_EQ(r.exit_code, 125) << r.err;
  EXPECT_NE(r.err.find("--log-format 'xml': expected 'text' or 'json'"), std::string::npos)
      << r.err;
  r = runAirlock({"serve", "--policy", dir_.file("policy.toml"), "--log-level", "loud"});
  EXPECT_EQ(r.exit_code, 125) << r.err;
  EXPECT_NE(r.err.find("--log-level 'loud': expected 'debug', 'info', 'warn' or 'error'"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace airlock::testing
