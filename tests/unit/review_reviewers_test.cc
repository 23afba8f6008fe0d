// The built-in reviewers that decide in the supervisor: limits, patterns, shell, and python_ast
// on a fake sandbox runner (the real one is in tests/privileged).
#include <gtest/gtest.h>

#include <chrono>

#include "supervisor/review/limits_reviewer.h"
#include "supervisor/review/patterns_reviewer.h"
#include "supervisor/review/python_ast_reviewer.h"
#include "supervisor/review/shell_reviewer.h"
#include "supervisor/review/shell_scan.h"
#include "supervisor/sandbox/transfer_review.h"

namespace airlock::review {
namespace {

using Clock = std::chrono::steady_clock;

Verdict must(Result<Verdict> r) {
  EXPECT_TRUE(r.has_value()) << r.error().message();
  return r ? *r : Verdict{};
}

TEST(LimitsReviewer, AllowsSmallTextAndDeniesSizeLinesAndBinary) {
  policy::ReviewLimits l;
  l.max_bytes = 100;
  l.max_lines = 3;
  LimitsReviewer r(l);
  EXPECT_TRUE(must(r.review(Subject::code("python", "print('héllo')\n"))).allowed());
  EXPECT_TRUE(must(r.review(Subject::code("python", "a\nb\nc\n"))).allowed());
  auto big = must(r.review(Subject::code("python", std::string(101, 'x'))));
  EXPECT_EQ(big.decision, Decision::kDeny);
  EXPECT_EQ(big.rule, "max_bytes");
  EXPECT_EQ(must(r.review(Subject::code("python", "a\nb\nc\nd"))).rule, "max_lines");
  EXPECT_EQ(must(r.review(Subject::code("python", std::string("a\0b", 3)))).rule, "binary");
  EXPECT_EQ(must(r.review(Subject::code("python", "\xff\xfe"))).rule, "binary");
  EXPECT_EQ(must(r.review(Subject::code("python", "\xc0\xaf"))).rule, "binary");  // overlong '/'
  l.allow_binary = true;
  EXPECT_TRUE(must(LimitsReviewer(l).review(Subject::code("python", "\xff"))).allowed());
}

TEST(LimitsReviewer, A50MegabyteLineIsDeniedQuickly) {
  LimitsReviewer r(policy::ReviewLimits{});
  const Subject line = Subject::code("python", std::string(50u << 20, 'a'));
  auto t0 = Clock::now();
  auto v = must(r.review(line));
  EXPECT_EQ(v.rule, "max_bytes");
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(5)) << "the size is checked first";
}

policy::ReviewRule rule(std::string id, std::string pattern, std::string action = "deny",
                        std::vector<std::string> languages = {}) {
  policy::ReviewRule r;
  r.id = std::move(id);
  r.pattern = std::move(pattern);
  r.action = std::move(action);
  r.reason = "because " + r.id;
  r.languages = std::move(languages);
  return r;
}

TEST(PatternsReviewer, FirstMatchingRuleDecidesPerLanguage) {
  policy::ReviewPatterns p;
  p.rules = {rule("allow-os-path", R"(\bos\.path\b)", "allow"),
             rule("py-os", R"(\bimport\s+os\b|\bos\.)", "deny", {"python"}),
             rule("hold-drop", R"((?i)drop\s+table)", "hold"),
             rule("node-child", R"(child_process)", "deny", {"node"})};
  auto r = PatternsReviewer::create(p);
  ASSERT_TRUE(r.has_value()) << r.error().message();
  auto& rev = **r;
  EXPECT_TRUE(must(rev.review(Subject::code("python", "print(1)"))).allowed());
  auto deny = must(rev.review(Subject::code("python", "import os\nos.system('x')")));
  EXPECT_EQ(deny.decision, Decision::kDeny);
  EXPECT_EQ(deny.rule, "py-os");
  EXPECT_EQ(deny.reason, "because py-os");
  // An allow rule earlier in the list wins over later denies.
  auto allowed = must(rev.review(Subject::code("python", "os.path.join('a')")));
  EXPECT_TRUE(allowed.allowed());
  EXPECT_EQ(allowed.rule, "allow-os-path");
  // Language-scoped rules skip other languages.
  EXPECT_TRUE(must(rev.review(Subject::code("node", "os.x = 1"))).allowed());
  EXPECT_EQ(must(rev.review(Subject::code("node", "require('child_process')"))).rule, "node-child");
  EXPECT_EQ(must(rev.review(Subject::commandLine("psql -c 'DROP  TABLE x'"))).decision,
            Decision::kHold);
}

// A transfer as the chain sees it: its line, then the staged archive's entries.
Subject transferWithListing(const std::vector<std::string>& names) {
  sandbox::TransferOutcome t;
  t.direction = "in";
  t.plugin = "http";
  t.location = "https://data.example.com/set.tar.gz?…";
  t.sandbox_path = "/home/user/set";
  sandbox::ArchiveListing listing;
  for (const auto& n : names) listing.entries.push_back({"file", 3, n});
  listing.total = names.size() + 5;
  listing.truncated = true;
  return sandbox::transferSubject(t, 1234, &listing);
}

TEST(TransferSubject, CarriesTheLocationAndTheListingAsTextAndJson) {
  const Subject before = sandbox::transferSubject({.direction = "out",
                                                   .plugin = "hostdir",
                                                   .location = "hostdir:results/r.tar.gz",
                                                   .sandbox_path = "/home/user/r"},
                                                  0, nullptr);
  EXPECT_EQ(before.kind, SubjectKind::kTransfer);
  EXPECT_EQ(before.language, "transfer");
  EXPECT_EQ(before.text, "out /home/user/r -> hostdir:results/r.tar.gz\n");
  EXPECT_EQ(before.details["listed"], false);

  const Subject s = transferWithListing({"./a.csv", "./bad\xff.txt"});
  EXPECT_EQ(s.text,
            "in https://data.example.com/set.tar.gz?… -> /home/user/set\n"
            "file 3 ./a.csv\nfile 3 ./bad\xff.txt\n");
  const auto j = s.toJson();
  EXPECT_EQ(j["kind"], "transfer");
  EXPECT_EQ(j["transfer"]["plugin"], "http");
  EXPECT_EQ(j["transfer"]["size"], 1234);
  EXPECT_EQ(j["transfer"]["entries_total"], 7);
  EXPECT_EQ(j["transfer"]["truncated"], true);
  ASSERT_EQ(j["transfer"]["entries"].size(), 2u);
  // A name that is not UTF-8 still makes valid JSON (each bad byte as U+FFFD).
  EXPECT_EQ(j["transfer"]["entries"][1]["name"], "./bad\xef\xbf\xbd.txt");
  EXPECT_NO_THROW((void)j.dump());
}

TEST(PatternsReviewer, OnlyRulesNamingTransferSeeTransfers) {
  policy::ReviewPatterns p;
  p.rules = {rule("code-csv", R"(\.csv)"),
             rule("no-exe", R"((?m)^file [0-9]+ .*\.exe$)", "deny", {"transfer"})};
  auto r = PatternsReviewer::create(p);
  ASSERT_TRUE(r.has_value()) << r.error().message();
  auto& rev = **r;
  // A rule written for code would match the listing's a.csv, but never looks at it.
  EXPECT_TRUE(must(rev.review(transferWithListing({"./a.csv"}))).allowed());
  EXPECT_EQ(must(rev.review(Subject::code("python", "open('a.csv')"))).rule, "code-csv");
  const auto denied = must(rev.review(transferWithListing({"./a.csv", "./tools/setup.exe"})));
  EXPECT_EQ(denied.decision, Decision::kDeny);
  EXPECT_EQ(denied.rule, "no-exe");
  // And a transfer rule never judges code.
  EXPECT_TRUE(must(rev.review(Subject::code("python", "x\nfile 1 y.exe"))).allowed());
}

TEST(LimitsReviewer, LeavesTransfersToTheirOwnLimits) {
  policy::ReviewLimits l;
  l.max_lines = 3;
  std::vector<std::string> many(10, "./f");
  EXPECT_TRUE(must(LimitsReviewer(l).review(transferWithListing(many))).allowed());
}

TEST(PatternsReviewer, TextAboveTheScanLimitFailsTheReviewer) {
  policy::ReviewPatterns p;
  p.max_scan_bytes = 1000;
  p.rules = {rule("x", "x")};
  auto r = PatternsReviewer::create(p);
  ASSERT_TRUE(r.has_value());
  auto v = (*r)->review(Subject::code("python", std::string(1001, 'a')));
  ASSERT_FALSE(v.has_value());
  EXPECT_NE(v.error().message().find("max_scan_bytes"), std::string::npos);
}

TEST(PatternsReviewer, PathologicalPatternsStayLinear) {
  // (a+)+b against a long run of a's: catastrophic for backtracking engines, linear in RE2.
  policy::ReviewPatterns p;
  p.rules = {rule("evil", "(a+)+b"), rule("nested", "((((x*)*)*)*)*y")};
  auto r = PatternsReviewer::create(p);
  ASSERT_TRUE(r.has_value());
  const std::string text(1 << 20, 'a');
  auto t0 = Clock::now();
  EXPECT_TRUE(must((*r)->review(Subject::code("python", text))).allowed());
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2));
}

