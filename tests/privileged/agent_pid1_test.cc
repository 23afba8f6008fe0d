// airlock-agent as PID 1 of a fresh pid namespace (root only): the kill(-1) paths, reaping of
// everything re-parented to init, and the namespace dying with the channel.
#include <signal.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent_harness.h"
#include "test_support.h"

namespace airlock::agent::testing {
namespace {

namespace proto = airlock::protocol;
using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string> pidNamespace() {
  return {"/usr/bin/unshare", "--pid", "--fork", "--mount-proc", "--kill-child"};
}

// "pid comm" of every process in the namespace except the listing shell itself.
std::string listProcesses(AgentProcess& agent, uint32_t id) {
  auto r = agent.run(id, shell("for p in /proc/[0-9]*; do [ \"${p#/proc/}\" = $$ ] || "
                               "echo \"${p#/proc/} $(cat $p/comm 2>/dev/null)\"; done"));
  EXPECT_TRUE(r.exited);
  return r.out;
}

// The listing once only the agent is left, or the last one after a second: SIGKILL is
// delivered, and the dead reaped, a moment after the execution reports its end.
std::string listOnceSettled(AgentProcess& agent, uint32_t first_id) {
  std::string out;
  for (uint32_t id = first_id; id < first_id + 20; ++id) {
    out = listProcesses(agent, id);
    if (out == "1 \n") break;
    ::usleep(50 * 1000);
  }
  return out;
}

class AgentPid1 : public ::testing::Test {
 protected:
  void SetUp() override {
    AIRLOCK_REQUIRE_ROOT();
    AIRLOCK_REQUIRE(access("/usr/bin/unshare", X_OK) == 0, "needs /usr/bin/unshare");
    agent_ = std::make_unique<AgentProcess>(pidNamespace());
    ASSERT_EQ(agent_->hello().agent_pid, 1u);
    ASSERT_EQ(agent_->configure(AgentProcess::defaultConfigure()).first.type, proto::MsgType::kOk);
  }
  std::unique_ptr<AgentProcess> agent_;
};

TEST_F(AgentPid1, EscapedSessionLeadersDieWithTheExecution) {
  // setsid leaves the execution's process group; only kill(-1) as PID 1 reaches it.
  auto r = agent_->run(2, shell("setsid sleep 1000 & sleep 0.2; echo started"));
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.exited->exit_code, 0);
  EXPECT_EQ(listOnceSettled(*agent_, 100), "1 \n");
}

TEST_F(AgentPid1, TimeoutKillsEverythingButTheAgent) {
  auto e = shell("setsid sleep 1000 & sh -c 'sleep 1000 &'; sleep 1000");
  e.timeout_ms = 300;
  auto r = agent_->run(4, e, 20000);
  ASSERT_TRUE(r.exited);
  EXPECT_TRUE(r.exited->timed_out);
  // Only the agent is left (its comm is unreadable: it is not dumpable).
  EXPECT_EQ(listOnceSettled(*agent_, 100), "1 \n");
}

TEST_F(AgentPid1, OrphanedZombiesAreReaped) {
  auto r = agent_->run(6, shell("i=0; while [ $i -lt 300 ]; do (sleep 0.01 &); i=$((i+1)); done; "
                                "sleep 0.5"));
  ASSERT_TRUE(r.exited);
  // Only the agent remains: no zombie or straggler (the glob is expanded before any cat runs).
  EXPECT_EQ(listProcesses(*agent_, 7), "1 \n");
}

// kill_scope session never uses kill(-1), even as the only execution: a concurrent execution
// survives another's timeout, and a process that left the session with setsid outlives it.
TEST_F(AgentPid1, SessionScopeKillsOnlyTheSession) {
  auto keep = shell("echo $$; sleep 1000");
  keep.kill_scope = proto::ExecKillScope::kSession;
  agent_->send(10, keep);
  auto first = agent_->nextOutput(10);
  ASSERT_TRUE(first);
  std::string keep_pid = first->data.substr(0, first->data.find('\n'));

  auto doomed = shell("sleep 1000 & sleep 1000");
  doomed.kill_scope = proto::ExecKillScope::kSession;
  doomed.timeout_ms = 300;
  auto r = agent_->run(11, doomed, 20000);
  ASSERT_TRUE(r.exited);
  EXPECT_TRUE(r.exited->timed_out);
  std::string after = listProcesses(*agent_, 12);
  // comm of sandboxed processes is unreadable here; pids tell: the agent, sh and its sleep.
  EXPECT_THAT(after, HasSubstr("\n" + keep_pid + " \n"));
  EXPECT_EQ(std::count(after.begin(), after.end(), '\n'), 3) << after;

  agent_->send(10, proto::Signal{SIGKILL});
  ASSERT_TRUE(agent_->collect(10, 10000).exited);

  EXPECT_EQ(listProcesses(*agent_, 13), "1 \n");

  auto detach = shell("setsid sleep 1000 >&- 2>&- & echo $!; sleep 0.2");
  detach.kill_scope = proto::ExecKillScope::kSession;
  auto d = agent_->run(14, detach);
  ASSERT_TRUE(d.exited);
  std::string escaped = d.out.substr(0, d.out.find('\n'));
  ASSERT_FALSE(escaped.empty());
  EXPECT_EQ(listProcesses(*agent_, 15), "1 \n" + escaped + " \n");
}

TEST_F(AgentPid1, ChannelCloseEndsTheNamespace) {
  agent_->send(8, shell("setsid sleep 1000 & sleep 1000"));
  EXPECT_EQ(agent_->closeAndWait(), 0);
}

}  // namespace
}  // namespace airlock::agent::testing
