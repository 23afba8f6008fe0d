// The JSON-lines audit log: schema fields on every record, and rotation by size.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "supervisor/audit/audit_log.h"
#include "test_support.h"

namespace airlock::audit {
namespace {

std::vector<nlohmann::json> readLines(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream f(path);
  for (std::string line; std::getline(f, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(AuditLog, EveryRecordCarriesSchemaTimeAndIds) {
  airlock::testing::TempDir dir;
  auto log = AuditLog::open({.path = dir.file("audit.jsonl")});
  ASSERT_TRUE(log) << log.error().message();
  ExecEvent e;
  e.path = "/usr/bin/python3";
  e.argv = {"python3", "-c", "\xff"};  // invalid UTF-8 from the sandbox is replaced, not refused
  ASSERT_TRUE((*log)->write("exec", {"sb1", "acme", "ex1"}, 1700000000123456789ull, execFields(e)));
  ASSERT_TRUE((*log)->write("exec", {"sb1", "", ""}, 1700000000000000000ull, execFields(e)));
  auto lines = readLines(dir.file("audit.jsonl"));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["schema"], kAuditSchemaVersion);
  EXPECT_EQ(lines[0]["type"], "exec");
  EXPECT_EQ(lines[0]["time"], "2023-11-14T22:13:20.123456Z");
  EXPECT_EQ(lines[0]["sandbox"], "sb1");
  EXPECT_EQ(lines[0]["tenant"], "acme");
  EXPECT_EQ(lines[0]["execution"], "ex1");
  EXPECT_EQ(lines[0]["path"], "/usr/bin/python3");
  EXPECT_TRUE(lines[1]["tenant"].is_null());
  EXPECT_TRUE(lines[1]["execution"].is_null());
}

TEST(AuditLog, RotatesBySizeAndKeepsTheNewestFiles) {
  airlock::testing::TempDir dir;
  std::string path = dir.file("audit.jsonl");
  auto log = AuditLog::open({.path = path, .max_bytes = 4096, .keep = 2});
  ASSERT_TRUE(log) << log.error().message();
  nlohmann::json fields = {{"pad", std::string(900, 'x')}};
  for (int i = 0; i < 20; ++i) {
    fields["n"] = i;
    ASSERT_TRUE((*log)->write("net", {"sb", "t", "e"}, 0, fields));
  }
  namespace fs = std::filesystem;
  EXPECT_LE(fs::file_size(path), 4096u);
  EXPECT_TRUE(fs::exists(path + ".1"));
  EXPECT_TRUE(fs::exists(path + ".2"));
  EXPECT_FALSE(fs::exists(path + ".3")) << "keep = 2";
  // The newest record is in the live file, and no record is split across files.
  auto live = readLines(path);
  ASSERT_FALSE(live.empty());
  EXPECT_EQ(live.back()["n"], 19);
  auto older = readLines(path + ".1");
  ASSERT_FALSE(older.empty());
  EXPECT_EQ(older.back()["n"].get<int>() + 1, live.front()["n"].get<int>());
}

TEST(AuditLog, BadOptionsAreRefused) {
  EXPECT_FALSE(AuditLog::open({.path = ""}));
  EXPECT_FALSE(AuditLog::open({.path = "/tmp/x", .max_bytes = 10}));
  auto missing = AuditLog::open({.path = "/nonexistent-dir/audit.jsonl"});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message().find("/nonexistent-dir/audit.jsonl"), std::string::npos);
}

}  // namespace
}  // namespace airlock::audit
