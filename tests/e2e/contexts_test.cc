// Code contexts through `airlock serve`, as a client uses them: Python contexts with IPython's
// semantics (display, DataFrames as HTML, !cmd, %%time, execution_count, per-run env, a context's
// cwd, chart data) and stateful bash contexts (state, exit status, interrupts by timeout). One
// supervisor and one sandbox for the whole file: each context start is the expensive part.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "serve_harness.h"
#include "test_support.h"

namespace airlock::testing {
namespace {

class Contexts : public ServeTest {
 protected:
  void SetUp() override {
    ServeTest::SetUp();
    if (IsSkipped()) return;
    // Room for matplotlib's first import, which builds its font cache: seconds natively, a
    // minute in a microVM under TCG emulation.
    serve_ = std::make_unique<Serve>(dir_, "[profiles.default.limits]\ntimeout_s = 300\n");
    auto created = http(serve_->sock(), "POST", "/v1/sandboxes", R"({"language": "python"})");
    ASSERT_EQ(created.status, 201) << created.body;
    id_ = Json::parse(created.body)["id"];
  }
  void TearDown() override {
    if (serve_ && !id_.empty()) {
      EXPECT_EQ(http(serve_->sock(), "DELETE", "/v1/sandboxes/" + id_).status, 204);
    }
    serve_.reset();
    ServeTest::TearDown();
  }
  // One code run, aggregated (stream false).
  Json run(Json request) {
    request["stream"] = false;
    auto r = http(serve_->sock(), "POST", "/v1/sandboxes/" + id_ + "/code", request.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    auto j = Json::parse(r.body, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.body;
    return j;
  }
  Json context(const Json& request) {
    auto r = http(serve_->sock(), "POST", "/v1/sandboxes/" + id_ + "/contexts", request.dump());
    EXPECT_EQ(r.status, 201) << r.body;
    return Json::parse(r.body, nullptr, false);
  }
  std::unique_ptr<Serve> serve_;
  std::string id_;
};

TEST_F(Contexts, PythonContextsAreIPython) {
  auto r = run({{"code", "x = 1"}});
  EXPECT_EQ(r["status"], "ok") << r.dump();
  EXPECT_EQ(r["execution_count"], 1);
  r = run({{"code", "display('a'); x += 1\nx"}});
  EXPECT_EQ(r["execution_count"], 2);
  ASSERT_EQ(r["results"].size(), 2u) << r.dump();
  EXPECT_EQ(r["results"][0]["text/plain"], "'a'");
  EXPECT_EQ(r["results"][1]["text/plain"], "2");

  r = run({{"code", "import pandas as pd\npd.DataFrame({'col': [1, 2]})"}});
  ASSERT_EQ(r["results"].size(), 1u) << r.dump();
  EXPECT_NE(r["results"][0].value("text/html", "").find("<table"), std::string::npos) << r.dump();

  r = run({{"code", "!echo from-bang\n%time y = 3"}});
  EXPECT_EQ(r["status"], "ok") << r.dump();
  EXPECT_NE(r.value("stdout", "").find("from-bang\n"), std::string::npos) << r.dump();
  EXPECT_NE(r.value("stdout", "").find("Wall time"), std::string::npos) << r.dump();

  // env: for this run only.
  r = run({{"code", "import os\nos.environ['RUN_VAR']"}, {"env", {{"RUN_VAR", "per-run"}}}});
  EXPECT_EQ(r["results"][0]["text/plain"], "'per-run'") << r.dump();
  r = run({{"code", "os.environ.get('RUN_VAR')"}});
  EXPECT_TRUE(r["results"].empty()) << r.dump();  // None: no value
  auto bad = http(serve_->sock(), "POST", "/v1/sandboxes/" + id_ + "/code",
                  R"({"code": "1", "env": {"NO=PE": "x"}})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("is not a variable name"), std::string::npos) << bad.body;

  // A context's working directory.
  auto made = http(serve_->sock(), "POST", "/v1/sandboxes/" + id_ + "/commands",
                   R"({"cmd": "mkdir -p /home/user/proj", "stream": false})");
  ASSERT_EQ(made.status, 200) << made.body;
  auto ctx = context({{"language", "python"}, {"cwd", "/home/user/proj"}});
  EXPECT_EQ(ctx["cwd"], "/home/user/proj");
  r = run({{"code", "import os\nos.getcwd()"}, {"context_id", ctx["context_id"]}});
  EXPECT_EQ(r["results"][0]["text/plain"], "'/home/user/proj'") << r.dump();
  EXPECT_EQ(r["execution_count"], 1);  // a new context counts from 1
  auto relative = http(serve_->sock(), "POST", "/v1/sandboxes/" + id_ + "/contexts",
                       R"({"language": "python", "cwd": "proj"})");
  EXPECT_EQ(relative.status, 400);
  EXPECT_NE(relative.body.find("absolute"), std::string::npos) << relative.body;
}

TEST_F(Contexts, ChartsComeBackBesideThePng) {
  auto r = run({{"code",
                 "import matplotlib.pyplot as plt\n"
                 "plt.plot([0, 1], [2, 3], label='a'); plt.title('Line'); plt.xlabel('x (m)')\n"
                 "plt.figure(); plt.scatter([1], [2]); plt.title('Scatter')\n"
                 "plt.figure(); plt.bar(['p', 'q'], [5, 6]); plt.title('Bar')\n"
                 "plt.figure(); plt.pie([1, 1], labels=['u', 'v']); plt.title('Pie')\n"
                 "plt.figure(); plt.boxplot([[1, 2, 3, 4, 5]], labels=['B']); plt.title('Box')\n"
                 "None"},
                {"timeout_s", 240}});
  EXPECT_EQ(r["status"], "ok") << r.dump();
  ASSERT_EQ(r["results"].size(), 5u) << r.dump();
  std::vector<std::string> types, titles;
  for (const auto& res : r["results"]) {
    EXPECT_FALSE(res.value("image/png", "").empty());
    const auto& chart = res["application/vnd.airlock.chart+json"];
    types.push_back(chart.value("type", ""));
    titles.push_back(chart.value("title", ""));
  }
  EXPECT_EQ(types, (std::vector<std::string>{"line", "scatter", "bar", "pie", "box_and_whisker"}));
  EXPECT_EQ(titles, (std::vector<std::string>{"Line", "Scatter", "Bar", "Pie", "Box"}));
  const auto& line = r["results"][0]["application/vnd.airlock.chart+json"];
  EXPECT_EQ(line["x_label"], "x (m)");
  EXPECT_EQ(line["x_unit"], "m");
  EXPECT_EQ(line["elements"][0]["points"], Json::parse("[[0, 2], [1, 3]]"));
  const auto& bar = r["results"][2]["application/vnd.airlock.chart+json"];
  EXPECT_EQ(bar["elements"][1]["label"], "q");
  EXPECT_EQ(bar["elements"][1]["value"], 6);
  const auto& pie = r["results"][3]["application/vnd.airlock.chart+json"];
  EXPECT_EQ(pie["elements"][0]["angle"], 180);
  const auto& box = r["results"][4]["application/vnd.airlock.chart+json"];
  EXPECT_EQ(box["elements"][0]["median"], 3);
  EXPECT_EQ(box["elements"][0]["min"], 1);
  EXPECT_EQ(box["elements"][0]["max"], 5);
}

TEST_F(Contexts, BashContextsKeepTheirState) {
  auto r =
      run({{"code", "cd /tmp; count=1; bump() { count=$((count + 1)); }"}, {"language", "bash"}});
  EXPECT_EQ(r["status"], "ok") << r.dump();
  EXPECT_EQ(r["context_id"], "shell");
  r = run({{"code", "bump; echo \"$PWD $count\""}, {"language", "sh"}});
  EXPECT_EQ(r["stdout"], "/tmp 2\n") << r.dump();
  EXPECT_EQ(r["execution_count"], 2);
  r = run({{"code", "echo $V; false"}, {"language", "bash"}, {"env", {{"V", "env-v"}}}});
  EXPECT_EQ(r["status"], "error");
  EXPECT_EQ(r["stdout"], "env-v\n");
  EXPECT_EQ(r["error"]["name"], "CommandExitError");
  EXPECT_EQ(r["error"]["value"], "exit status 1");

  // A timeout interrupts the loop; the shell and its state stay.
  r = run({{"code", "while :; do :; done"}, {"language", "bash"}, {"timeout_s", 1}});
  EXPECT_EQ(r["status"], "timeout") << r.dump();
  EXPECT_EQ(r["context_restarted"], false) << r.dump();
  r = run({{"code", "echo $count"}, {"language", "bash"}});
  EXPECT_EQ(r["stdout"], "2\n") << r.dump();

  // An explicit bash context with its own cwd.
  auto ctx = context({{"language", "shell"}, {"cwd", "/tmp"}});
  r = run({{"code", "pwd"}, {"context_id", ctx["context_id"]}});
  EXPECT_EQ(r["stdout"], "/tmp\n") << r.dump();
}

}  // namespace
}  // namespace airlock::testing
