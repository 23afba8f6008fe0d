// The agent when its supervisor dies: with a reattach grace it keeps executions running, holds
// their frames (bounded), and hands them to the next supervisor, which takes the spare socket
// the agent leaves on fd 3 (kReattachFd) with pidfd_getfd, as supervisor/sandbox/host does, or
// (--reattach-by-helper, gVisor) that a helper inside the sandbox brings it (agent/rechannel.h).
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <thread>

#include "agent/agent.h"
#include "agent_harness.h"
#include "test_support.h"

namespace airlock::agent::testing {
namespace {

namespace proto = airlock::protocol;
using namespace std::chrono_literals;

// The spare socket a waiting agent offers, once it is there (needs ptrace rights: root).
UniqueFd takeSpareChannel(pid_t agent) {
  UniqueFd pidfd(static_cast<int>(syscall(SYS_pidfd_open, agent, 0)));
  if (!pidfd) return {};
  auto deadline = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < deadline) {
    UniqueFd fd(static_cast<int>(syscall(SYS_pidfd_getfd, pidfd.get(), kReattachFd, 0)));
    // Before the agent noticed the old channel closed, fd 3 is still that channel: a socket
    // whose peer is gone reads EOF at once; the spare one has nothing to read.
    if (fd) {
      char c;
      if (recv(fd.get(), &c, 1, MSG_PEEK | MSG_DONTWAIT) < 0 && errno == EAGAIN) return fd;
    }
    std::this_thread::sleep_for(20ms);
  }
  return {};
}

// With a reattach grace, a closed channel makes the agent wait for the next supervisor: tests
// end it with Shutdown.
void shutdown(AgentProcess& agent) {
  agent.send(999, proto::Shutdown{});
  auto ok = agent.nextFor(999);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->first.type, proto::MsgType::kOk);
  EXPECT_EQ(agent.waitExit(), 0);
}

class AgentReattach : public ::testing::Test {
 protected:
  void SetUp() override { AIRLOCK_REQUIRE_ROOT(); }
};

// The numbers a counting execution printed.
std::vector<int> numbers(const std::string& out) {
  std::vector<int> v;
  size_t pos = 0, nl;
  while ((nl = out.find('\n', pos)) != std::string::npos) {
    v.push_back(std::atoi(out.substr(pos, nl - pos).c_str()));
    pos = nl + 1;
  }
  return v;
}

TEST_F(AgentReattach, ExecutionsOutliveTheSupervisorAndTheirOutputWaitsForResume) {
  AgentProcess agent({}, {"--reattach-grace-ms", "20000"});
  ASSERT_TRUE(agent.hello().features & proto::kFeatureKeepSessions);
  ASSERT_EQ(agent.configure(AgentProcess::defaultConfigure()).first.type, proto::MsgType::kOk);
  auto exec = shell("for i in $(seq 1 40); do echo $i; sleep 0.05; done");
  exec.note = R"({"kind":"command"})";
  agent.send(2, exec);
  std::string before;
  while (numbers(before).size() < 3) {
    auto o = agent.nextOutput(2);
    ASSERT_TRUE(o);
    before += o->data;
  }
  // Two frames only the new supervisor's: a note update, then the old supervisor dies.
  agent.send(3, proto::Note{R"({"kind":"command","argv":["counter"]})"});
  agent.send(2, proto::Note{R"({"kind":"command","argv":["counter"]})"});
  (void)agent.takeChannel();
  std::this_thread::sleep_for(500ms);  // the counter goes on with nobody listening
  auto spare = takeSpareChannel(agent.pid());
  ASSERT_TRUE(spare) << "the agent offered no channel";
  agent.useChannel(std::move(spare));

  // Under the execution's own id, as a new supervisor's first request may be: the answer still
  // comes at once, while the execution's frames wait for Resume.
  agent.send(2, proto::Reattach{.keep_sessions = true});
  auto answer = agent.nextFor(2);
  ASSERT_TRUE(answer);
  ASSERT_EQ(answer->first.type, proto::MsgType::kReattached);
  auto r = proto::decodeReattached(answer->second);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->last_request_id, 3u);
  EXPECT_TRUE(r->features & proto::kFeatureKeepSessions);
  EXPECT_TRUE(r->ended.empty());
  ASSERT_EQ(r->live.size(), 1u);
  EXPECT_EQ(r->live[0].request_id, 2u);
  EXPECT_FALSE(r->live[0].exited);
  EXPECT_FALSE(r->live[0].code_context);
  EXPECT_EQ(r->live[0].note, R"({"kind":"command","argv":["counter"]})");
  EXPECT_GT(r->live[0].held_bytes, 0u);
  EXPECT_EQ(r->live[0].dropped_bytes, 0u);
  // Nothing of the execution's comes before Resume: the new supervisor has no handler yet.
  EXPECT_TRUE(agent.quietFor(300)) << "a frame came before Resume";

  agent.send(101, proto::Resume{});
  auto rest = agent.collect(2);
  ASSERT_TRUE(rest.exited);
  EXPECT_EQ(rest.exited->exit_code, 0);
  auto seen = numbers(before), after = numbers(rest.out);
  ASSERT_FALSE(after.empty());
  EXPECT_EQ(after.front(), seen.back() + 1) << "output was lost or repeated across the restart";
  EXPECT_EQ(after.back(), 40);
  for (size_t i = 1; i < after.size(); ++i) EXPECT_EQ(after[i], after[i - 1] + 1);
  auto ok = agent.nextFor(101);
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->first.type, proto::MsgType::kOk);
  shutdown(agent);
}