TEST(PatternsReviewer, BadPatternNamesItsRule) {
  policy::ReviewPatterns p;
  p.rules = {rule("broken", "(unclosed")};
  auto r = PatternsReviewer::create(p);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("rule 'broken'"), std::string::npos) << r.error().message();
  EXPECT_NE(r.error().message().find("missing )"), std::string::npos) << r.error().message();
}

TEST(ShellScan, FindsEveryCommandWord) {
  auto s = scanShell("ls -la | grep x && FOO=1 sort <in >out 2>&1; (wc -l) & echo 'a;b' # rm");
  EXPECT_FALSE(s.refused()) << s.refused_reason;
  EXPECT_EQ(s.commands, (std::vector<std::string>{"ls", "grep", "sort", "wc", "echo"}));
  EXPECT_EQ(scanShell("if true; then echo y; fi\nl\\s").commands,
            (std::vector<std::string>{"true", "echo", "ls"}));
  EXPECT_EQ(scanShell("'r''m' -rf /").commands, (std::vector<std::string>{"rm"}));
}

TEST(ShellScan, RefusesWhatItCannotJudge) {
  for (auto [script, rule] :
       std::vector<std::pair<std::string, std::string>>{{"echo $(id)", "substitution"},
                                                        {"echo `id`", "substitution"},
                                                        {"echo \"$(id)\"", "substitution"},
                                                        {"diff <(ls) x", "substitution"},
                                                        {"eval \"$X\"", "opaque"},
                                                        {". ./x.sh", "opaque"},
                                                        {"source x", "opaque"},
                                                        {"exec rm x", "opaque"},
                                                        {"$CMD x", "dynamic-command"},
                                                        {"\"$CMD\" x", "dynamic-command"},
                                                        {"/bin/r? x", "dynamic-command"},
                                                        {"f() { rm -rf ~; }; f", "function"},
                                                        {"PATH=/tmp ls", "assignment"},
                                                        {"LD_PRELOAD=/x.so ls", "assignment"},
                                                        {"for f in *; do rm $f; done", "construct"},
                                                        {"cat <<EOF\nx\nEOF", "heredoc"},
                                                        {"echo 'open", "syntax"},
                                                        {"ls >", "syntax"}}) {
    auto s = scanShell(script);
    EXPECT_EQ(s.refused_rule, rule) << script << " → " << s.refused_reason;
  }
}

