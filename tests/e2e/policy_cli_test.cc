// Policies as an operator uses them: files, profiles, refusals, `policy check`, `doctor`.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace airlock::testing {
namespace {

TEST(PolicyCli, ExampleFilesCheckClean) {
  for (const char* f : {"reference.toml", "strict.toml", "data-science.toml"}) {
    auto r = runAirlock({"policy", "check", sourceDir() + "/policy/examples/" + f});
    EXPECT_EQ(r.exit_code, 0) << f << ": " << r.err;
    EXPECT_NE(r.out.find("OK"), std::string::npos) << r.out;
  }
}

TEST(PolicyCli, InvalidFileIsRejectedWithLineAndColumn) {
  TempDir dir;
  dir.write("bad.toml", "schema = 1\n[profiles.default.limits]\nmemroy_mb = 5\n");
  auto r = runAirlock({"policy", "check", dir.file("bad.toml")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("bad.toml:3:1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("memory_mb"), std::string::npos) << "no suggestion: " << r.err;
}

TEST(PolicyCli, ExplainShowsEffectiveLimits) {
  auto r = runAirlock({"policy", "explain"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("memory 1024 MiB"), std::string::npos) << r.out;
}

TEST(PolicyCli, RunWithABadPolicyFailsBeforeAnySandbox) {
  AIRLOCK_REQUIRE_ROOT();
  TempDir dir;
  dir.write("bad.toml", "schema = 1\n[profiles.default]\nlanguages = \"python\"\n");
  auto r = runAirlock({"run", "--policy", dir.file("bad.toml"), "--lang", "python", "-c", "1"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("bad.toml:3"), std::string::npos) << r.err;
}

TEST(PolicyCli, LanguageOutsideTheProfileIsRefused) {
  AIRLOCK_REQUIRE_ROOT();
  TempDir dir;
  dir.write("p.toml",
            "schema = 1\ndefault_profile = \"py\"\n[profiles.py]\nlanguages = [\"python\"]\n");
  auto r = runAirlock({"run", "--policy", dir.file("p.toml"), "--lang", "node", "-c", "1"});
  EXPECT_EQ(r.exit_code, 123);
  EXPECT_NE(r.err.find("does not allow language 'node'"), std::string::npos) << r.err;
  r = runAirlock({"run", "--policy", dir.file("p.toml"), "--lang", "python", "-c", "print(5)"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "5\n");
}

TEST(PolicyCli, ProfileLimitsApply) {
  AIRLOCK_REQUIRE_ROOT();
  TempDir dir;
  dir.write("p.toml",
            "schema = 1\ndefault_profile = "
            "\"tight\"\n[profiles.tight]\n[profiles.tight.limits]\ntimeout_s = 1\n"
            "output_bytes = 2048\n[profiles.tight.env]\nSTAGE = \"test\"\n");
  // printf is the shell's builtin: the output is written before the one-second limit even in a
  // microVM under emulation, where starting another program can take most of that second.
  auto r = runAirlock({"run", "--policy", dir.file("p.toml"), "--profile", "tight", "--json",
                       "--lang", "shell", "-c", "echo $STAGE; printf '%10000s' x; sleep 5"});
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out << r.err;
  EXPECT_EQ(j["status"], "timeout");
  EXPECT_EQ(j["profile"], "tight");
  EXPECT_TRUE(j["stdout_truncated"].get<bool>());
  EXPECT_EQ(j["stdout"].get<std::string>().substr(0, 5), "test\n");
  EXPECT_EQ(j["stdout"].get<std::string>().size(), 2048u);
}

TEST(PolicyCli, RelaxationsAreSaidOnEveryRun) {
  AIRLOCK_REQUIRE_ROOT();
  TempDir dir;
  dir.write("p.toml", "schema = 1\n[profiles.default]\nlandlock = false\n");
  auto r = runAirlock({"run", "--policy", dir.file("p.toml"), "--lang", "sh", "-c", "echo ok"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "ok\n");
  // One summary line by default, each relaxation in full with -v.
  EXPECT_NE(r.err.find("airlock: policy relaxations: 1 (landlock); -v for details\n"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("policy relaxation:"), std::string::npos) << r.err;
  r = runAirlock({"run", "-v", "--policy", dir.file("p.toml"), "--lang", "sh", "-c", "echo ok"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("airlock: policy relaxation: profile 'default': landlock = false"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("-v for details"), std::string::npos) << r.err;
  auto plain = runAirlock({"run", "--lang", "sh", "-c", "echo ok"});
  EXPECT_EQ(plain.err.find("relaxation"), std::string::npos) << plain.err;
}

TEST(DoctorCli, ReportsNamespacesBackend) {
  auto r = runAirlock({"doctor"});
  EXPECT_NE(r.out.find("namespaces"), std::string::npos) << r.out << r.err;
  if (isRealRoot()) {
    EXPECT_EQ(r.exit_code, 0) << r.out;
  }
}

}  // namespace
}  // namespace airlock::testing