// A supervisor may die after reading a run's end and before its note says the run ended: what
// a session driver said since its last note reaches the next supervisor again.
TEST_F(AgentReattach, ADriversFramesSinceItsLastNoteAreSentAgain) {
  AgentProcess agent({}, {"--reattach-grace-ms", "20000"});
  ASSERT_EQ(agent.configure(AgentProcess::defaultConfigure()).first.type, proto::MsgType::kOk);
  auto driver = shell("echo ready >&3; while read x; do echo done-$x >&3; done");
  driver.control_pipe = true;
  driver.stdin_pipe = true;
  driver.kill_scope = proto::ExecKillScope::kSession;
  driver.note = "idle";
  agent.send(2, driver);
  auto controlLine = [&] {
    for (;;) {
      auto o = agent.nextOutput(2);
      if (!o) return std::string("(none)");
      if (o->stream == proto::Stream::kControl) return o->data;
    }
  };
  ASSERT_EQ(controlLine(), "ready\n");
  agent.send(2, proto::Note{"run r1"});
  agent.send(2, proto::Stdin{"r1\n", false});
  ASSERT_EQ(controlLine(), "done-r1\n");  // read, but the supervisor dies before its note
  auto reattach = [&](uint32_t id) {
    (void)agent.takeChannel();
    auto spare = takeSpareChannel(agent.pid());
    EXPECT_TRUE(spare);
    agent.useChannel(std::move(spare));
    agent.send(id, proto::Reattach{.keep_sessions = true});
    auto answer = agent.nextFor(id);
    EXPECT_TRUE(answer);
    auto r = proto::decodeReattached(answer ? answer->second : "");
    EXPECT_TRUE(r);
    return r ? *r : proto::Reattached{};
  };
  auto r = reattach(100);
  ASSERT_EQ(r.live.size(), 1u);
  EXPECT_EQ(r.live[0].note, "run r1");
  EXPECT_GT(r.live[0].held_bytes, 0u);
  agent.send(101, proto::Resume{});
  EXPECT_EQ(controlLine(), "done-r1\n") << "the run's end was not sent again";
  // Once a note follows, nothing before it comes back.
  agent.send(2, proto::Note{"idle"});
  auto ok = agent.nextFor(101);
  ASSERT_TRUE(ok);
  r = reattach(200);
  ASSERT_EQ(r.live.size(), 1u);
  EXPECT_EQ(r.live[0].note, "idle");
  EXPECT_EQ(r.live[0].held_bytes, 0u);
  shutdown(agent);
}

