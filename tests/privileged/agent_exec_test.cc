// airlock-agent executions: handshake, stdio relay, exit status, signals, caps, timeouts,
// exec failures, protocol errors, teardown. Runs without root (uid/gid = the test's own).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "agent_harness.h"
#include "protocol_test_util.h"
#include "test_support.h"

namespace airlock::agent::testing {
namespace {

namespace proto = airlock::protocol;
using ::testing::HasSubstr;

class AgentExec : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ok = agent_.configure(AgentProcess::defaultConfigure());
    ASSERT_EQ(ok.first.type, proto::MsgType::kOk)
        << (ok.first.type == proto::MsgType::kError ? proto::decodeError(ok.second)->message : "");
  }
  AgentProcess agent_;
};

TEST(AgentHandshake, HelloThenConfigureFirst) {
  AgentProcess agent;
  EXPECT_EQ(agent.hello().protocol_version, proto::kProtocolVersion);
  EXPECT_EQ(agent.hello().agent_pid, static_cast<uint32_t>(agent.pid()));
  EXPECT_FALSE(agent.hello().agent_version.empty());

  agent.send(5, shell("echo too early"));
  auto err = agent.nextFor(5);
  ASSERT_TRUE(err);
  ASSERT_EQ(err->first.type, proto::MsgType::kError);
  auto m = proto::decodeError(err->second);
  EXPECT_EQ(m->stage, "protocol");
  EXPECT_THAT(m->message, HasSubstr("expected Configure first, got Exec"));

  auto ok = agent.configure(AgentProcess::defaultConfigure(), 6);
  EXPECT_EQ(ok.first.type, proto::MsgType::kOk);
  auto again = agent.configure(AgentProcess::defaultConfigure(), 7);
  ASSERT_EQ(again.first.type, proto::MsgType::kError);
  EXPECT_THAT(proto::decodeError(again.second)->message, HasSubstr("already configured"));
  EXPECT_EQ(agent.closeAndWait(), 0);
}

TEST_F(AgentExec, StdoutStderrAndOrdering) {
  auto r = agent_.run(10, shell("echo out1; echo err1 >&2; echo out2; printf tail"));
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.out, "out1\nout2\ntail");
  EXPECT_EQ(r.err, "err1\n");
  EXPECT_EQ(r.exited->exit_code, 0);
  EXPECT_EQ(r.exited->signal, 0);
  EXPECT_EQ(r.exited->stdout_bytes, 14u);
  EXPECT_EQ(r.exited->stderr_bytes, 5u);
  EXPECT_FALSE(r.exited->stdout_truncated);
  EXPECT_FALSE(r.exited->timed_out);
  EXPECT_GT(r.exited->wall_us, 0u);
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(r.order.back(), proto::MsgType::kExited);
  EXPECT_FALSE(r.output_after_exit);
}

TEST_F(AgentExec, ExitCodeEnvAndCwd) {
  auto e = shell("echo \"$A:$(pwd)\"; exit 42");
  e.env = {"A=value", "PATH=/bin"};
  e.cwd = "/tmp";
  auto r = agent_.run(11, e);
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.exited->exit_code, 42);
  EXPECT_EQ(r.out, "value:/tmp\n");
}

TEST_F(AgentExec, OnlyStdioIsInherited) {
  auto r = agent_.run(12, shell("ls /proc/$$/fd"));
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.out, "0\n1\n2\n") << "a leaked agent fd reaches sandboxed code";
}

TEST_F(AgentExec, DeathBySignal) {
  auto r = agent_.run(13, shell("kill -SEGV $$"));
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.exited->signal, SIGSEGV);
  EXPECT_EQ(r.exited->exit_code, -1);
}

TEST_F(AgentExec, SignalFrameReachesTheProcessGroup) {
  agent_.send(14, shell("echo started; sleep 100 & wait"));
  ASSERT_TRUE(agent_.nextOutput(14));
  agent_.send(14, proto::Signal{SIGTERM});
  auto r = agent_.collect(14, 10000);
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.exited->signal, SIGTERM);
  EXPECT_LT(r.exited->wall_us, 10'000'000u);
}

TEST_F(AgentExec, StdinRelayWithEof) {
  proto::Exec e;
  e.argv = {"/bin/cat"};
  e.cwd = "/";
  e.stdin_pipe = true;
  agent_.send(15, e);
  std::string expect;
  // 3 MiB sent before reading anything back: the agent must keep reading the channel while
  // its Output frames wait for us, or both sides block on full sockets.
  for (int i = 0; i < 32; ++i) {
    std::string chunk(96 * 1024, static_cast<char>('a' + i % 26));
    expect += chunk;
    agent_.send(15, proto::Stdin{chunk, false});
  }
  agent_.send(15, proto::Stdin{"end", true});
  expect += "end";
  auto r = agent_.collect(15);
  ASSERT_TRUE(r.exited);
  EXPECT_TRUE(r.errors.empty()) << r.errors[0].message;
  EXPECT_EQ(r.exited->exit_code, 0);
  EXPECT_EQ(r.out.size(), expect.size());
  EXPECT_TRUE(r.out == expect);
}

