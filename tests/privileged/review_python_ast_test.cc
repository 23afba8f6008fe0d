// python_ast in real sandboxes: the checker runs in a fresh one-shot sandbox per review, never
// in this process or on the host.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "airlock/policy/policy.h"
#include "supervisor/review/chain.h"
#include "supervisor/review/python_ast_reviewer.h"
#include "supervisor/sandbox/manager.h"
#include "supervisor/sandbox/review_runner.h"
#include "test_support.h"

namespace airlock::review {
namespace {

using Clock = std::chrono::steady_clock;
using namespace airlock::testing;

class PythonAst : public ::testing::Test {
 protected:
  void SetUp() override {
    AIRLOCK_REQUIRE_ROOT();
    before_ = snapshotHostResources();
    runner_ = std::make_shared<sandbox::StandaloneReviewRunner>(policy::builtinDefault(), "default",
                                                                pluginDir(), agentBinary());
  }
  void TearDown() override {
    if (IsSkipped()) return;
    runner_.reset();  // its manager too
    EXPECT_EQ(snapshotHostResources(), before_) << "a checker sandbox left something behind";
  }
  Result<Verdict> review(const std::string& code, policy::ReviewPythonAst cfg = {}) {
    PythonAstReviewer r(std::move(cfg), runner_);
    return r.review(Subject::code("python", code));
  }
  void expectDenied(const std::string& code, const std::string& rule) {
    auto v = review(code);
    ASSERT_TRUE(v.has_value()) << code << ": " << v.error().message();
    EXPECT_EQ(v->decision, Decision::kDeny) << code;
    EXPECT_EQ(v->rule, rule) << code << " → " << v->reason;
  }
  std::shared_ptr<sandbox::StandaloneReviewRunner> runner_;
  HostResources before_;
};

TEST_F(PythonAst, AllowsOrdinaryCode) {
  auto v = review(
      "import json, math\nimport os.path\nprint(json.dumps({'a': math.pi}))\n"
      "def f(x):\n    return getattr(x, 'real')\nprint(os.path.join('a', 'b'))\n");
  ASSERT_TRUE(v.has_value()) << v.error().message();
  EXPECT_TRUE(v->allowed()) << v->rule << ": " << v->reason;
}

TEST_F(PythonAst, DeniesImportsAndCallsEvenThroughAliases) {
  expectDenied("import subprocess\nsubprocess.run(['id'])", "import");
  expectDenied("from subprocess import run", "import");
  expectDenied("import ctypes.util", "import");
  expectDenied("import os\nos.system('id')", "call");
  expectDenied("import os as o\no.popen('id')", "call");
  expectDenied("from os import system as s\ns('id')", "call");
  expectDenied("import os\nos.execv('/bin/sh', ['sh'])", "call");
  expectDenied("import os\nf = os.system\nf('id')", "call");
}

TEST_F(PythonAst, DeniesTheUsualEvasions) {
  expectDenied("__import__('o' + 's').system('id')", "call");
  expectDenied("import base64\nexec(base64.b64decode('aW1wb3J0IG9z'))", "call");
  expectDenied("import os\ngetattr(os, 'sys' + 'tem')('id')", "dynamic-getattr");
  expectDenied("import os\ngetattr(os, 'system')('id')", "call");
  expectDenied("import builtins\nbuiltins.exec('1')", "call");
  expectDenied("().__class__.__bases__[0].__subclasses__()", "attribute");
  expectDenied("f = lambda: 0\nf.__globals__['__builtins__']", "attribute");
  expectDenied("eval('1+1')", "call");
}

TEST_F(PythonAst, InvalidPythonIsLeftToTheInterpreter) {
  auto v = review("def broken(:\n");
  ASSERT_TRUE(v.has_value()) << v.error().message();
  EXPECT_TRUE(v->allowed());
  EXPECT_EQ(v->rule, "syntax-error");
}

TEST_F(PythonAst, DeepNestingAndHugeInputNeverCrashOrHang) {
  for (const std::string& code :
       {std::string(10000, '[') + std::string(10000, ']'),
        std::string("x = ") + std::string(10000, '(') + "1" + std::string(10000, ')'),
        [] {
          std::string s = "x = ";
          for (int i = 0; i < 10000; ++i) s += "not ";
          return s + "1";
        }(),
        [] {
          std::string s;
          for (int i = 0; i < 10000; ++i)
            s += std::string(static_cast<size_t>(i % 100), ' ') + "if 1:\n";
          return s + "pass\n";
        }()}) {
    auto t0 = Clock::now();
    auto v = review(code);
    EXPECT_LT(Clock::now() - t0, std::chrono::seconds(15));
    // A verdict or a clean failure; both end the review.
    if (v) {
      EXPECT_NE(v->decision, Decision::kHold);
    }
  }
  // Over max_bytes: refused before any sandbox starts.
  auto t0 = Clock::now();
  auto big = review(std::string(50u << 20, 'x'));
  EXPECT_FALSE(big.has_value());
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(1));
}

TEST_F(PythonAst, ACheckerPastItsTimeoutFailsClosed) {
  // 60,000 statements cannot be parsed within 100 ms, sandbox start-up included: the timeout
  // path, through the chain, which fails closed.
  policy::ReviewPythonAst cfg;
  cfg.timeout_ms = 100;
  policy::Profile profile;
  profile.name = "default";
  profile.review.chain = {"python_ast"};
  profile.review.python_ast = cfg;
  ChainOptions options;
  options.sandbox_runner = runner_;
  auto chain = Chain::build(profile, std::move(options));
  ASSERT_TRUE(chain.has_value());
  std::string slow = "x = 0\n";
  for (int i = 0; i < 60000; ++i) slow += "x = x + " + std::to_string(i) + "\n";
  auto t0 = Clock::now();
  auto o = (*chain)->review(Subject::code("python", slow));
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(10));
  EXPECT_EQ(o.verdict.decision, Decision::kDeny);
  EXPECT_EQ(o.verdict.rule, "timeout") << o.verdict.reason;
}