// A supervisor built before kFeatureKeepSessions sends Reattach without keep_sessions: the
// executions end then, and it learns how, as before.
TEST_F(AgentReattach, ASupervisorThatCannotTakeExecutionsOverGetsThemEnded) {
  AgentProcess agent({}, {"--reattach-grace-ms", "20000"});
  ASSERT_EQ(agent.configure(AgentProcess::defaultConfigure()).first.type, proto::MsgType::kOk);
  agent.send(2, shell("echo up; exec sleep 300"));
  auto o = agent.nextOutput(2);
  ASSERT_TRUE(o);
  agent.send(3, shell("exit 7"));
  auto quick = agent.collect(3);
  ASSERT_TRUE(quick.exited);
  (void)agent.takeChannel();
  auto spare = takeSpareChannel(agent.pid());
  ASSERT_TRUE(spare);
  agent.useChannel(std::move(spare));
  agent.send(50, proto::Reattach{});
  auto answer = agent.nextFor(50);
  ASSERT_TRUE(answer);
  auto r = proto::decodeReattached(answer->second);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_TRUE(r->live.empty());
  ASSERT_EQ(r->ended.size(), 1u);
  EXPECT_EQ(r->ended[0].request_id, 2u);
  EXPECT_EQ(r->ended[0].signal, SIGKILL);
  EXPECT_TRUE(processGone(static_cast<pid_t>(r->ended[0].pid)));
  shutdown(agent);
}

// While nobody reads, held output is bounded: beyond kMaxHeldBytes it is dropped and counted,
// and the execution's end is still delivered.
TEST_F(AgentReattach, HeldOutputIsBoundedAndWhatWasDroppedIsCounted) {
  AgentProcess agent({}, {"--reattach-grace-ms", "20000"});
  ASSERT_EQ(agent.configure(AgentProcess::defaultConfigure()).first.type, proto::MsgType::kOk);
  const uint64_t total = proto::kMaxHeldBytes + (4u << 20);
  agent.send(2, shell("sleep 0.3; head -c " + std::to_string(total) + " /dev/zero"));
  auto started = agent.nextFor(2);
  ASSERT_TRUE(started);
  EXPECT_EQ(started->first.type, proto::MsgType::kStarted);
  (void)agent.takeChannel();  // the supervisor dies before the output comes
  std::this_thread::sleep_for(2s);
  auto spare = takeSpareChannel(agent.pid());
  ASSERT_TRUE(spare);
  agent.useChannel(std::move(spare));
  agent.send(60, proto::Reattach{.keep_sessions = true});
  auto answer = agent.nextFor(60);
  ASSERT_TRUE(answer);
  auto r = proto::decodeReattached(answer->second);
  ASSERT_TRUE(r) << r.error().message();
  ASSERT_EQ(r->live.size(), 1u);
  EXPECT_TRUE(r->live[0].exited) << "it ended while no supervisor was there";
  EXPECT_LE(r->live[0].held_bytes, proto::kMaxHeldBytes + 4096);
  EXPECT_GE(r->live[0].dropped_bytes, 4u << 20);
  agent.send(61, proto::Resume{});
  auto rest = agent.collect(2);
  ASSERT_TRUE(rest.exited);
  EXPECT_EQ(rest.exited->exit_code, 0);
  EXPECT_EQ(rest.exited->stdout_bytes, total);
  EXPECT_EQ(rest.out.size() + r->live[0].dropped_bytes, total);
  shutdown(agent);
}

// Nobody comes back within the grace: the sandbox ends, and everything it ran with it.
TEST_F(AgentReattach, NoSupervisorWithinTheGraceEndsEverything) {
  AgentProcess agent({}, {"--reattach-grace-ms", "400"});
  ASSERT_EQ(agent.configure(AgentProcess::defaultConfigure()).first.type, proto::MsgType::kOk);
  agent.send(2, shell("echo up; exec sleep 300"));
  auto o = agent.nextFor(2);
  ASSERT_TRUE(o);
  ASSERT_EQ(o->first.type, proto::MsgType::kStarted);
  auto pid = proto::decodeStarted(o->second);
  ASSERT_TRUE(pid);
  (void)agent.takeChannel();
  EXPECT_EQ(agent.waitExit(5000), 0);
  EXPECT_TRUE(processGone(static_cast<pid_t>(pid->pid)));
}

