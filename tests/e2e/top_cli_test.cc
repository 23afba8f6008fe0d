// `airlock top` against a live supervisor: one sandbox running a background command and
// refused once by its review chain, seen through `top --once` (the table) and `top --once
// --json` (its data), plus the fields GET /v1/sandboxes gained for it. One supervisor and one
// sandbox for the whole file.
#include <gtest/gtest.h>

#include "serve_harness.h"

namespace airlock::testing {
namespace {

const char* kReviewedProfile = R"(
[profiles.default]
[profiles.watched.review]
chain = ["patterns"]
[[profiles.watched.review.patterns.rules]]
id = "no-forbidden"
pattern = '\bforbidden\b'
reason = "the word is forbidden"
)";

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST_F(ServeTest, TopShowsLiveSandboxesWithExecutionAndDenials) {
  Serve serve(dir_, kReviewedProfile);
  const std::vector<std::string> env = {"AIRLOCK_URL=unix://" + serve.sock()};
  auto created =
      http(serve.sock(), "POST", "/v1/sandboxes", R"({"name": "topped", "profile": "watched"})");
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = Json::parse(created.body)["id"];

  // Before anything runs: nothing current, no denials (the fields are there, not absent).
  auto listed = Json::parse(http(serve.sock(), "GET", "/v1/sandboxes").body)["sandboxes"];
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_TRUE(listed[0].contains("current_execution"));
  EXPECT_TRUE(listed[0]["current_execution"].is_null()) << listed[0];
  EXPECT_EQ(listed[0]["recent_denials"]["review"], 0) << listed[0];

  auto bg = http(serve.sock(), "POST", "/v1/sandboxes/topped/commands",
                 R"({"cmd": "sleep 300", "background": true})");
  ASSERT_EQ(bg.status, 201) << bg.body;
  auto denied = http(serve.sock(), "POST", "/v1/sandboxes/topped/commands",
                     R"({"cmd": "echo forbidden", "stream": false})");
  ASSERT_EQ(denied.status, 403) << denied.body;

  auto sb = Json::parse(http(serve.sock(), "GET", "/v1/sandboxes").body)["sandboxes"][0];
  ASSERT_TRUE(sb["current_execution"].is_object()) << sb;
  EXPECT_EQ(sb["current_execution"]["kind"], "command");
  EXPECT_FALSE(sb["current_execution"]["id"].get<std::string>().empty());
  EXPECT_GE(sb["current_execution"]["started_at"].get<int64_t>(), sb["created_at"].get<int64_t>());
  EXPECT_EQ(sb["recent_denials"]["review"], 1) << sb;
  // GET /v1/sandboxes/{sb} carries the same fields.
  auto one = Json::parse(http(serve.sock(), "GET", "/v1/sandboxes/topped").body);
  EXPECT_EQ(one["recent_denials"]["review"], 1) << one;

  auto table = runCommand({airlockBinary(), "top", "--once"}, "", 30, env);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_TRUE(contains(table.out, "airlock top  sandboxes: 1  executing: 1  memory: "))
      << table.out;
  EXPECT_TRUE(contains(table.out, "review denials: 1")) << table.out;
  for (const char* column : {"ID", "TENANT", "PROFILE", "BACKEND", "AGE", "STATE", "CPU%", "MEM",
                             "EXECUTION", "DENIALS"})
    EXPECT_TRUE(contains(table.out, column)) << column << "\n" << table.out;
  std::string row;
  for (size_t at = 0, eol; at < table.out.size(); at = eol + 1) {
    eol = table.out.find('\n', at);
    if (eol == std::string::npos) eol = table.out.size();
    if (table.out.compare(at, id.size(), id) == 0) row = table.out.substr(at, eol - at);
  }
  ASSERT_FALSE(row.empty()) << "no row for " << id << "\n" << table.out;
  for (const std::string& cell :
       {std::string("default"), std::string("watched"), testIsolation(), std::string("running"),
        std::string("command "), std::string("review 1")})
    EXPECT_TRUE(contains(row, cell)) << cell << " missing in: " << row;

  auto json =
      runCommand({airlockBinary(), "top", "--once", "--json", "--sort", "mem"}, "", 30, env);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto frame = Json::parse(json.out);
  EXPECT_EQ(frame["totals"]["sandboxes"], 1);
  EXPECT_EQ(frame["totals"]["executing"], 1);
  EXPECT_EQ(frame["totals"]["review_denials"], 1);
  ASSERT_EQ(frame["sandboxes"].size(), 1u);
  const Json& r = frame["sandboxes"][0];
  EXPECT_EQ(r["id"], id);
  EXPECT_EQ(r["tenant"], "default");
  EXPECT_EQ(r["profile"], "watched");
  EXPECT_EQ(r["backend"], testIsolation());
  EXPECT_EQ(r["state"], "running");
  EXPECT_GE(r["age_s"].get<int64_t>(), 0);
  EXPECT_EQ(r["current_execution"]["kind"], "command");
  EXPECT_GE(r["current_execution"]["running_s"].get<int64_t>(), 0);
  EXPECT_EQ(r["recent_denials"]["review"], 1);
  // Resource columns come from GET /v1/sandboxes/{id}/metrics: numbers where the supervisor
  // offers it, null where it does not; either way the keys are there.
  for (const char* key : {"cpu_percent", "memory_bytes", "memory_limit_bytes"}) {
    ASSERT_TRUE(r.contains(key)) << key;
    EXPECT_TRUE(r[key].is_null() || r[key].is_number()) << key << ": " << r[key];
  }

  // The live view on a terminal (a pty from util-linux's script): the alternate screen and a
  // frame with the sandbox, then q quits and the terminal's screen and cursor come back.
  auto live =
      runCommand({"/usr/bin/script", "-qec", airlockBinary() + " top --interval 0.2", "/dev/null"},
                 "q\n", 30, env);
  EXPECT_EQ(live.exit_code, 0) << live.out << live.err;
  const size_t entered = live.out.find("\x1b[?1049h"), left = live.out.find("\x1b[?1049l");
  ASSERT_NE(entered, std::string::npos) << live.out;
  ASSERT_NE(left, std::string::npos) << live.out;
  const size_t shown = live.out.find(id, entered);
  EXPECT_LT(shown, left) << live.out;
  EXPECT_NE(live.out.find("\x1b[?25h", shown), std::string::npos) << "cursor not restored";

  // Bad flags say which one and what it takes; --help is not an error.
  auto bad_sort = runCommand({airlockBinary(), "top", "--sort", "disk"}, "", 30, env);
  EXPECT_EQ(bad_sort.exit_code, 125);
  EXPECT_TRUE(contains(bad_sort.err, "--sort 'disk': expected cpu, mem or age")) << bad_sort.err;
  auto bad_interval = runCommand({airlockBinary(), "top", "--interval", "0"}, "", 30, env);
  EXPECT_EQ(bad_interval.exit_code, 125);
  EXPECT_TRUE(contains(bad_interval.err, "--interval")) << bad_interval.err;
  auto help = runCommand({airlockBinary(), "top", "--help"}, "", 30, env);
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(contains(help.out, "--once")) << help.out;

  // No supervisor: a clear failure, not a hang.
  auto gone = runCommand({airlockBinary(), "top", "--once"}, "", 30,
                         {"AIRLOCK_URL=unix://" + dir_.file("nobody.sock")});
  EXPECT_EQ(gone.exit_code, 125);
  EXPECT_FALSE(gone.err.empty());

  EXPECT_EQ(http(serve.sock(), "DELETE", "/v1/sandboxes/topped").status, 204);
}

}  // namespace
}  // namespace airlock::testing
