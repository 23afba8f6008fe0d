// GET /metrics as Prometheus reads it: the service's families (sandbox/metrics.h) followed by the
// HTTP layer's (api/http_metrics.h). Every family has HELP and TYPE once, its samples together,
// bounded labels, cumulative histogram buckets; and docs/api.md lists exactly these families.
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "supervisor/api/http_metrics.h"
#include "supervisor/sandbox/metrics.h"

namespace airlock::sandbox {
namespace {

// The exposition of a service that saw a bit of everything.
std::string renderBusy() {
  static Metrics m;  // holds mutexes and atomics: built in place, once
  static const bool filled = [] {
    m.created.add({"acme", "default", "namespaces", "warm"});
    m.created.add({"acme", "default", "namespaces", "cold"});
    m.create_seconds.observe({"default", "namespaces"}, 0.08);
    m.execution_seconds.observe({"code", "default"}, 0.003);
    m.execution_seconds.observe({"code", "default"}, 0.7);
    m.execution_seconds.observe({"code", "default"}, 1000);  // over the last bound: +Inf only
    m.executionEnded("command", "default", 2, /*timed_out=*/true, /*oom_kills=*/2,
                     /*network_denied=*/3);
    m.review_seconds.observe({"deny"}, 0.0001);
    m.review_denials.add({"default", "patterns"});
    m.reject("tenant_sandboxes");
    m.runEnded("ok");
    m.reap("idle");
    return true;
  }();
  (void)filled;
  LiveCounts live;
  live.by_state["running"] = 2;
  live.sandboxes[{"acme", "default", "namespaces"}] = 2;
  live.prestarted[{"default", "python", "plain"}] = 1;
  api::HttpMetrics http;
  http.observe("/v1/sandboxes", 201, 0.01);
  return http.render(renderMetrics(m, live));
}

struct Family {
  std::string type;
  bool help = false;
  int type_lines = 0;
  std::vector<std::string> samples;  // in order
};

// Parses the text, failing the test on a sample whose family was not announced first or that
// comes apart from the rest of its family.
std::map<std::string, Family> parse(const std::string& text) {
  std::map<std::string, Family> families;
  std::string current;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      std::istringstream words(line.substr(7));
      std::string name, rest;
      words >> name >> rest;
      EXPECT_FALSE(rest.empty()) << "empty HELP or TYPE: " << line;
      Family& f = families[name];
      if (line[2] == 'H') {
        EXPECT_FALSE(f.help) << "second HELP for " << name;
        f.help = true;
      } else {
        f.type = rest;
        ++f.type_lines;
      }
      current = name;
      continue;
    }
    if (line.empty() || line[0] == '#') {
      ADD_FAILURE() << "unexpected line: " << line;
      continue;
    }
    std::string name = line.substr(0, line.find_first_of("{ "));
    std::string family = name;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s = suffix;
      if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0 &&
          families.count(name.substr(0, name.size() - s.size())) != 0 &&
          families[name.substr(0, name.size() - s.size())].type == "histogram")
        family = name.substr(0, name.size() - s.size());
    }
    EXPECT_EQ(family, current) << "sample outside its family's block: " << line;
    families[family].samples.push_back(line);
  }
  return families;
}

TEST(MetricsExposition, EveryFamilyHasHelpAndTypeOnceWithItsSamplesTogether) {
  const std::string text = renderBusy();
  auto families = parse(text);
  ASSERT_GT(families.size(), 25u) << text;
  for (const auto& [name, f] : families) {
    EXPECT_TRUE(f.help) << name << " has no # HELP";
    EXPECT_EQ(f.type_lines, 1) << name << " needs exactly one # TYPE";
    EXPECT_TRUE(f.type == "counter" || f.type == "gauge" || f.type == "histogram")
        << name << ": " << f.type;
    if (f.type == "counter") {
      EXPECT_TRUE(name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0)
          << "counter " << name << " should end in _total";
    }
  }
}