// Under gVisor no host process can take a socket from the agent: the next supervisor runs
// `airlock-agent --rechannel` inside the sandbox (runsc exec) with the new channel as its stdin.
// Here the helper joins the agent's network namespace (its abstract socket lives there), as a
// process inside a gVisor sandbox shares its netstack; as `uid`.
int runRechannelHelper(pid_t agent, int channel, uid_t uid, pid_t expect_pid = 0) {
  const std::string binary = ::airlock::testing::agentBinary();
  const std::string ns = "/proc/" + std::to_string(agent) + "/ns/net";
  const std::string pid_arg = std::to_string(expect_pid != 0 ? expect_pid : agent);
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(ns.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) != 0 || dup2(channel, 0) != 0) _exit(126);
    if (uid != 0 && (setgroups(0, nullptr) != 0 || setgid(uid) != 0 || setuid(uid) != 0))
      _exit(126);
    execl(binary.c_str(), "airlock-agent", "--rechannel", "--agent-pid", pid_arg.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST_F(AgentReattach, AHelperInsideTheSandboxHandsTheWaitingAgentItsNextChannel) {
  AgentProcess agent({"/usr/bin/unshare", "--net"},
                     {"--reattach-grace-ms", "20000", "--reattach-by-helper"});
  ASSERT_EQ(agent.configure(AgentProcess::defaultConfigure()).first.type, proto::MsgType::kOk);
  agent.send(2, shell("for i in $(seq 1 30); do echo $i; sleep 0.05; done"));
  std::string before;
  while (numbers(before).size() < 3) {
    auto o = agent.nextOutput(2);
    ASSERT_TRUE(o);
    before += o->data;
  }
  (void)agent.takeChannel();
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  UniqueFd ours(pair[0]), theirs(pair[1]);
  // Positive control first: a helper that is not root is refused, and the agent waits on.
  EXPECT_EQ(runRechannelHelper(agent.pid(), theirs.get(), 65534), 1)
      << "a non-root helper's channel was taken (or the helper did not run)";
  EXPECT_FALSE(processGone(agent.pid()));
  ASSERT_EQ(runRechannelHelper(agent.pid(), theirs.get(), 0), 0);
  theirs.reset();
  agent.useChannel(std::move(ours));
  agent.send(1, proto::Reattach{.keep_sessions = true});
  auto answer = agent.nextFor(1);
  ASSERT_TRUE(answer);
  ASSERT_EQ(answer->first.type, proto::MsgType::kReattached);
  auto r = proto::decodeReattached(answer->second);
  ASSERT_TRUE(r) << r.error().message();
  ASSERT_EQ(r->live.size(), 1u);
  EXPECT_EQ(r->live[0].request_id, 2u);
  agent.send(3, proto::Resume{});
  auto rest = agent.collect(2);
  ASSERT_TRUE(rest.exited);
  auto seen = numbers(before), after = numbers(rest.out);
  ASSERT_FALSE(after.empty());
  EXPECT_EQ(after.front(), seen.back() + 1) << "output was lost or repeated across the restart";
  EXPECT_EQ(after.back(), 30);
  // A second death and a second helper: the agent listens again each time.
  (void)agent.takeChannel();
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  ours.reset(pair[0]);
  theirs.reset(pair[1]);
  ASSERT_EQ(runRechannelHelper(agent.pid(), theirs.get(), 0), 0);
  agent.useChannel(std::move(ours));
  agent.send(1, proto::Reattach{.keep_sessions = true});
  answer = agent.nextFor(1);
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->first.type, proto::MsgType::kReattached);
  shutdown(agent);
}

