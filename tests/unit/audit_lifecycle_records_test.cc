// The audit trail's `sandbox` and `execution` record fields (supervisor/audit/
// lifecycle_records.h): the sha256 an operator can recompute, the code only when asked, and the
// outcome read from an execution's final event.
#include "supervisor/audit/lifecycle_records.h"

#include <gtest/gtest.h>

#include "airlock/policy/keys.h"

namespace airlock::audit {
namespace {

TEST(SandboxRecord, NamesTheEventReasonProfileAndBackend) {
  auto f = sandboxFields("destroy", destroyReason("idle"), "default", "namespaces");
  EXPECT_EQ(f["event"], "destroy");
  EXPECT_EQ(f["reason"], "idle");
  EXPECT_EQ(f["profile"], "default");
  EXPECT_EQ(f["backend"], "namespaces");
  EXPECT_TRUE(sandboxFields("create", "", "p", "gvisor")["reason"].is_null());
  EXPECT_EQ(destroyReason("deleted"), "client");
  EXPECT_EQ(destroyReason("one-shot"), "done");
  EXPECT_EQ(destroyReason("shutdown"), "shutdown");
}

TEST(ExecutionRecord, CarriesTheSha256OfTheCodeAndTheCodeOnlyWhenAsked) {
  ExecutionText code{.kind = "code", .language = "python", .text = "print(1)\n"};
  auto hashed = executionFields(code, false);
  EXPECT_EQ(hashed["kind"], "code");
  EXPECT_EQ(hashed["language"], "python");
  EXPECT_EQ(hashed["sha256"], policy::sha256Hex("print(1)\n"));
  EXPECT_FALSE(hashed.contains("code"));
  auto kept = executionFields(code, true);
  EXPECT_EQ(kept["code"], "print(1)\n");
  EXPECT_EQ(kept["sha256"], hashed["sha256"]);
}

TEST(ExecutionRecord, HashesAnArgvAsProcCmdlineDoes) {
  ExecutionText argv{.kind = "command", .argv = {"ls", "-la"}};
  auto f = executionFields(argv, true);
  EXPECT_EQ(f["sha256"], policy::sha256Hex(std::string("ls\0-la\0", 7)));
  EXPECT_EQ(f["code"], nlohmann::json::array({"ls", "-la"}));
  EXPECT_TRUE(f["language"].is_null());
}

TEST(ExecutionRecord, ReadsTheOutcomeOfACommandsExit) {
  nlohmann::json f;
  nlohmann::json exit = {{"type", "exit"}, {"exit_code", 3}, {"signal", 0}, {"timed_out", false}};
  addExecutionOutcome(f, &exit, 12.5);
  EXPECT_EQ(f["status"], "exited");
  EXPECT_EQ(f["exit_code"], 3);
  EXPECT_EQ(f["timed_out"], false);
  EXPECT_EQ(f["denied"], false);
  EXPECT_EQ(f["duration_ms"], 12.5);

  nlohmann::json late = {{"type", "exit"}, {"exit_code", -1}, {"signal", 9}, {"timed_out", true}};
  addExecutionOutcome(f, &late, 1000);
  EXPECT_EQ(f["status"], "timeout");
  EXPECT_EQ(f["timed_out"], true);
}

// The agent's exit of a command it killed at its time limit says "exit_code": null; the record
// must take it (it once threw, and the request answered 500).
TEST(ExecutionRecord, AKilledCommandsNullExitCodeIsRecordedNotThrown) {
  nlohmann::json f;
  nlohmann::json killed = {
      {"type", "exit"}, {"exit_code", nullptr}, {"signal", 9}, {"timed_out", true}};
  EXPECT_NO_THROW(addExecutionOutcome(f, &killed, 1000));
  EXPECT_EQ(f["status"], "timeout");
  EXPECT_EQ(f["exit_code"], -1);
  EXPECT_EQ(f["signal"], 9);
  nlohmann::json odd = {{"type", nullptr}, {"status", 7}, {"timed_out", "yes"}, {"oom", nullptr}};
  EXPECT_NO_THROW(addExecutionOutcome(f, &odd, 1));
  EXPECT_EQ(f["status"], "error");
  EXPECT_EQ(f["timed_out"], false);
}

TEST(ExecutionRecord, ReadsTheOutcomeOfACodeRunsEndAndOfAnAbandonedOne) {
  nlohmann::json f;
  nlohmann::json end = {{"type", "end"}, {"status", "timeout"}};
  addExecutionOutcome(f, &end, 5);
  EXPECT_EQ(f["status"], "timeout");
  EXPECT_EQ(f["timed_out"], true);
  addExecutionOutcome(f, nullptr, 5);
  EXPECT_EQ(f["status"], "abandoned");
}

TEST(ExecutionRecord, ARefusalSaysDeniedAndWhy) {
  nlohmann::json f;
  addExecutionRefusal(f, true, "denied by reviewer 'patterns'");
  EXPECT_EQ(f["status"], "denied");
  EXPECT_EQ(f["denied"], true);
  EXPECT_EQ(f["reason"], "denied by reviewer 'patterns'");
}

}  // namespace
}  // namespace airlock::audit