// Under `airlock serve` the checker runs in pre-started single-use sandboxes of the reviewed
// profile (review.python_ast.pool_size): same verdicts, no sandbox start per check, and never
// the same sandbox twice.
class PooledChecker : public ::testing::Test {
 protected:
  void SetUp() override {
    AIRLOCK_REQUIRE_ROOT();
    before_ = snapshotHostResources();
    auto pol = policy::parse(R"(schema = 1
[profiles.default]
languages = ["python"]
[profiles.default.review]
chain = ["python_ast"]
[profiles.default.review.python_ast]
pool_size = 2
)",
                             "checker.toml");
    ASSERT_TRUE(pol) << pol.error().message();
    sandbox::ManagerOptions o;
    o.policy = *pol;
    o.plugin_dir = pluginDir();
    o.agent_path = agentBinary();
    o.workspace_dir = workspaces_.path();
    o.mode = sandbox::ManagerOptions::Mode::kServe;
    auto m = sandbox::Manager::start(std::move(o));
    ASSERT_TRUE(m) << m.error().message();
    manager_ = std::move(*m);
    runner_ = std::make_shared<sandbox::ReviewSandboxRunner>(*manager_, "default");
  }
  void TearDown() override {
    if (IsSkipped()) return;
    runner_.reset();
    manager_.reset();
    EXPECT_EQ(snapshotHostResources(), before_) << "a checker sandbox left something behind";
  }
  bool poolFull() {
    auto until = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < until) {
      if (manager_->prestartedCount() >= 2) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
  TempDir workspaces_;
  HostResources before_;
  std::unique_ptr<sandbox::Manager> manager_;
  std::shared_ptr<sandbox::ReviewSandboxRunner> runner_;
};

TEST_F(PooledChecker, VerdictsComeFromPreStartedSandboxesUsedOnce) {
  ASSERT_TRUE(poolFull()) << "no checker interpreters were pre-started";
  PythonAstReviewer reviewer({}, runner_);
  auto denied = reviewer.review(Subject::code("python", "import os as o\no.system('id')"));
  ASSERT_TRUE(denied.has_value()) << denied.error().message();
  EXPECT_EQ(denied->decision, Decision::kDeny);
  EXPECT_EQ(denied->rule, "call");
  ASSERT_TRUE(poolFull());
  auto allowed = reviewer.review(Subject::code("python", "import json\nprint(json.dumps(1))"));
  ASSERT_TRUE(allowed.has_value()) << allowed.error().message();
  EXPECT_TRUE(allowed->allowed()) << allowed->rule << ": " << allowed->reason;

  // What the runner does, seen from the manager: a checker request is served without a
  // sandbox start, by a sandbox that is then gone.
  ASSERT_TRUE(poolFull());
  sandbox::RunRequest req;
  req.language = "python";
  req.code = PythonAstReviewer::checkerScript();
  req.stdin_data = PythonAstReviewer({}, runner_)
                       .checkerRequest(Subject::code("python", "import os\nos.system('id')"));
  req.has_stdin_data = true;
  req.review = false;
  req.audit = false;
  req.checker = true;
  auto first = manager_->runProgram(req);
  ASSERT_TRUE(poolFull());
  auto second = manager_->runProgram(req);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->create_ms, 0) << "a checker sandbox was started for the check";
  EXPECT_THAT(first->stdout_data, ::testing::HasSubstr("\"verdict\": \"deny\""));
  EXPECT_NE(first->sandbox_id, second->sandbox_id) << "a checker sandbox judged twice";
  EXPECT_EQ(manager_->sandboxCount(), 0u);
  std::printf("checker run: prepare %.2f ms, exec %.2f ms, teardown %.2f ms, total %.2f ms\n",
              second->prepare_ms, second->exec_ms, second->teardown_ms, second->total_ms);
  // Any other program a checker request carries gets a sandbox of its own: the pool's
  // interpreters run the checker and nothing else.
  req.code = "print('not the checker')";
  ASSERT_TRUE(poolFull());
  auto other = manager_->runProgram(req);
  ASSERT_TRUE(other);
  EXPECT_GT(other->create_ms, 0);
  EXPECT_EQ(other->stdout_data, "not the checker\n");
}

}  // namespace
}  // namespace airlock::review