// With nobody waiting, the helper says so and fails, rather than hang the supervisor's adopt().
TEST_F(AgentReattach, AHelperWithNoWaitingAgentFails) {
  AgentProcess agent({"/usr/bin/unshare", "--net"},
                     {"--reattach-grace-ms", "20000", "--reattach-by-helper"});
  ASSERT_EQ(agent.configure(AgentProcess::defaultConfigure()).first.type, proto::MsgType::kOk);
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  UniqueFd ours(pair[0]), theirs(pair[1]);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(runRechannelHelper(agent.pid(), theirs.get(), 0), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
  // The agent still serves its supervisor, which is alive.
  auto done = agent.run(5, shell("echo still"));
  EXPECT_EQ(done.out, "still\n");
  shutdown(agent);
}

// The abstract name the agent waits on, as sandbox code could try to take it.
sockaddr_un rendezvous(socklen_t& len) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const char name[] = "airlock-agent.rechannel";
  std::memcpy(addr.sun_path + 1, name, sizeof name - 1);
  len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + sizeof name);
  return addr;
}

// In a child: joins `netns` (or a new one when empty), drops to `uid`, binds the rendezvous
// name and listens; with `hold_ms`, keeps it that long. Exit 0: bound; 10 + errno: bind failed.
pid_t squat(const std::string& netns, uid_t uid, int hold_ms) {
  pid_t pid = fork();
  if (pid == 0) {
    if (netns.empty() ? unshare(CLONE_NEWNET) != 0 : [&] {
          int fd = open(netns.c_str(), O_RDONLY | O_CLOEXEC);
          return fd < 0 || setns(fd, CLONE_NEWNET) != 0;
        }())
      _exit(2);
    if (uid != 0 && (setgroups(0, nullptr) != 0 || setgid(uid) != 0 || setuid(uid) != 0)) _exit(3);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    socklen_t len;
    sockaddr_un addr = rendezvous(len);
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) _exit(10 + errno);
    if (listen(fd, 1) != 0) _exit(4);
    if (hold_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
    _exit(0);
  }
  return pid;
}

int exitCode(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Sandbox code could bind the rendezvous name first and be handed the next supervisor's
// channel: the agent takes the name at its start, before any code runs, and keeps it.
TEST_F(AgentReattach, SandboxCodeCannotTakeTheNameTheAgentWaitsOn) {
  // Positive control: where the name is free, the probe binds it.
  ASSERT_EQ(exitCode(squat("", 65534, 0)), 0) << "the probe cannot bind the name at all";
  AgentProcess agent({"/usr/bin/unshare", "--net"},
                     {"--reattach-grace-ms", "20000", "--reattach-by-helper"});
  ASSERT_EQ(agent.configure(AgentProcess::defaultConfigure()).first.type, proto::MsgType::kOk);
  const std::string ns = "/proc/" + std::to_string(agent.pid()) + "/ns/net";
  EXPECT_EQ(exitCode(squat(ns, 65534, 0)), 10 + EADDRINUSE) << "sandbox code took the name";
  // While its supervisor is alive, a helper's offer is closed unread.
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  UniqueFd ours(pair[0]), theirs(pair[1]);
  EXPECT_EQ(runRechannelHelper(agent.pid(), theirs.get(), 0), 1);
  auto done = agent.run(5, shell("echo still mine"));
  EXPECT_EQ(done.out, "still mine\n");
  shutdown(agent);
}

// Whatever listens on the name must be the agent (root, the pid the supervisor names) before
// the helper gives it anything.
TEST_F(AgentReattach, AHelperGivesTheChannelToNoOneButTheAgent) {
  // A listener of the sandbox user's in a namespace without an agent.
  const pid_t fake = squat("", 65534, 3000);
  std::this_thread::sleep_for(200ms);
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  UniqueFd ours(pair[0]), theirs(pair[1]);
  EXPECT_EQ(runRechannelHelper(fake, theirs.get(), 0, 1), 1) << "handed to a non-root listener";
  EXPECT_EQ(runRechannelHelper(fake, theirs.get(), 0, fake), 1) << "handed to a non-root listener";
  kill(fake, SIGKILL);
  exitCode(fake);
}

}  // namespace
}  // namespace airlock::agent::testing
