// Session state outlives a kill -9 of `airlock serve`: while no supervisor is there, the agent
// keeps code contexts (their interpreters, so their variables) and background commands running
// and holds their output; the next supervisor takes them over under the same ids, and a run
// that was in flight finishes and can be fetched (docs/api.md, "When the supervisor dies").
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "serve_harness.h"
#include "test_support.h"

namespace airlock::testing {
namespace {

// The numbers a counting command printed, one per stdout line, from a stream's events.
std::vector<int> countedLines(const std::vector<Json>& events, std::string& partial) {
  std::vector<int> out;
  for (const auto& e : events) {
    if (e.value("type", "") != "stdout") continue;
    partial += e.value("data", "");
    size_t nl;
    while ((nl = partial.find('\n')) != std::string::npos) {
      out.push_back(std::atoi(partial.substr(0, nl).c_str()));
      partial.erase(0, nl + 1);
    }
  }
  return out;
}

const Json* eventOfType(const std::vector<Json>& events, const std::string& type) {
  for (const auto& e : events)
    if (e.value("type", "") == type) return &e;
  return nullptr;
}

TEST_F(ServeTest, KillNineKeepsContextsBackgroundCommandsAndTheRunInFlight) {
  auto serve = std::make_unique<Serve>(dir_);
  auto created =
      http(serve->sock(), "POST", "/v1/sandboxes", R"({"name": "survivor", "language": "python"})");
  ASSERT_EQ(created.status, 201) << created.body;
  auto defined = http(serve->sock(), "POST", "/v1/sandboxes/survivor/code",
                      R"({"code": "x = 41", "stream": false})");
  ASSERT_EQ(defined.status, 200) << defined.body;
  ASSERT_EQ(Json::parse(defined.body)["status"], "ok") << defined.body;

  // A background command printing 1..50, one line every 100 ms, and a client following it.
  auto bg = http(serve->sock(), "POST", "/v1/sandboxes/survivor/commands",
                 R"({"cmd": "for i in $(seq 1 50); do echo $i; sleep 0.1; done",)"
                 R"( "background": true})");
  ASSERT_EQ(bg.status, 201) << bg.body;
  const std::string cid = Json::parse(bg.body)["command_id"];
  Response before_kill;
  std::thread follower([&] {
    before_kill = http(serve->sock(), "GET", "/v1/sandboxes/survivor/commands/" + cid + "/events");
  });
  // A run in flight when the supervisor dies: it sleeps through the restart.
  Response cut_run;
  std::thread runner([&] {
    cut_run = http(serve->sock(), "POST", "/v1/sandboxes/survivor/code",
                   R"({"code": "import time\ntime.sleep(2)\nx += 1\nprint('slept', x)\nx"})");
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  serve->stop(SIGKILL);
  follower.join();
  runner.join();
  EXPECT_FALSE(cut_run.complete) << "the run ended before the kill: " << cut_run.body;
  // Down for half a second: the counter prints about 5 lines that only the agent sees.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const auto restart_began = std::chrono::steady_clock::now();
  serve->start();
  const double restart_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - restart_began)
          .count();
  std::cout << "restart to /healthz with 1 sandbox, 1 context, 1 command: " << restart_ms
            << " ms\n";

  // The run that was in flight finished under the new supervisor; its result can be fetched.
  auto run = http(serve->sock(), "GET", "/v1/sandboxes/survivor/contexts/python/runs/last/events");
  ASSERT_EQ(run.status, 200) << run.body;
  auto run_events = ndjson(run.body);
  ASSERT_FALSE(run_events.empty()) << run.body;
  EXPECT_EQ(run_events.front()["type"], "supervisor_restart") << run.body;
  EXPECT_EQ(run_events.front()["dropped_bytes"], 0) << run.body;
  EXPECT_EQ(run_events.back()["type"], "end") << run.body;
  EXPECT_EQ(run_events.back()["status"], "ok") << run.body;
  const Json* result = eventOfType(run_events, "result");
  ASSERT_NE(result, nullptr) << run.body;
  EXPECT_EQ((*result)["data"]["text/plain"], "42") << run.body;
  // Its stdout, in whatever pieces the backend delivered it (a VM's port splits writes).
  std::string printed;
  for (const auto& e : run_events)
    if (e.value("type", "") == "stdout") printed += e.value("data", "");
  EXPECT_EQ(printed, "slept 42\n") << run.body;

  // The interpreter kept its variables: the in-flight run's increment included.
  auto read_back = http(serve->sock(), "POST", "/v1/sandboxes/survivor/code",
                        R"({"code": "x", "stream": false})");
  ASSERT_EQ(read_back.status, 200) << read_back.body;
  auto rb = Json::parse(read_back.body);
  EXPECT_EQ(rb["status"], "ok") << read_back.body;
  EXPECT_EQ(rb["context_restarted"], false) << read_back.body;
  ASSERT_FALSE(rb["results"].empty()) << read_back.body;
  EXPECT_EQ(rb["results"][0]["text/plain"], "42") << read_back.body;
  auto contexts = Json::parse(http(serve->sock(), "GET", "/v1/sandboxes/survivor/contexts").body);
  ASSERT_EQ(contexts["contexts"].size(), 1u) << contexts;
  EXPECT_EQ(contexts["contexts"][0]["context_id"], "python");
  EXPECT_EQ(contexts["contexts"][0]["runs"], 3) << contexts;

  // The background command went on: what the follower saw before the kill and what the new
  // supervisor has (held by the agent meanwhile, then live) join without a gap.
  auto after = http(serve->sock(), "GET", "/v1/sandboxes/survivor/commands/" + cid + "/events");
  ASSERT_EQ(after.status, 200) << after.body;
  auto after_events = ndjson(after.body);
  ASSERT_FALSE(after_events.empty());
  ASSERT_EQ(after_events.front()["type"], "supervisor_restart") << after.body;
  EXPECT_EQ(after_events.front()["dropped_bytes"], 0) << after.body;
  EXPECT_GT(after_events.front()["held_bytes"].get<uint64_t>(), 0u)
      << "nothing was held while no supervisor was there: " << after.body;
  EXPECT_EQ(after_events.back()["type"], "exit") << after.body;
  EXPECT_EQ(after_events.back()["exit_code"], 0) << after.body;
  std::string partial;
  auto seen = countedLines(ndjson(before_kill.body), partial);
  partial.clear();
  auto rest = countedLines(after_events, partial);
  ASSERT_FALSE(seen.empty()) << "the follower saw nothing before the kill: " << before_kill.body;
  ASSERT_FALSE(rest.empty()) << after.body;
  std::set<int> all(seen.begin(), seen.end());
  all.insert(rest.begin(), rest.end());
  EXPECT_EQ(all.size(), 50u) << "lines " << seen.back() << " (last before the kill) and "
                             << rest.front() << " (first after) leave a gap";
  EXPECT_EQ(*all.begin(), 1);
  EXPECT_EQ(*all.rbegin(), 50);
  EXPECT_LE(rest.front(), seen.back() + 1);
  auto listed = Json::parse(http(serve->sock(), "GET", "/v1/sandboxes/survivor/commands").body);
  ASSERT_EQ(listed["commands"].size(), 1u) << listed;
  EXPECT_EQ(listed["commands"][0]["command_id"], cid);
  EXPECT_EQ(listed["commands"][0]["state"], "exited");

  // Any other run id: not kept (its events went to the client that started it).
  EXPECT_EQ(
      http(serve->sock(), "GET", "/v1/sandboxes/survivor/contexts/python/runs/r1/events").status,
      404);
  ASSERT_EQ(http(serve->sock(), "DELETE", "/v1/sandboxes/survivor").status, 204);
  serve.reset();
  EXPECT_EQ(settledHostResources(), before_);
}

// A supervisor upgraded while sandboxes run finds agents of the build before: an agent from
// before session keeping (protocol features 0) ended its executions when its supervisor died.
// The new supervisor adopts the sandbox without waiting for what will not come: the command
// says how it ended, the context starts afresh and says so, and the log names why.
TEST_F(ServeTest, AnAgentFromBeforeSessionKeepingEndsItsSessionsWithAClearStatus) {
  if (testIsolation() != "namespaces")
    GTEST_SKIP() << "swaps the agent through AIRLOCK_AGENT; the supervisor's side is the same "
                    "code on every backend";
  const std::string old_agent =
      std::filesystem::path(agentBinary()).parent_path() / "airlock-agent-before-sessions";
  ASSERT_EQ(access(old_agent.c_str(), X_OK), 0) << old_agent << " was not built";
  const std::string log = dir_.file("serve.log");
  setenv("AIRLOCK_AGENT", old_agent.c_str(), 1);
  auto serve = std::make_unique<Serve>(dir_, "", log);
  unsetenv("AIRLOCK_AGENT");  // the restart below is the upgraded supervisor, with today's agent
  auto created =
      http(serve->sock(), "POST", "/v1/sandboxes", R"({"name": "veteran", "language": "python"})");
  ASSERT_EQ(created.status, 201) << created.body;
  auto defined = http(serve->sock(), "POST", "/v1/sandboxes/veteran/code",
                      R"({"code": "x = 41", "stream": false})");
  ASSERT_EQ(Json::parse(defined.body)["status"], "ok") << defined.body;
  auto bg = http(serve->sock(), "POST", "/v1/sandboxes/veteran/commands",
                 R"({"cmd": "sleep 300", "background": true})");
  ASSERT_EQ(bg.status, 201) << bg.body;
  const std::string cid = Json::parse(bg.body)["command_id"];

  serve->stop(SIGKILL);
  const auto restart_began = std::chrono::steady_clock::now();
  serve->start();
  EXPECT_LT(std::chrono::steady_clock::now() - restart_began, std::chrono::seconds(10))
      << "the restart waited for an old agent";
  ASSERT_EQ(http(serve->sock(), "GET", "/v1/sandboxes/veteran").status, 200) << "not adopted";

  // The command: ended, with how and why.
  auto events = http(serve->sock(), "GET", "/v1/sandboxes/veteran/commands/" + cid + "/events");
  ASSERT_EQ(events.status, 200) << events.body;
  auto list = ndjson(events.body);
  ASSERT_FALSE(list.empty()) << events.body;
  EXPECT_EQ(list.back()["type"], "exit") << events.body;
  EXPECT_EQ(list.back()["signal"], 9) << events.body;
  EXPECT_EQ(list.back()["ended_by"], "supervisor_restart") << events.body;
  // The context: afresh, and the run says so.
  auto read_back = http(serve->sock(), "POST", "/v1/sandboxes/veteran/code",
                        R"({"code": "x", "stream": false})");
  ASSERT_EQ(read_back.status, 200) << read_back.body;
  auto rb = Json::parse(read_back.body);
  EXPECT_EQ(rb["context_restarted"], true) << read_back.body;
  EXPECT_EQ(rb["status"], "error") << read_back.body;
  EXPECT_NE(read_back.body.find("NameError"), std::string::npos) << read_back.body;
  auto again = http(serve->sock(), "POST", "/v1/sandboxes/veteran/code",
                    R"({"code": "x = 1\nx + 1", "stream": false})");
  EXPECT_EQ(Json::parse(again.body)["status"], "ok") << again.body;
  EXPECT_NE(readFile(log).find("sandbox.adopt_ended_sessions"), std::string::npos)
      << "the log does not say why the sessions ended";

  ASSERT_EQ(http(serve->sock(), "DELETE", "/v1/sandboxes/veteran").status, 204);
  serve.reset();
  EXPECT_EQ(settledHostResources(), before_);
}

}  // namespace
}  // namespace airlock::testing
