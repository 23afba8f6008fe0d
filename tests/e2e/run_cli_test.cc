// airlock run, end to end: the binary from the build tree, real sandboxes, real interpreters.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "test_support.h"

namespace airlock::testing {
namespace {

using nlohmann::json;

class RunCli : public ::testing::Test {
 protected:
  void SetUp() override {
    AIRLOCK_REQUIRE_ROOT();
    before_ = snapshotHostResources();
  }
  void TearDown() override {
    if (IsSkipped()) return;
    EXPECT_EQ(snapshotHostResources(), before_) << "a sandbox left something on the host";
  }
  static json runJson(const std::vector<std::string>& args, const std::string& in = "") {
    std::vector<std::string> a{"run", "--json"};
    a.insert(a.end(), args.begin(), args.end());
    auto r = runAirlock(a, in);
    EXPECT_FALSE(r.timed_out);
    auto j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "not JSON: " << r.out << "\nstderr: " << r.err;
    if (!j.is_discarded()) {
      EXPECT_EQ(j["airlock_exit_code"], r.exit_code);
    }
    return j;
  }
  HostResources before_;
};

TEST_F(RunCli, PythonPrints) {
  auto r = runAirlock({"run", "--lang", "python", "-c", "print(1)"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "1\n");
}

TEST_F(RunCli, NodePrints) {
  auto r = runAirlock({"run", "--lang", "node", "-c", "console.log(6 * 7)"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "42\n");
}

TEST_F(RunCli, ShellRunsAsTheSandboxUserInItsOwnRoot) {
  auto r = runAirlock({"run", "--lang", "shell", "-c", "ls /; id"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("uid=1000(user) gid=1000(user)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("usr"), std::string::npos);
  EXPECT_EQ(r.out.find("root\n"), std::string::npos) << "host /root is visible: " << r.out;
}

TEST_F(RunCli, ExitCodeIsTheProgramsOwn) {
  EXPECT_EQ(runAirlock({"run", "--lang", "python", "-c", "import sys; sys.exit(7)"}).exit_code, 7);
  EXPECT_EQ(runAirlock({"run", "--lang", "sh", "-c", "exit 3"}).exit_code, 3);
}

TEST_F(RunCli, DeathBySignalIs128PlusN) {
  auto j = runJson({"--lang", "shell", "-c", "kill -TERM $$"});
  EXPECT_EQ(j["status"], "signaled");
  EXPECT_EQ(j["signal"], 15);
  EXPECT_EQ(j["airlock_exit_code"], 143);
}

TEST_F(RunCli, PythonErrorGoesToStderrWithTraceback) {
  auto r = runAirlock({"run", "--lang", "python", "-c", "1/0"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("ZeroDivisionError"), std::string::npos) << r.err;
}

TEST_F(RunCli, ScriptFileWithArgumentsPicksLanguageByExtension) {
  TempDir dir;
  dir.write("greet.py", "import sys\nprint('hello', *sys.argv[1:])\n");
  auto r = runAirlock({"run", dir.file("greet.py"), "a", "b c"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hello a b c\n");
  dir.write("greet.js", "console.log(process.argv.slice(2).join('+'))\n");
  r = runAirlock({"run", dir.file("greet.js"), "--", "x", "y"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "x+y\n");
}

TEST_F(RunCli, CodeFromStandardInput) {
  auto r = runAirlock({"run", "--lang", "python", "-"}, "x = 20\nprint(x + 22)\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "42\n");
}

TEST_F(RunCli, StdinIsPassedToTheProgram) {
  auto r = runAirlock(
      {"run", "--lang", "python", "-c", "import sys; print(sys.stdin.read().upper())"}, "shout\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "SHOUT\n\n");
}

TEST_F(RunCli, StdinCutShortIsAnErrorNotASuccess) {
  // Positive control: an input the agent can hold arrives whole.
  const std::string small(1 << 20, 'x');
  auto ok = runAirlock({"run", "--lang", "shell", "-c", "sleep 1; wc -c"}, small);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ok.out, std::to_string(small.size()) + "\n");
  // 16 MiB that the program does not read for a second: past the 4 MiB the agent holds, the rest
  // is dropped, and a run that then "succeeds" on part of its input must say so.
  const std::string big(16 << 20, 'x');
  auto cut = runAirlock({"run", "--lang", "shell", "-c", "sleep 1; wc -c"}, big);
  if (cut.exit_code == 0) {
    EXPECT_EQ(cut.out, std::to_string(big.size()) + "\n") << "a short input passed for a success";
  } else {
    EXPECT_EQ(cut.exit_code, 125) << cut.err;
    EXPECT_NE(cut.err.find("standard input was cut short"), std::string::npos) << cut.err;
  }
}

TEST_F(RunCli, LargeInlineProgramRuns) {
  std::string code = "x = 0\n";
  while (code.size() < 300 * 1024) code += "x += 1\n";
  code += "print(x)\n";
  auto r = runAirlock({"run", "--lang", "python", "-"}, code);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(std::stoi(r.out), 40000);
}

TEST_F(RunCli, TimeoutKillsAndSaysSo) {
  auto r = runAirlock({"run", "--timeout", "1", "--lang", "shell", "-c", "sleep 30"});
  EXPECT_EQ(r.exit_code, 124);
  EXPECT_NE(r.err.find("time limit"), std::string::npos) << r.err;
  auto j = runJson({"--timeout", "1", "--lang", "python", "-c", "while True: pass"});
  EXPECT_EQ(j["status"], "timeout");
  // The execution's own time: a microVM's boot under emulation alone takes seconds.
  EXPECT_LT(j["timing_ms"]["exec"].get<double>(), 5000);
}

// The supervisor waits for the agent in poll() slices of a minute; the end of a slice is not
// the end of the execution's time. A program silent for longer than that still finishes.
TEST_F(RunCli, AProgramSilentForOverAMinuteIsNotCutOff) {
  auto r = runAirlock({"run", "--timeout", "90", "--lang", "shell", "-c", "sleep 62; echo done"},
                      "", 150);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "done\n") << r.err;
}

TEST_F(RunCli, MemoryLimitKillsAndSaysSo) {
  auto r = runAirlock({"run", "--memory", "64", "--lang", "python", "-c",
                       "b = []\nwhile True: b.append(bytearray(8 << 20))"});
  EXPECT_EQ(r.exit_code, 122) << r.err;
  EXPECT_NE(r.err.find("memory limit"), std::string::npos) << r.err;
}

TEST_F(RunCli, SandboxedCodeIsTheOomKillersFirstChoice) {
  // The agent (PID 1) must outlive an OOM: its children run with the highest score. The child
  // sets its score while it still shares the agent's memory (agent/child.h), so the agent's own
  // score is checked too: the kernel must not have applied the child's write to it.
  auto r = runAirlock(
      {"run", "--lang", "shell", "-c", "cat /proc/self/oom_score_adj /proc/1/oom_score_adj"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.out.rfind("1000\n", 0), 0u) << r.out;
  const std::string agent_score = r.out.substr(5);
  EXPECT_FALSE(agent_score.empty()) << r.out;
  EXPECT_NE(agent_score, "1000\n") << "the agent took its child's score";
}

TEST_F(RunCli, ProgramsStartWithDefaultSignalsAndAnEmptyMask) {
  // The supervisor catches SIGINT, SIGTERM and SIGHUP and ignores SIGPIPE; none of that may reach
  // the sandbox. The namespaces backend keeps every signal blocked from the clone through the
  // agent's exec (plugins/isolation/namespaces/child.h), the agent sets its own mask and
  // dispositions, and its children start with none. cat reads its own status (grep would not
  // do: it installs a SIGSEGV handler); after `trap '' PIPE` the same probe sees an ignored
  // signal, so it can tell.
  auto r = runAirlock({"run", "--lang", "shell", "-c",
                       "cat /proc/self/status | grep -E '^Sig(Blk|Ign|Cgt)'; echo --; "
                       "cat /proc/1/status | grep -E '^Sig(Blk|Cgt)'; echo --; "
                       "trap '' PIPE; cat /proc/self/status | grep '^SigIgn'"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\nSigCgt:\t0000000000000000\n"
            "--\n"
            // PID 1: SIGCHLD blocked (read through a signalfd), no handlers.
            "SigBlk:\t0000000000010000\nSigCgt:\t0000000000000000\n"
            "--\n"
            "SigIgn:\t0000000000001000\n");
}

TEST_F(RunCli, EnvironmentIsCleanPlusWhatWasAsked) {
  auto r = runAirlock({"run", "--env", "GREETING=hi there", "--lang", "shell", "-c",
                       "echo \"$GREETING\"; env | sort"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("hi there\n", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("HOME=/home/user"), std::string::npos);
  EXPECT_EQ(r.out.find("AIRLOCK_TEST"), std::string::npos) << "host environment leaked";
}

TEST_F(RunCli, FilesGoInAndComeOut) {
  TempDir dir;
  dir.write("numbers.txt", "3\n4\n5\n");
  auto r = runAirlock({"run", "--file", dir.file("numbers.txt") + ":in/numbers.txt", "--out",
                       "out/sum.txt:" + dir.file("sum.txt"), "--lang", "python", "-c",
                       "import os\nos.makedirs('out', exist_ok=True)\n"
                       "n = [int(l) for l in open('in/numbers.txt')]\n"
                       "open('out/sum.txt', 'w').write(str(sum(n)))\n"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(dir.read("sum.txt"), "12");
}

TEST_F(RunCli, MissingOutputFileIsAnErrorNamingIt) {
  TempDir dir;
  auto r = runAirlock(
      {"run", "--out", "nope.txt:" + dir.file("nope.txt"), "--lang", "shell", "-c", "true"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("nope.txt"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.file("nope.txt")));
}

TEST_F(RunCli, JsonRecordDescribesTheRun) {
  auto j = runJson(
      {"--lang", "python", "-c", "import sys; print('out'); print('err', file=sys.stderr)"});
  EXPECT_EQ(j["schema"], 1);
  EXPECT_EQ(j["status"], "exited");
  EXPECT_EQ(j["exit_code"], 0);
  EXPECT_EQ(j["stdout"], "out\n");
  EXPECT_EQ(j["stderr"], "err\n");
  EXPECT_EQ(j["language"], "python");
  EXPECT_EQ(j["profile"], "default");
  EXPECT_EQ(j["sandbox_id"].get<std::string>().size(), 16u);
  EXPECT_FALSE(j["policy"]["hash"].get<std::string>().empty());
  EXPECT_GT(j["timing_ms"]["total"].get<double>(), 0);
  EXPECT_GT(j["usage"]["max_rss_kb"].get<int>(), 0);
}

TEST_F(RunCli, OutputOverTheCapIsTruncatedAndCounted) {
  auto j = runJson({"--lang", "python", "-c", "import sys; sys.stdout.write('x' * 5_000_000)"});
  EXPECT_EQ(j["status"], "exited");
  EXPECT_TRUE(j["stdout_truncated"].get<bool>());
  EXPECT_EQ(j["stdout_bytes"], 5000000);
  EXPECT_EQ(j["stdout"].get<std::string>().size(), 1u << 20);
}

TEST_F(RunCli, PandasExampleSummarizesTheCsv) {
  // A microVM without KVM emulates every instruction: `import pandas` alone takes ~50 s there.
  const std::string timeout = underMicrovm() ? "240" : "30";
  auto r = runAirlock({"run", "--timeout", timeout, "--file",
                       sourceDir() + "/examples/data/transactions.csv:transactions.csv",
                       sourceDir() + "/examples/summarize_spending.py"},
                      "", 300);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("28 transactions, 2 months"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("housing"), std::string::npos);
  EXPECT_NE(r.out.find("2500.0"), std::string::npos) << r.out;
}

TEST_F(RunCli, ConcurrentRunsAreSeparateSandboxes) {
  std::vector<std::future<json>> runs;
  for (int i = 0; i < 4; ++i)
    runs.push_back(std::async(std::launch::async, [] {
      return runJson({"--lang", "shell", "-c", "cat /proc/self/uid_map; hostname"});
    }));
  std::set<std::string> ids, maps;
  for (auto& f : runs) {
    auto j = f.get();
    EXPECT_EQ(j["exit_code"], 0);
    ids.insert(j["sandbox_id"].get<std::string>());
    maps.insert(j["stdout"].get<std::string>());
  }
  EXPECT_EQ(ids.size(), 4u);
  // Under gVisor and in a microVM each sandbox is its own kernel whose uid_map is its own
  // identity map; there is no host uid range to compare.
  if (!underGvisor() && !underMicrovm()) {
    EXPECT_EQ(maps.size(), 4u) << "two sandboxes shared a host uid range";
  }
}

TEST_F(RunCli, BadFlagsAreAirlockErrors) {
  auto r = runAirlock({"run", "--timeout", "soon", "-c", "1"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("timeout"), std::string::npos) << r.err;
  r = runAirlock({"run", "--lang", "cobol", "-c", "x"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("cobol"), std::string::npos) << r.err;
  r = runAirlock({"run", "--file", ":x", "--lang", "sh", "-c", "true"});
  EXPECT_EQ(r.exit_code, 125);
  r = runAirlock({"run", "/nonexistent/script.py"});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("/nonexistent/script.py"), std::string::npos) << r.err;
}

// The audit engine the first run pinned stays for later runs; `airlock audit unload` removes every
// version no airlock process uses and keeps (and names) one in use. Other tests may run airlock
// at the same time, so the removal is checked on a version of our own making.
TEST_F(RunCli, AuditUnloadRemovesUnusedEngineVersionsAndKeepsUsedOnes) {
  auto ran = runAirlock({"run", "--lang", "shell", "-c", "true"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  const std::string root = "/sys/fs/bpf/airlock";
  std::vector<std::string> versions;
  for (const auto& e : std::filesystem::directory_iterator(root))
    versions.push_back(e.path().filename());
  ASSERT_FALSE(versions.empty()) << "positive control: a run leaves the engine pinned";

  // An older airlock's version that nobody uses (one pinned map is enough to be a version).
  const std::string stale = root + "/0000000000000000";
  ASSERT_TRUE(std::filesystem::create_directory(stale));
  auto made = runCommand({"/usr/sbin/bpftool", "map", "create", stale + "/slot_config", "type",
                          "array", "key", "4", "value", "4", "entries", "1", "name", "old"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  // A version in use: this test holds its users lock, as every airlock process using it does.
  const std::string used = versions.front();
  int users = ::open(("/run/lock/airlock-audit/" + used + ".users").c_str(),
                     O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(users, 0);
  ASSERT_EQ(::flock(users, LOCK_SH), 0);

  auto unload = runAirlock({"audit", "unload"});
  ::close(users);
  EXPECT_EQ(unload.exit_code, 1) << unload.out << unload.err;
  EXPECT_NE(unload.out.find("unpinned " + stale), std::string::npos) << unload.out;
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_NE(unload.out.find("kept " + root + "/" + used + ": in use"), std::string::npos)
      << unload.out;
  EXPECT_TRUE(std::filesystem::exists(root + "/" + used));

  auto bad = runAirlock({"audit", "unload", "--now"});
  EXPECT_EQ(bad.exit_code, 125);
  EXPECT_NE(bad.err.find("unexpected argument '--now'"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace airlock::testing