TEST(MetricsExposition, LabelsNameTenantProfileAndBackendNeverASandbox) {
  const std::string text = renderBusy();
  for (const char* line : {
           "airlock_sandboxes_created_total{tenant=\"acme\",profile=\"default\","
           "backend=\"namespaces\",start=\"warm\"} 1\n",
           "airlock_sandboxes_live{tenant=\"acme\",profile=\"default\",backend=\"namespaces\"} 2\n",
           "airlock_execution_timeouts_total{profile=\"default\"} 1\n",
           "airlock_oom_kills_total{profile=\"default\"} 2\n",
           "airlock_network_denials_total{profile=\"default\"} 3\n",
           "airlock_review_denials_total{profile=\"default\",reviewer=\"patterns\"} 1\n",
           "airlock_review_seconds_count{verdict=\"deny\"} 1\n",
           "airlock_sandbox_create_seconds_count{profile=\"default\",backend=\"namespaces\"} 1\n",
           "airlock_execution_seconds_count{kind=\"command\",profile=\"default\"} 1\n",
           "airlock_prestarted_interpreters{profile=\"default\",language=\"python\",kind=\"plain\"}"
           " "
           "1\n",
           "airlock_rejections_total{reason=\"tenant_sandboxes\"} 1\n",
       })
    EXPECT_NE(text.find(line), std::string::npos) << "missing " << line << "in\n" << text;
  EXPECT_EQ(text.find("sandbox_id"), std::string::npos);
}

TEST(MetricsExposition, HistogramBucketsAreCumulative) {
  const std::string text = renderBusy();
  const std::string series =
      "airlock_execution_seconds_bucket{kind=\"code\",profile=\"default\",le=\"";
  std::istringstream in(text);
  std::string line;
  std::vector<std::pair<std::string, uint64_t>> buckets;
  while (std::getline(in, line))
    if (line.rfind(series, 0) == 0) {
      const size_t q = line.find('"', series.size());
      buckets.emplace_back(line.substr(series.size(), q - series.size()),
                           std::stoull(line.substr(line.rfind(' ') + 1)));
    }
  ASSERT_EQ(buckets.size(), Histogram::kBounds.size() + 1) << text;
  for (size_t i = 1; i < buckets.size(); ++i)
    EXPECT_GE(buckets[i].second, buckets[i - 1].second) << "le=" << buckets[i].first;
  auto at = [&](const std::string& le) {
    for (const auto& [l, n] : buckets)
      if (l == le) return n;
    ADD_FAILURE() << "no bucket le=" << le;
    return uint64_t{0};
  };
  EXPECT_EQ(at("0.002"), 0u);
  EXPECT_EQ(at("0.005"), 1u);  // 0.003
  EXPECT_EQ(at("1"), 2u);      // and 0.7
  EXPECT_EQ(at("300"), 2u);    // 1000 is over every bound
  EXPECT_EQ(at("+Inf"), 3u);
  EXPECT_NE(text.find("airlock_execution_seconds_count{kind=\"code\",profile=\"default\"} 3\n"),
            std::string::npos);
}

TEST(MetricsExposition, LabelValuesAreEscaped) {
  EXPECT_EQ(metricLabels({"profile", "tenant"}, {"a\"b", "c\\d\ne"}),
            "profile=\"a\\\"b\",tenant=\"c\\\\d\\ne\"");
}

// docs/api.md's metrics table has one row per family, "| `airlock_...` | type | labels | ...".
TEST(MetricsExposition, DocsListExactlyTheFamiliesThatExist) {
  // This file is <source>/tests/unit/metrics_exposition_test.cc.
  const auto api_md =
      std::filesystem::path(__FILE__).parent_path().parent_path().parent_path() / "docs/api.md";
  std::ifstream f(api_md);
  ASSERT_TRUE(f) << api_md << " not found";
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string docs = ss.str();
  std::set<std::string> documented;
  std::regex row(R"(\n\| `(airlock_[a-z_]+)` \| (counter|gauge|histogram) \|)");
  for (auto it = std::sregex_iterator(docs.begin(), docs.end(), row); it != std::sregex_iterator();
       ++it)
    documented.insert((*it)[1]);
  std::set<std::string> rendered;
  for (const auto& [name, fam] : parse(renderBusy())) rendered.insert(name);
  EXPECT_EQ(documented, rendered);
}

}  // namespace
}  // namespace airlock::sandbox