TEST_F(AgentExec, StdinBufferIsBounded) {
  proto::Exec e = shell("sleep 1; head -c 10 >/dev/null; echo alive");
  e.stdin_pipe = true;
  agent_.send(25, e);
  for (int i = 0; i < 20; ++i) agent_.send(25, proto::Stdin{std::string(256 * 1024, 'x'), false});
  auto r = agent_.collect(25);
  ASSERT_FALSE(r.errors.empty());
  EXPECT_EQ(r.errors[0].stage, "stdin");
  EXPECT_EQ(r.errors[0].errnum, ENOBUFS);
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.out, "alive\n");
}

TEST_F(AgentExec, StdinWithoutPipeIsAnError) {
  agent_.send(16, shell("sleep 0.2"));
  agent_.send(16, proto::Stdin{"x", true});
  auto r = agent_.collect(16);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].stage, "stdin");
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.exited->exit_code, 0);
}

TEST_F(AgentExec, OutputCapTruncatesAndCounts) {
  auto e = shell("head -c 5000000 /dev/zero; echo done >&2");
  e.stdout_cap = 64 * 1024;
  e.stderr_cap = 64 * 1024;
  auto r = agent_.run(17, e);
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.exited->exit_code, 0);
  EXPECT_EQ(r.out.size(), 64u * 1024);
  EXPECT_TRUE(r.exited->stdout_truncated);
  EXPECT_EQ(r.exited->stdout_bytes, 5000000u);
  EXPECT_FALSE(r.exited->stderr_truncated);
  EXPECT_EQ(r.err, "done\n");
}

TEST_F(AgentExec, TimeoutKillsTheGroupAndDoubleForkedChildren) {
  // The inner shell prints its background sleep's pid and exits: the sleep is orphaned.
  auto e = shell("sh -c 'sleep 100 & echo $!'; sleep 100");
  e.timeout_ms = 500;
  auto start = std::chrono::steady_clock::now();
  auto r = agent_.run(18, e, 20000);
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(r.exited);
  EXPECT_TRUE(r.exited->timed_out);
  EXPECT_EQ(r.exited->signal, SIGKILL);
  EXPECT_LT(took, std::chrono::seconds(5));
  pid_t grandchild = std::atoi(r.out.c_str());
  ASSERT_GT(grandchild, 1) << "output: " << r.out;
  EXPECT_TRUE(processGone(grandchild)) << "orphaned grandchild " << grandchild << " survived";
}

TEST_F(AgentExec, BackgroundProcessesDieWithTheMainProcess) {
  auto r = agent_.run(19, shell("sleep 100 & echo $!"));
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.exited->exit_code, 0);
  pid_t bg = std::atoi(r.out.c_str());
  ASSERT_GT(bg, 1);
  EXPECT_TRUE(processGone(bg));
}

TEST_F(AgentExec, MissingBinaryIsErrorThenExited127) {
  proto::Exec e;
  e.argv = {"/nonexistent/python3", "-c", "1"};
  e.cwd = "/";
  auto r = agent_.run(20, e);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].stage, "exec");
  EXPECT_EQ(r.errors[0].errnum, ENOENT);
  EXPECT_THAT(r.errors[0].message, HasSubstr("execve '/nonexistent/python3': ENOENT"));
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.exited->exit_code, 127);
  ASSERT_EQ(r.order.size(), 2u);
  EXPECT_EQ(r.order[0], proto::MsgType::kError);
  EXPECT_EQ(r.order[1], proto::MsgType::kExited);
}

TEST_F(AgentExec, NotExecutableIs126AndBadCwdNamesIt) {
  ::airlock::testing::TempDir dir;
  dir.write("script", "#!/bin/sh\necho hi\n", 0644);
  proto::Exec e;
  e.argv = {dir.file("script")};
  e.cwd = "/";
  auto r = agent_.run(21, e);
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].errnum, EACCES);
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.exited->exit_code, 126);

  auto bad = shell("true");
  bad.cwd = "/no/such/dir";
  auto r2 = agent_.run(22, bad);
  ASSERT_EQ(r2.errors.size(), 1u);
  EXPECT_EQ(r2.errors[0].stage, "chdir");
  EXPECT_THAT(r2.errors[0].message, HasSubstr("chdir '/no/such/dir': ENOENT"));
  ASSERT_TRUE(r2.exited);
  EXPECT_EQ(r2.exited->exit_code, 127);
}

