// Reading the audit log back (`airlock audit tail|query`): rotated files in order, filters,
// --since forms, partial and broken lines; and the review record's fields.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "supervisor/audit/audit_log.h"
#include "supervisor/audit/log_reader.h"
#include "supervisor/audit/review_record.h"
#include "test_support.h"

namespace airlock::audit {
namespace {

using airlock::testing::TempDir;

constexpr uint64_t kT0 = 1700000000000000000ull;  // 2023-11-14T22:13:20Z

std::vector<nlohmann::json> scanAll(const std::string& path, const RecordFilter& filter) {
  std::vector<nlohmann::json> out;
  for (const auto& f : logFiles(path)) {
    auto r = scanFile(
        f, 0, filter, [&](const nlohmann::json& j) { out.push_back(j); },
        [&](uint64_t at) { ADD_FAILURE() << "bad line at " << at << " of " << f; });
    EXPECT_TRUE(r) << r.error().message();
  }
  return out;
}

TEST(AuditLogReader, QueryReadsRotatedFilesOldestFirstAndFilters) {
  TempDir dir;
  const std::string path = dir.file("audit.jsonl");
  // The smallest size: each exec record below (≈ 2.7 KB) with its net record fills a file.
  auto log = AuditLog::open({.path = path, .max_bytes = 4096, .keep = 5});
  ASSERT_TRUE(log) << log.error().message();
  ExecEvent e;
  e.path = "/usr/bin/ls";
  e.argv = {"ls", std::string(2500, 'a')};
  NetEvent n;
  n.hook = AIRLOCK_HOOK_CONNECT4;
  NetPolicy policy;
  for (int i = 0; i < 3; ++i) {
    const std::string sb = i == 1 ? "sb2" : "sb1";
    const uint64_t t = kT0 + static_cast<uint64_t>(i) * 3600'000000000ull;
    ASSERT_TRUE((*log)->write("exec", {sb, "t", "x" + std::to_string(i)}, t, execFields(e)));
    ASSERT_TRUE(
        (*log)->write("net", {sb, "t", "x" + std::to_string(i)}, t + 1, netFields(n, policy)));
  }
  ASSERT_GE(logFiles(path).size(), 3u) << "the test needs rotated files";
  EXPECT_EQ(logFiles(path).back(), path);

  auto all = scanAll(path, {});
  ASSERT_EQ(all.size(), 6u);
  EXPECT_EQ(all.front()["execution"], "x0") << "oldest first";
  EXPECT_EQ(all.back()["execution"], "x2");

  EXPECT_EQ(scanAll(path, {.sandbox = "sb2"}).size(), 2u);
  EXPECT_EQ(scanAll(path, {.execution = "x2"}).size(), 2u);
  EXPECT_EQ(scanAll(path, {.type = "exec"}).size(), 3u);
  EXPECT_EQ(scanAll(path, {.type = "connect"}).size(), 3u);
  EXPECT_EQ(scanAll(path, {.type = "review"}).size(), 0u);
  auto since = parseSince("2023-11-14T23:00", kT0);
  ASSERT_TRUE(since) << since.error().message();
  auto later = scanAll(path, {.since = *since});
  ASSERT_EQ(later.size(), 4u);
  EXPECT_EQ(later.front()["execution"], "x1");
}

TEST(AuditLogReader, SinceAcceptsTimesAndDurations) {
  EXPECT_EQ(*parseSince("2025-01-31", kT0), "2025-01-31");
  EXPECT_EQ(*parseSince("2025-01-31T12:00:00Z", kT0), "2025-01-31T12:00:00");
  EXPECT_EQ(*parseSince("2025-01-31T12:00:00.5", kT0), "2025-01-31T12:00:00.5");
  EXPECT_EQ(*parseSince("2h", kT0), "2023-11-14T20:13:20.000000Z");
  EXPECT_EQ(*parseSince("90s", kT0), "2023-11-14T22:11:50.000000Z");
  auto bad = parseSince("yesterday", kT0);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("--since 'yesterday'"), std::string::npos);
  EXPECT_FALSE(parseSince("2025-1-31", kT0));
  EXPECT_TRUE(knownRecordType("connect"));
  EXPECT_TRUE(knownRecordType("package"));  // the package proxy's downloads
  EXPECT_FALSE(knownRecordType("connection"));
}

// Found by fuzz/audit_log_fuzz.cc: a duration longer ago than the epoch wrapped around 64 bits
// ("213503982335d") or, past 20 digits, read as 0 (now); and std::regex, which recursed once per
// character, overflowed the stack on a --since of 200,000 digits.
TEST(AuditLogReader, SinceLongerAgoThanTheEpochIsTheEpoch) {
  const std::string epoch = "1970-01-01T00:00:00.000000Z";
  EXPECT_EQ(*parseSince("213503982335d", kT0), epoch);
  EXPECT_EQ(*parseSince("99999999999999999999d", kT0), epoch);
  EXPECT_EQ(*parseSince(std::to_string(kT0 / 1000000000) + "s", kT0), epoch);
  EXPECT_EQ(*parseSince(std::string(200000, '1') + "d", kT0), epoch);
  EXPECT_FALSE(parseSince("2025-01-31T" + std::string(200000, '1'), kT0));
  EXPECT_FALSE(parseSince("d", kT0));
  EXPECT_FALSE(parseSince("2025-01-31T12:00:00.1234567890", kT0));
  EXPECT_EQ(*parseSince("2025-01-31T12:00Z", kT0), "2025-01-31T12:00");
}

TEST(AuditLogReader, AHalfWrittenLineWaitsAndABrokenOneIsReported) {
  TempDir dir;
  dir.write("audit.jsonl", "{\"type\":\"exec\"}\nnot json\n{\"type\":\"net\"");
  std::vector<nlohmann::json> got;
  std::vector<uint64_t> bad;
  auto end = scanFile(
      dir.file("audit.jsonl"), 0, {}, [&](const nlohmann::json& j) { got.push_back(j); },
      [&](uint64_t at) { bad.push_back(at); });
  ASSERT_TRUE(end) << end.error().message();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(bad, std::vector<uint64_t>{16});
  EXPECT_EQ(*end, 25u) << "the unfinished last line is left for the next scan";
}

TEST(AuditReviewRecord, CarriesTheVerdictAndWhatWasReviewed) {
  review::Verdict v;
  v.decision = review::Decision::kDeny;
  v.reviewer = "patterns";
  v.rule = "no-curl";
  v.reason = "no downloads";
  v.duration_ms = 0.5;
  auto subject = review::Subject::commandLine("curl http://example.com");
  subject.profile = "default";
  auto fields = reviewFields(v, subject);
  EXPECT_EQ(fields["verdict"], "deny");
  EXPECT_EQ(fields["reviewer"], "patterns");
  EXPECT_EQ(fields["rule"], "no-curl");
  EXPECT_EQ(fields["reason"], "no downloads");
  EXPECT_EQ(fields["duration_ms"], 0.5);
  EXPECT_EQ(fields["cached"], false);
  EXPECT_EQ(fields["kind"], "command");
  EXPECT_EQ(fields["code_sha256"], subject.sha256());
  EXPECT_EQ(fields["profile"], "default");
  EXPECT_FALSE(fields.contains("code")) << "the reviewed text itself is not logged";
}

}  // namespace
}  // namespace airlock::audit
