// The review chain as a user meets it: `airlock run` refused by a reviewer (exit 123, the
// verdict in the record), allowed runs carrying their verdict, holds without a server, the
// `airlock review` dry run, and obfuscated code the patterns miss being contained by the sandbox.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "test_support.h"

namespace airlock::testing {
namespace {

using nlohmann::json;

constexpr int kExitRefused = 123;

const char* kPolicy = R"(schema = 1

[profiles.default]

[profiles.reviewed.review]
chain = ["limits", "patterns", "shell"]

[[profiles.reviewed.review.patterns.rules]]
id = "py-subprocess"
pattern = '\bsubprocess\b'
reason = "spawning processes is not allowed"
languages = ["python"]

[[profiles.reviewed.review.patterns.rules]]
id = "hold-drop"
pattern = '(?i)drop\s+table'
action = "hold"
reason = "an operator looks at schema changes"

[profiles.ast.review]
chain = ["limits", "python_ast"]
)";

class ReviewCli : public ::testing::Test {
 protected:
  void SetUp() override {
    AIRLOCK_REQUIRE_ROOT();
    before_ = snapshotHostResources();
    dir_.write("policy.toml", kPolicy);
  }
  void TearDown() override {
    if (IsSkipped()) return;
    EXPECT_EQ(snapshotHostResources(), before_) << "a sandbox left something on the host";
  }
  ProcResult run(const std::string& profile, const std::string& lang, const std::string& code,
                 bool json_record = true) {
    std::vector<std::string> a{"run",       "--policy",   dir_.file("policy.toml"),
                               "--profile", profile,      "--lang",
                               lang,        "--no-stdin", "-c",
                               code};
    if (json_record) a.insert(a.begin() + 1, "--json");
    return runAirlock(a);
  }
  static json record(const ProcResult& r) {
    auto j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "not JSON: " << r.out << "\nstderr: " << r.err;
    return j;
  }
  TempDir dir_;
  HostResources before_;
};

TEST_F(ReviewCli, ADeniedRunExits123WithTheVerdictInTheRecord) {
  auto r = run("reviewed", "python", "import subprocess\nsubprocess.run(['id'])");
  EXPECT_EQ(r.exit_code, kExitRefused) << r.err;
  auto j = record(r);
  EXPECT_EQ(j["status"], "refused");
  EXPECT_EQ(j["airlock_exit_code"], kExitRefused);
  EXPECT_EQ(j["sandbox_id"], "") << "no sandbox may exist for a denied run";
  EXPECT_EQ(j["review"]["verdict"], "deny");
  EXPECT_EQ(j["review"]["reviewer"], "patterns");
  EXPECT_EQ(j["review"]["rule"], "py-subprocess");
  EXPECT_EQ(j["review"]["reason"], "spawning processes is not allowed");
  EXPECT_TRUE(j["review"]["duration_ms"].is_number());
  EXPECT_EQ(
      j["message"],
      "denied by reviewer 'patterns', rule 'py-subprocess': spawning processes is not allowed");

  auto plain = run("reviewed", "python", "import subprocess", false);
  EXPECT_EQ(plain.exit_code, kExitRefused);
  EXPECT_NE(plain.err.find("airlock: denied by reviewer 'patterns', rule 'py-subprocess'"),
            std::string::npos)
      << plain.err;
}

TEST_F(ReviewCli, AllowedRunsCarryTheAllowVerdict) {
  auto r = run("reviewed", "python", "print(6 * 7)");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto j = record(r);
  EXPECT_EQ(j["stdout"], "42\n");
  EXPECT_EQ(j["review"]["verdict"], "allow");
  EXPECT_TRUE(j["review"]["reviewer"].is_null());
  // A profile without a chain reviews nothing.
  EXPECT_TRUE(record(run("default", "python", "print(1)"))["review"].is_null());
}

TEST_F(ReviewCli, ShellOutsideTheAllowlistIsDenied) {
  auto ok = run("reviewed", "shell", "echo hi | wc -c");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  auto denied = run("reviewed", "shell", "curl http://example.com");
  EXPECT_EQ(denied.exit_code, kExitRefused);
  EXPECT_EQ(record(denied)["review"]["rule"], "not-allowlisted");
  EXPECT_EQ(record(run("reviewed", "shell", "echo $(id)"))["review"]["rule"], "substitution");
}

TEST_F(ReviewCli, AHoldIsADenyWithoutAServer) {
  auto r = run("reviewed", "python", "q = 'DROP TABLE users'");
  EXPECT_EQ(r.exit_code, kExitRefused);
  auto j = record(r);
  EXPECT_EQ(j["review"]["verdict"], "deny");
  EXPECT_EQ(j["review"]["rule"], "hold-drop");
  EXPECT_EQ(j["review"]["reason"],
            "held for approval, which needs airlock serve (an operator looks at schema changes)");
}

TEST_F(ReviewCli, PythonAstDeniesThroughItsOwnSandbox) {
  auto r = run("ast", "python", "import os as o\no.system('id')");
  EXPECT_EQ(r.exit_code, kExitRefused) << r.err;
  auto j = record(r);
  EXPECT_EQ(j["review"]["reviewer"], "python_ast");
  EXPECT_EQ(j["review"]["rule"], "call");
  auto ok = run("ast", "python", "import json\nprint(json.dumps([1]))");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(record(ok)["review"]["verdict"], "allow");
}

TEST_F(ReviewCli, DryRunPrintsEachReviewer) {
  dir_.write("bad.py", "import subprocess\n");
  dir_.write("good.py", "print(1)\n");
  auto bad = runAirlock({"review", "--policy", dir_.file("policy.toml"), "--profile", "reviewed",
                         dir_.file("bad.py")});
  EXPECT_EQ(bad.exit_code, 1) << bad.err;
  EXPECT_NE(bad.out.find("limits"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("patterns       deny  py-subprocess"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("verdict: denied by reviewer 'patterns', rule 'py-subprocess'"),
            std::string::npos)
      << bad.out;
  auto good = runAirlock({"review", "--policy", dir_.file("policy.toml"), "--profile", "reviewed",
                          "--json", dir_.file("good.py")});
  EXPECT_EQ(good.exit_code, 0) << good.err;
  auto j = json::parse(good.out);
  EXPECT_EQ(j["review"]["verdict"], "allow");
  EXPECT_EQ(j["steps"].size(), 3u);
  EXPECT_EQ(j["chain"], json({"limits", "patterns", "shell"}));
  auto cmd = runAirlock(
      {"review", "--policy", dir_.file("policy.toml"), "--profile", "reviewed", "--command", "-"},
      "rm -rf /");
  EXPECT_EQ(cmd.exit_code, 1);
  EXPECT_NE(cmd.out.find("not-allowlisted"), std::string::npos) << cmd.out;
  auto usage = runAirlock({"review", "--profile", "nonesuch", dir_.file("good.py")});
  EXPECT_EQ(usage.exit_code, 125);
  EXPECT_NE(usage.err.find("unknown profile 'nonesuch'"), std::string::npos) << usage.err;
}

// Exfil/HostLeak: code that hides `subprocess` behind base64 passes the pattern rule; the
// sandbox still keeps its effect inside. Positive control: the same payload, run bare in a
// directory this test owns, does create the file, so the probe detects the effect.
TEST_F(ReviewCli, ObfuscatedCodeThePatternsMissIsContainedByTheSandbox) {
  const std::string canary = dir_.file("canary");
  const std::string payload =
      "import subprocess\n"
      "subprocess.run(['sh', '-c', 'echo escaped > " +
      canary +
      "'])\n"
      "try:\n    open('/etc/shadow').read(); print('shadow: read')\n"
      "except OSError as e:\n    print('shadow: denied')\n";
  auto encoded = runCommand({"/usr/bin/base64", "-w0"}, payload);
  ASSERT_EQ(encoded.exit_code, 0);
  const std::string code = "import base64\nexec(base64.b64decode('" + encoded.out + "'))\n";

  auto control = runCommand({"/usr/bin/python3", "-c", payload});
  ASSERT_EQ(control.exit_code, 0) << control.err;
  ASSERT_TRUE(std::filesystem::exists(canary)) << "the probe cannot see the effect";
  std::filesystem::remove(canary);

  auto r = run("reviewed", "python", code);
  auto j = record(r);
  EXPECT_EQ(j["review"]["verdict"], "allow") << "the obfuscation was meant to pass review";
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(j["stdout"], "shadow: denied\n");
  EXPECT_FALSE(std::filesystem::exists(canary)) << "sandboxed code wrote a host file";
  // The python_ast profile sees through it.
  EXPECT_EQ(record(run("ast", "python", code))["review"]["rule"], "call");
}

}  // namespace
}  // namespace airlock::testing
