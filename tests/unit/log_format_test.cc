// The operational log (supervisor/log/log.h): how fields are quoted and escaped, the level
// filter, and whole lines as a log collector reads them.
#include "supervisor/log/log.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

namespace airlock::log {
namespace {

using Json = nlohmann::json;

// Every test sees a fresh capture and leaves stderr as it found it.
class LogTest : public ::testing::Test {
 protected:
  void SetUp() override { redirectForTesting(&out_); }
  void TearDown() override {
    configure(Level::kWarn, Format::kText);
    redirectForTesting(nullptr);
  }
  std::vector<std::string> lines() const {
    std::vector<std::string> v;
    std::istringstream in(out_.str());
    for (std::string l; std::getline(in, l);) v.push_back(l);
    return v;
  }
  std::ostringstream out_;
};

TEST(LogFormat, TextValuesAreBareUnlessAReaderCouldNotTellWhereTheyEnd) {
  EXPECT_EQ(formatBody(Format::kText, "api.request",
                       {{"method", "POST"},
                        {"route", "/v1/sandboxes/{sb}/code"},
                        {"tenant", "t1"},
                        {"status", 200},
                        {"ms", 1.2}}),
            "api.request method=POST route=/v1/sandboxes/{sb}/code tenant=t1 status=200 ms=1.2");
  EXPECT_EQ(
      formatBody(Format::kText, "e",
                 {{"a", "two words"},
                  {"b", ""},
                  {"c", "say \"hi\""},
                  {"d", "k=v"},
                  {"e", "line\nbreak"},
                  {"f", "back\\slash"},
                  {"g", "tab\there"}}),
      R"(e a="two words" b="" c="say \"hi\"" d="k=v" e="line\nbreak" f="back\\slash" g="tab\there")");
}

TEST(LogFormat, NumbersAndBooleansAreWrittenAsThemselves) {
  EXPECT_EQ(formatBody(Format::kText, "n",
                       {{"i", -42},
                        {"u", std::numeric_limits<uint64_t>::max()},
                        {"whole", 2.0},
                        {"ms", 41.7049},
                        {"tiny", 0.0001},
                        {"yes", true},
                        {"no", false}}),
            "n i=-42 u=18446744073709551615 whole=2 ms=41.705 tiny=0 yes=true no=false");
  EXPECT_EQ(formatBody(Format::kJson, "n",
                       {{"nan", std::numeric_limits<double>::quiet_NaN()}, {"size", size_t{7}}}),
            R"("event":"n","nan":null,"size":7)");
}

TEST(LogFormat, JsonEscapesEveryStringAndKeepsBadUtf8Parseable) {
  const std::string body = formatBody(Format::kJson, "sandbox.destroy",
                                      {{"sandbox", "sb-1"},
                                       {"quote", "a\"b"},
                                       {"control", std::string_view("x\x01y\n", 4)},
                                       {"bad_utf8", std::string_view("\xff\xfe", 2)},
                                       {"ms", 3.5},
                                       {"warm", true}});
  Json j = Json::parse("{" + body + "}");
  EXPECT_EQ(j["event"], "sandbox.destroy");
  EXPECT_EQ(j["sandbox"], "sb-1");
  EXPECT_EQ(j["quote"], "a\"b");
  EXPECT_EQ(j["control"], "x\x01y\n");
  EXPECT_EQ(j["bad_utf8"], "\xEF\xBF\xBD\xEF\xBF\xBD");  // U+FFFD twice
  EXPECT_EQ(j["ms"], 3.5);
  EXPECT_EQ(j["warm"], true);
}

TEST(LogFormat, NamesOfLevelsAndFormats) {
  EXPECT_EQ(parseLevel("debug"), Level::kDebug);
  EXPECT_EQ(parseLevel("info"), Level::kInfo);
  EXPECT_EQ(parseLevel("warn"), Level::kWarn);
  EXPECT_EQ(parseLevel("error"), Level::kError);
  EXPECT_FALSE(parseLevel("warning"));
  EXPECT_FALSE(parseLevel("INFO"));
  EXPECT_FALSE(parseLevel(""));
  EXPECT_EQ(parseFormat("text"), Format::kText);
  EXPECT_EQ(parseFormat("json"), Format::kJson);
  EXPECT_FALSE(parseFormat("xml"));
  for (Level l : {Level::kDebug, Level::kInfo, Level::kWarn, Level::kError})
    EXPECT_EQ(parseLevel(levelName(l)), l);
}

TEST_F(LogTest, TextLineHasAnRfc3339UtcTimestampInMillisecondsAndTheLevel) {
  configure(Level::kInfo, Format::kText);
  info("api.request", {{"method", "GET"}, {"status", 200}});
  auto l = lines();
  ASSERT_EQ(l.size(), 1u) << out_.str();
  EXPECT_TRUE(std::regex_match(
      l[0],
      std::regex(
          R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z info api\.request method=GET status=200)")))
      << l[0];
}

TEST_F(LogTest, JsonLineIsOneObjectWithTsLevelEventAndTheFields) {
  configure(Level::kDebug, Format::kJson);
  warn("sandbox.teardown", {{"sandbox", "sb 1"}, {"ms", 12.25}});
  auto l = lines();
  ASSERT_EQ(l.size(), 1u) << out_.str();
  Json j = Json::parse(l[0]);
  EXPECT_EQ(j.size(), 5u) << l[0];
  EXPECT_TRUE(std::regex_match(j["ts"].get<std::string>(),
                               std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")));
  EXPECT_EQ(j["level"], "warn");
  EXPECT_EQ(j["event"], "sandbox.teardown");
  EXPECT_EQ(j["sandbox"], "sb 1");
  EXPECT_EQ(j["ms"], 12.25);
}

TEST_F(LogTest, LinesBelowTheLevelAreDropped) {
  configure(Level::kWarn, Format::kText);
  EXPECT_FALSE(enabled(Level::kDebug));
  EXPECT_FALSE(enabled(Level::kInfo));
  EXPECT_TRUE(enabled(Level::kWarn));
  EXPECT_TRUE(enabled(Level::kError));
  debug("d");
  info("i");
  warn("w");
  error("e");
  auto l = lines();
  ASSERT_EQ(l.size(), 2u) << out_.str();
  EXPECT_NE(l[0].find(" warn w"), std::string::npos) << l[0];
  EXPECT_NE(l[1].find(" error e"), std::string::npos) << l[1];

  configure(Level::kDebug, Format::kText);
  debug("d2");
  ASSERT_EQ(lines().size(), 3u);
  EXPECT_NE(lines()[2].find(" debug d2"), std::string::npos);
}

TEST_F(LogTest, ConcurrentWritersNeverMixTheirLines) {
  configure(Level::kInfo, Format::kJson);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t] {
      for (int i = 0; i < 250; ++i)
        info("worker", {{"thread", t}, {"i", i}, {"pad", std::string(200, 'x')}});
    });
  for (auto& th : threads) th.join();
  auto l = lines();
  ASSERT_EQ(l.size(), 1000u);
  for (const auto& line : l) {
    Json j = Json::parse(line);  // throws on a torn line
    EXPECT_EQ(j["pad"].get<std::string>().size(), 200u);
  }
}

}  // namespace
}  // namespace airlock::log