TEST_F(AgentExec, ConcurrentExecutionsStaySeparate) {
  agent_.send(30, shell("sleep 0.3; echo a"));
  agent_.send(31, shell("echo b; exit 3"));
  auto r31 = agent_.collect(31);
  auto r30 = agent_.collect(30);
  ASSERT_TRUE(r30.exited && r31.exited);
  EXPECT_EQ(r30.out, "a\n");
  EXPECT_EQ(r30.exited->exit_code, 0);
  EXPECT_EQ(r31.out, "b\n");
  EXPECT_EQ(r31.exited->exit_code, 3);
}

TEST_F(AgentExec, BadFrameIsReportedAndTheAgentKeepsServing) {
  agent_.sendRaw(proto::testing::header(0, static_cast<uint16_t>(proto::MsgType::kExec), 40));
  auto err = agent_.nextFor(40);
  ASSERT_TRUE(err);
  ASSERT_EQ(err->first.type, proto::MsgType::kError);
  auto m = proto::decodeError(err->second);
  EXPECT_EQ(m->stage, "protocol");
  EXPECT_EQ(m->message, "Exec: field 'argv' (tag 1): 0 items, need at least 1");

  agent_.send(41, proto::Output{proto::Stream::kStdout, "x"});
  auto err2 = agent_.nextFor(41);
  ASSERT_TRUE(err2);
  EXPECT_EQ(proto::decodeError(err2->second)->stage, "protocol");

  auto r = agent_.run(42, shell("echo still here"));
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.out, "still here\n");
}

TEST_F(AgentExec, CorruptStreamEndsTheAgent) {
  agent_.sendRaw(proto::testing::header(0, 999, 50));
  auto err = agent_.next();
  ASSERT_TRUE(err);
  ASSERT_EQ(err->first.type, proto::MsgType::kError);
  EXPECT_THAT(proto::decodeError(err->second)->message, HasSubstr("unknown message type 999"));
  EXPECT_EQ(agent_.waitExit(), 2);
}

TEST_F(AgentExec, ChannelCloseKillsEverythingAndExits) {
  agent_.send(60, shell("sh -c 'sleep 100 & echo $!'; echo $$; sleep 100"));
  std::string out;
  while (std::count(out.begin(), out.end(), '\n') < 2) {
    auto o = agent_.nextOutput(60);
    ASSERT_TRUE(o);
    out += o->data;
  }
  pid_t orphan = std::atoi(out.c_str());
  pid_t main_pid = std::atoi(out.substr(out.find('\n') + 1).c_str());
  ASSERT_GT(orphan, 1);
  ASSERT_GT(main_pid, 1);
  EXPECT_FALSE(processGone(main_pid));
  EXPECT_EQ(agent_.closeAndWait(), 0);
  EXPECT_TRUE(processGone(orphan));
  EXPECT_TRUE(processGone(main_pid));
}

TEST_F(AgentExec, ShutdownAnswersOkAndExits) {
  agent_.send(70, shell("sleep 100"));
  agent_.send(71, proto::Shutdown{});
  auto ok = agent_.nextFor(71);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->first.type, proto::MsgType::kOk);
  EXPECT_EQ(agent_.waitExit(), 0);
}

// Orphans re-parented to the agent must be reaped; none may pile up as zombies.
TEST_F(AgentExec, TenThousandZombiesAreReaped) {
  AIRLOCK_REQUIRE(access("/usr/bin/python3", X_OK) == 0, "needs /usr/bin/python3");
  proto::Exec e;
  e.argv = {"/usr/bin/python3", "-c",
            "import os\n"
            "for _ in range(10000):\n"
            "    if os.fork() == 0: os._exit(0)\n"
            "print('forked')\n"};
  e.cwd = "/";
  auto r = agent_.run(80, e, 120000);
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.out, "forked\n") << r.err;
  EXPECT_EQ(r.exited->exit_code, 0);
  // Exited is only sent once the process group is empty, zombies included.
  auto r2 = agent_.run(81, shell("grep -l '^PPid:[[:space:]]*" + std::to_string(agent_.pid()) +
                                 "$' /proc/[0-9]*/status 2>/dev/null | wc -l"));
  ASSERT_TRUE(r2.exited);
  // The only child of the agent left is the shell running this check (and its pipeline).
  EXPECT_LE(std::atoi(r2.out.c_str()), 1) << r2.out;
}

}  // namespace
}  // namespace airlock::agent::testing