TEST(ShellReviewer, AllowlistAndOff) {
  policy::ReviewShell cfg;
  cfg.allow = {"ls", "echo", "/usr/bin/python3"};
  ShellReviewer r(cfg);
  EXPECT_TRUE(must(r.review(Subject::code("shell", "ls -la; echo hi"))).allowed());
  auto v = must(r.review(Subject::code("shell", "ls; rm -rf /home/user")));
  EXPECT_EQ(v.decision, Decision::kDeny);
  EXPECT_EQ(v.rule, "not-allowlisted");
  EXPECT_NE(v.reason.find("'rm'"), std::string::npos);
  EXPECT_EQ(must(r.review(Subject::code("shell", "/tmp/ls"))).rule, "not-allowlisted");
  EXPECT_TRUE(must(r.review(Subject::commandArgv({"/usr/bin/python3", "-c", "$(x)"}))).allowed());
  EXPECT_EQ(must(r.review(Subject::commandArgv({"python3"}))).rule, "not-allowlisted");
  EXPECT_EQ(must(r.review(Subject::commandLine("echo $(rm -rf ~)"))).rule, "substitution");
  // Other languages are not the shell reviewer's business.
  EXPECT_TRUE(must(r.review(Subject::code("python", "import os; os.system('rm')"))).allowed());
  cfg.mode = "off";
  ShellReviewer off(cfg);
  EXPECT_EQ(must(off.review(Subject::code("shell", "ls"))).rule, "off");
  EXPECT_EQ(must(off.review(Subject::commandArgv({"ls"}))).rule, "off");
}

