// The command line as a whole: every subcommand's --help, one spelling of the language flag
// everywhere, `exec` passing the command's own flags, `cmd ls|attach|kill` for background
// commands, and `policy check` holding a policy against what this host has installed.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "serve_harness.h"
#include "test_support.h"

namespace airlock::testing {
namespace {

// The subcommands `airlock --help` lists ("  airlock image build|import|ls ..."), each with the
// second words it lists: the table a user reads, so a new subcommand is tested by being listed.
std::vector<std::vector<std::string>> listedSubcommands() {
  auto usage = runAirlock({"--help"});
  EXPECT_EQ(usage.exit_code, 0) << usage.err;
  std::vector<std::vector<std::string>> out;
  std::istringstream in(usage.out);
  std::set<std::string> seen;
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("  airlock ")) continue;
    std::istringstream words(line.substr(10));
    std::string cmd, second;
    words >> cmd >> second;
    if (seen.insert(cmd).second) out.push_back({cmd});
    // "ls|attach|kill", "check FILE": a lowercase word is a sub-subcommand.
    std::istringstream subs(second);
    for (std::string s; std::getline(subs, s, '|');)
      if (!s.empty() && std::islower(static_cast<unsigned char>(s[0])) &&
          s.find_first_not_of("abcdefghijklmnopqrstuvwxyz") == std::string::npos)
        out.push_back({cmd, s});
  }
  return out;
}

TEST(Cli, EverySubcommandAnswersHelpWithZero) {
  auto commands = listedSubcommands();
  ASSERT_GT(commands.size(), 25u);
  for (auto args : commands) {
    // `audit unload` would act on the host's eBPF engine if --help were ever ignored.
    if (args.size() == 2 && args[0] == "audit" && args[1] == "unload") continue;
    std::string what;
    for (const auto& a : args) what += (what.empty() ? "" : " ") + a;
    args.push_back("--help");
    auto r = runAirlock(args, "", 30);
    EXPECT_EQ(r.exit_code, 0) << "airlock " << what << " --help: " << r.err;
    EXPECT_FALSE(r.out.empty()) << "airlock " << what << " --help printed nothing";
  }
}

TEST(Cli, EveryLanguageFlagTakesBothSpellings) {
  // Parsing alone: an unknown flag fails before --help is looked at (exit 125).
  for (std::vector<std::string> cmd : std::vector<std::vector<std::string>>{
           {"run"}, {"code"}, {"sandbox", "create"}, {"review"}, {"mcp"}})
    for (const char* flag : {"--lang", "--language", "-l"}) {
      auto args = cmd;
      args.insert(args.end(), {flag, "python", "--help"});
      auto r = runAirlock(args, "", 30);
      EXPECT_EQ(r.exit_code, 0) << cmd[0] << " " << flag << ": " << r.err;
    }
}

