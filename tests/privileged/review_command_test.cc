// The `command` reviewer on real sandboxes: the operator's program gets the subject on stdin and
// answers a verdict, but runs inside a throwaway sandbox of the reviewed profile, never on the
// host as root; at its timeout the sandbox goes, with everything the program started.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>

#include "airlock/policy/policy.h"
#include "supervisor/review/command_reviewer.h"
#include "supervisor/sandbox/review_runner.h"
#include "test_support.h"

namespace airlock::review {
namespace {

using Clock = std::chrono::steady_clock;
using namespace airlock::testing;

class CommandInSandbox : public ::testing::Test {
 protected:
  void SetUp() override {
    AIRLOCK_REQUIRE_ROOT();
    before_ = snapshotHostResources();
    // The sandbox's user is not host root: like any operator's reviewer, the program and its
    // directory must be readable and executable by others.
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);
    runner_ = std::make_shared<sandbox::StandaloneReviewRunner>(policy::builtinDefault(), "default",
                                                                pluginDir(), agentBinary());
  }
  void TearDown() override {
    if (IsSkipped()) return;
    runner_.reset();
    EXPECT_EQ(snapshotHostResources(), before_) << "a reviewer's sandbox left something behind";
  }
  // A reviewer program written by the test: a shell script in a directory of its own.
  std::string script(const std::string& body) {
    dir_.write("rev", "#!/bin/sh\n" + body + "\n", 0755);
    return dir_.file("rev");
  }
  Result<Verdict> review(const std::string& program, const Subject& subject,
                         uint32_t timeout_ms = 10000) {
    policy::ReviewCommand c;
    c.argv = {program};
    c.timeout_ms = timeout_ms;
    return CommandReviewer(c, runner_).review(subject);
  }
  TempDir dir_;
  HostResources before_;
  std::shared_ptr<sandbox::StandaloneReviewRunner> runner_;
};

TEST_F(CommandInSandbox, GetsTheSubjectAsJsonAndAnswersAVerdict) {
  // Denies when the request mentions "rm -rf"; echoes the subject's kind into the rule.
  auto path = script(R"(in=$(cat)
case "$in" in
  *'rm -rf'*) echo '{"verdict":"deny","rule":"no-rm","reason":"deletes things"}' ;;
  *'"kind":"command"'*) echo '{"verdict":"allow","rule":"was-command"}' ;;
  *) echo '{"verdict":"allow"}' ;;
esac)");
  auto allowed = review(path, Subject::code("python", "print(1)"));
  ASSERT_TRUE(allowed.has_value()) << allowed.error().message();
  EXPECT_TRUE(allowed->allowed());
  auto denied = review(path, Subject::commandLine("rm -rf /"));
  ASSERT_TRUE(denied.has_value()) << denied.error().message();
  EXPECT_EQ(denied->decision, Decision::kDeny);
  EXPECT_EQ(denied->rule, "no-rm");
  EXPECT_EQ(review(path, Subject::commandArgv({"ls"}))->rule, "was-command");
}

TEST_F(CommandInSandbox, LargeSubjectsArriveWhole) {
  auto path = script(R"(n=$(wc -c); echo "{\"verdict\":\"deny\",\"rule\":\"n$n\"}")");
  auto v = review(path, Subject::code("python", std::string(4 << 20, 'a')));
  ASSERT_TRUE(v.has_value()) << v.error().message();
  EXPECT_TRUE(v->rule.starts_with("n4194")) << v->rule;  // the whole JSON arrived
}

TEST_F(CommandInSandbox, TheProgramIsNotHostRoot) {
  // The probe: can it read a file only host root can, and which host file system does it see?
  // Positive control first: the same probe run directly on the host, as this test (root), sees
  // the secret, so a reviewer running there would too.
  dir_.write("secret", "only-root", 0600);
  const std::string secret = dir_.file("secret");
  const std::string probe = "cat '" + secret + "' 2>/dev/null || echo unreadable";
  auto host = runCommand({"/bin/sh", "-c", probe});
  ASSERT_EQ(host.out, "only-root") << "the positive control cannot see the secret";
  auto path = script("cat >/dev/null; s=$(" + probe + " | tr -d '\\n'); u=$(id -u); " +
                     R"(echo "{\"verdict\":\"allow\",\"rule\":\"$s\",\"reason\":\"$u\"}")");
  auto v = review(path, Subject::code("python", "x"));
  ASSERT_TRUE(v.has_value()) << v.error().message();
  // The program's own directory is bound read-only, but its mode keeps a root-only file from an
  // unprivileged sandbox user... and the sandbox's root (if any) is not the host's.
  EXPECT_EQ(v->rule, "unreadable") << "the review command read a root-only host file";
  EXPECT_NE(v->reason, "") << "no uid reported";
}

TEST_F(CommandInSandbox, AHangingReviewerIsKilledWithItsSandboxAtItsTimeout) {
  auto path = script("sleep 30 & sleep 30");
  auto t0 = Clock::now();
  auto v = review(path, Subject::code("python", "x"), 500);
  ASSERT_FALSE(v.has_value());
  EXPECT_EQ(v.error().errnum(), ETIMEDOUT) << v.error().message();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
  // TearDown: no sandbox, process or cgroup of it is left.
}

TEST_F(CommandInSandbox, CrashesBadAnswersAndMissingProgramsAreErrors) {
  for (auto [body, expect] : std::vector<std::pair<std::string, std::string>>{
           {"cat >/dev/null; kill -SEGV $$", "killed by signal SEGV"},
           {"cat >/dev/null; echo oops >&2; exit 3", "exited with status 3 (stderr: oops"},
           {"cat >/dev/null; echo not-json", "not a JSON object"},
           {"cat >/dev/null; echo '{}'", "no \"verdict\""}}) {
    auto v = review(script(body), Subject::code("python", "x"));
    ASSERT_FALSE(v.has_value()) << body;
    EXPECT_NE(v.error().message().find(expect), std::string::npos) << v.error().message();
  }
  auto missing = review(dir_.file("absent"), Subject::code("python", "x"));
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().message().find("absent"), std::string::npos)
      << missing.error().message();
}

}  // namespace
}  // namespace airlock::review