TEST(ShellReviewer, DeepNestingAndHugeInputNeitherCrashNorHang) {
  ShellReviewer r(policy::ReviewShell{});
  std::string deep = std::string(10000, '(') + "ls" + std::string(10000, ')');
  EXPECT_TRUE(must(r.review(Subject::code("shell", deep))).allowed());
  std::string braces;
  for (int i = 0; i < 10000; ++i) braces += "{ ";
  braces += "ls";
  for (int i = 0; i < 10000; ++i) braces += "; }";
  EXPECT_TRUE(must(r.review(Subject::code("shell", braces))).allowed());
  auto t0 = Clock::now();
  auto v = must(r.review(Subject::code("shell", std::string(50u << 20, 'x'))));
  EXPECT_EQ(v.rule, "not-allowlisted");
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
}

// A sandbox runner that answers what the test says and records the job.
class FakeRunner : public SandboxRunner {
 public:
  Result<SandboxJobResult> run(const SandboxJob& job) override {
    last = job;
    ++calls;
    return answer;
  }
  Result<SandboxJobResult> answer = SandboxJobResult{0, false, "{\"verdict\":\"allow\"}", ""};
  SandboxJob last;
  int calls = 0;
};

TEST(PythonAstReviewer, SendsTheCheckerAndTheRequestToTheSandbox) {
  auto runner = std::make_shared<FakeRunner>();
  policy::ReviewPythonAst cfg;
  cfg.timeout_ms = 1234;
  PythonAstReviewer r(cfg, runner);
  EXPECT_TRUE(must(r.review(Subject::code("python", "print(1)"))).allowed());
  EXPECT_EQ(runner->last.language, "python");
  EXPECT_EQ(runner->last.code, PythonAstReviewer::checkerScript());
  EXPECT_NE(runner->last.code.find("ast.parse"), std::string::npos);
  auto req = nlohmann::json::parse(runner->last.stdin_data);
  EXPECT_EQ(req["code"], "print(1)");
  EXPECT_EQ(req["deny_imports"], cfg.deny_imports);
  EXPECT_EQ(runner->last.timeout, std::chrono::milliseconds(1234));

  runner->answer =
      SandboxJobResult{0, false, R"({"verdict":"deny","rule":"import","reason":"r"})", ""};
  auto v = must(r.review(Subject::code("python", "import subprocess")));
  EXPECT_EQ(v.decision, Decision::kDeny);
  EXPECT_EQ(v.rule, "import");
}

TEST(PythonAstReviewer, OnlyPythonCodeGoesToTheSandbox) {
  auto runner = std::make_shared<FakeRunner>();
  PythonAstReviewer r(policy::ReviewPythonAst{}, runner);
  EXPECT_TRUE(must(r.review(Subject::code("node", "x"))).allowed());
  EXPECT_TRUE(must(r.review(Subject::commandLine("python3 -c x"))).allowed());
  EXPECT_EQ(runner->calls, 0);
}

TEST(PythonAstReviewer, CheckerFailuresAreErrors) {
  auto runner = std::make_shared<FakeRunner>();
  policy::ReviewPythonAst cfg;
  cfg.max_bytes = 10;
  PythonAstReviewer r(cfg, runner);
  EXPECT_FALSE(r.review(Subject::code("python", std::string(11, 'x'))).has_value());
  EXPECT_EQ(runner->calls, 0);
  runner->answer = SandboxJobResult{-1, true, "", ""};
  auto timeout = r.review(Subject::code("python", "x"));
  ASSERT_FALSE(timeout.has_value());
  EXPECT_EQ(timeout.error().errnum(), ETIMEDOUT);
  runner->answer = SandboxJobResult{1, false, "", "Traceback: boom"};
  auto crashed = r.review(Subject::code("python", "x"));
  ASSERT_FALSE(crashed.has_value());
  EXPECT_NE(crashed.error().message().find("boom"), std::string::npos);
  runner->answer = SandboxJobResult{0, false, "not json", ""};
  EXPECT_FALSE(r.review(Subject::code("python", "x")).has_value());
  runner->answer = Unexpected(Error("no sandbox"));
  EXPECT_FALSE(r.review(Subject::code("python", "x")).has_value());
  EXPECT_FALSE(PythonAstReviewer(policy::ReviewPythonAst{}, nullptr)
                   .review(Subject::code("python", "x"))
                   .has_value());
}

}  // namespace
}  // namespace airlock::review