TEST(Cli, PolicyCheckRefusesWhatIsNotInstalled) {
  TempDir dir;
  dir.write("typo.toml", "schema = 1\n[profiles.default]\nisolation = \"gvisr\"\n");
  auto r = runAirlock({"policy", "check", dir.file("typo.toml")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("typo.toml:3:13: profile 'default': isolation = 'gvisr': isolation plugin "
                       "not installed"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("did you mean 'gvisor'?"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("installed: "), std::string::npos) << r.err;

  dir.write("ruby.toml", "schema = 1\n[profiles.default]\nlanguages = [\"python\", \"ruby\"]\n");
  r = runAirlock({"policy", "check", dir.file("ruby.toml")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("ruby.toml:3:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("languages[1] = 'ruby': language plugin not installed"), std::string::npos)
      << r.err;

  dir.write("review.toml",
            "schema = 1\n[profiles.default.review]\nchain = [\"plugin:nosuchreviewer\"]\n");
  r = runAirlock({"policy", "check", dir.file("review.toml")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("review.toml:3:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("'plugin:nosuchreviewer': review plugin not installed"), std::string::npos)
      << r.err;

  // A backend whose plugin is there passes; the same file fails on a host without it.
  dir.write("gvisor.toml", "schema = 1\n[profiles.default]\nisolation = \"gvisor\"\n");
  r = runAirlock({"policy", "check", dir.file("gvisor.toml")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  TempDir no_plugins;
  r = runCommand({airlockBinary(), "policy", "check", dir.file("gvisor.toml")}, "", 30,
                 {"AIRLOCK_PLUGIN_DIR=" + no_plugins.path()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("isolation = 'gvisor': isolation plugin not installed in '" +
                       no_plugins.path() + "' (installed: none)"),
            std::string::npos)
      << r.err;
}

// `airlock run --policy` refuses such a file the same way, before any sandbox.
TEST(Cli, RunWithAPolicyNamingAMissingPluginFailsBeforeAnySandbox) {
  AIRLOCK_REQUIRE_ROOT();
  TempDir dir;
  dir.write("p.toml", "schema = 1\n[profiles.default]\nisolation = \"gvisr\"\n");
  auto r = runAirlock({"run", "--policy", dir.file("p.toml"), "--lang", "sh", "-c", "true"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("p.toml:3:13: profile 'default': isolation = 'gvisr'"), std::string::npos)
      << r.err;
}

// A plugin's error crosses into the supervisor as text plus its errno; said once, not twice
// ("...: ENOENT (No such file or directory): ENOENT (No such file or directory)").
TEST(Cli, AnErrorSaysItsErrnoOnce) {
  AIRLOCK_REQUIRE_ROOT();
  TempDir dir;
  dir.write("p.toml", "schema = 1\n[profiles.default.filesystem]\nreadonly_paths = [\"" +
                          dir.path() + "/missing\"]\n");
  auto r = runAirlock({"run", "--policy", dir.file("p.toml"), "--lang", "sh", "-c", "true"});
  EXPECT_EQ(r.exit_code, 125);
  const std::string enoent = "ENOENT (No such file or directory)";
  const size_t first = r.err.find(enoent);
  ASSERT_NE(first, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(enoent, first + 1), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(dir.path() + "/missing"), std::string::npos) << r.err;
}

// One supervisor for everything that needs one: exec without "--", and background commands
// listed, attached to and killed.
class CliServe : public ServeTest {};

TEST_F(CliServe, ExecPassesFlagsAndCmdManagesBackgroundCommands) {
  Serve serve(dir_);
  const std::vector<std::string> env = {"AIRLOCK_URL=unix://" + serve.sock()};
  auto cli = [&](std::vector<std::string> args) {
    args.insert(args.begin(), airlockBinary());
    return runCommand(args, "", 60, env);
  };
  auto made = cli({"sandbox", "create", "--name", "clisb", "--lang", "shell"});
  ASSERT_EQ(made.exit_code, 0) << made.err;

  // The command's own flags need no "--"; ours before the command still work.
  auto ls = cli({"exec", "clisb", "ls", "-la", "/"});
  EXPECT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_NE(ls.out.find("total"), std::string::npos) << ls.out;
  auto env_first =
      cli({"exec", "--env", "X=1", "-t", "30", "clisb", "sh", "-c", "echo $X; exit 3"});
  EXPECT_EQ(env_first.exit_code, 3) << env_first.err;
  EXPECT_EQ(env_first.out, "1\n");
  auto dashes = cli({"exec", "clisb", "--", "echo", "--timeout"});
  EXPECT_EQ(dashes.out, "--timeout\n") << dashes.err;
  auto none = cli({"exec", "clisb"});
  EXPECT_EQ(none.exit_code, 125);
  EXPECT_NE(none.err.find("airlock exec SB CMD [ARGS...]"), std::string::npos) << none.err;

  // A background command: listed running, attached to (its output so far, then its exit). It
  // waits on a FIFO until the test writes to it, so it is surely running when listed.
  ASSERT_EQ(cli({"exec", "clisb", "mkfifo", "/tmp/go"}).exit_code, 0);
  auto bg = cli({"exec", "--background", "clisb", "sh", "-c",
                 "echo started; read line < /tmp/go; echo $line; exit 7"});
  ASSERT_EQ(bg.exit_code, 0) << bg.err;
  const std::string id = bg.out.substr(0, bg.out.find('\n'));
  ASSERT_FALSE(id.empty());
  auto listed = cli({"cmd", "ls", "clisb"});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find(id), std::string::npos) << listed.out;
  EXPECT_NE(listed.out.find("running"), std::string::npos) << listed.out;
  auto listed_json = cli({"cmd", "ls", "clisb", "--json"});
  int running = 0;
  const Json commands = Json::parse(listed_json.out)["commands"];
  for (const auto& c : commands)
    if (c["command_id"] == id && c["state"] == "running") ++running;
  EXPECT_EQ(running, 1) << listed_json.out;
  ASSERT_EQ(cli({"exec", "clisb", "sh", "-c", "echo go > /tmp/go"}).exit_code, 0);
  auto attached = cli({"cmd", "attach", "clisb", id});
  EXPECT_EQ(attached.exit_code, 7) << attached.err;
  EXPECT_EQ(attached.out, "started\ngo\n");

  // Killed: it ends with SIGKILL, and ls says so.
  auto sleeper = cli({"exec", "--background", "clisb", "sleep", "600"});
  const std::string sid = sleeper.out.substr(0, sleeper.out.find('\n'));
  auto killed = cli({"cmd", "kill", "clisb", sid});
  EXPECT_EQ(killed.exit_code, 0) << killed.err;
  auto after = cli({"cmd", "attach", "clisb", sid});
  EXPECT_EQ(after.exit_code, 128 + 9) << after.err;
  auto missing = cli({"cmd", "kill", "clisb", "nosuchcommand"});
  EXPECT_EQ(missing.exit_code, 125);
  EXPECT_NE(missing.err.find("nosuchcommand"), std::string::npos) << missing.err;

  // Durations say every unit: the lifetime as set, and its end, not truncated to the hour.
  auto keep = cli({"sandbox", "keepalive", "clisb", "--lifetime", "7200"});
  EXPECT_EQ(keep.exit_code, 0) << keep.err;
  EXPECT_TRUE(keep.out.find("lifetime 2h (ends in 1h59m") != std::string::npos ||
              keep.out.find("lifetime 2h (ends in 2h)") != std::string::npos)
      << keep.out;
  keep = cli({"sandbox", "keepalive", "clisb", "--lifetime", "5400"});
  EXPECT_TRUE(keep.out.find("lifetime 1h30m (ends in 1h29m") != std::string::npos ||
              keep.out.find("lifetime 1h30m (ends in 1h30m)") != std::string::npos)
      << keep.out;
  EXPECT_EQ(cli({"sandbox", "rm", "clisb"}).exit_code, 0);
}

}  // namespace
}  // namespace airlock::testing
