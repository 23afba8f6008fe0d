// The supervisor's side of the handshake (sandbox/agent/handshake.h): a Configure queued in the
// channel before the agent exists is answered like one sent after its Hello, and one too large
// to queue waits for the Hello.
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "agent_harness.h"
#include "airlock/protocol/channel.h"
#include "supervisor/sandbox/agent/connection.h"
#include "supervisor/sandbox/agent/handshake.h"
#include "supervisor/sandbox/agent/program.h"
#include "test_support.h"

namespace airlock::agent::testing {
namespace {

namespace proto = airlock::protocol;
using sandbox::AgentHandshake;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Bytes waiting to be read on fd.
int pending(int fd) {
  int n = -1;
  EXPECT_EQ(ioctl(fd, FIONREAD, &n), 0) << strerror(errno);
  return n;
}

// Starts airlock-agent with `theirs` as its channel on fd 3; returns its pid.
pid_t spawnAgent(int theirs) {
  std::string path = ::airlock::testing::agentBinary();
  pid_t pid = fork();
  if (pid == 0) {
    dup2(theirs, 3);
    char* argv[] = {path.data(), nullptr};
    execv(argv[0], argv);
    _exit(127);
  }
  return pid;
}

TEST(AgentHandshake, AConfigureQueuedBeforeTheAgentRunsIsAnswered) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd theirs(fcntl(sv[1], F_DUPFD_CLOEXEC, 10));
  close(sv[1]);
  AgentHandshake client{UniqueFd(sv[0])};

  ASSERT_TRUE(client.preconfigure(AgentProcess::defaultConfigure()));
  // The frame is in the channel before any agent exists.
  EXPECT_GT(pending(theirs.get()), 0);

  pid_t pid = spawnAgent(theirs.get());
  ASSERT_GT(pid, 0);
  theirs.reset();
  auto hello = client.handshake(AgentProcess::defaultConfigure(), Clock::now() + 10s);
  ASSERT_TRUE(hello) << hello.error().message();
  EXPECT_EQ(hello->protocol_version, proto::kProtocolVersion);

  // Configured: it runs programs, through the connection that takes the channel over.
  {
    auto hub = sandbox::ChannelHub::start(sandbox::ChannelHub::Mode::kInline);
    ASSERT_TRUE(hub) << hub.error().message();
    auto conn = (*hub)->attach(client.channelFd(), "sb-test");
    ASSERT_TRUE(conn) << conn.error().message();
    auto ran = sandbox::runProgram(
        **conn, shell("echo configured"), [](proto::Stream, std::string_view) {}, {},
        Clock::now() + 30s);
    ASSERT_TRUE(ran) << ran.error().message();
    EXPECT_EQ(ran->exited.exit_code, 0);
    EXPECT_TRUE(ran->error.empty()) << ran->error;
    (*hub)->detach(*conn);
  }

  client.shutdown();
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(AgentHandshake, AConfigureTooLargeToQueueWaitsForTheHello) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd agent_end(sv[1]);
  AgentHandshake client{UniqueFd(sv[0])};
  proto::Configure big = AgentProcess::defaultConfigure();
  big.writable_paths.assign(3000, "/home/user/a/rather/long/path/name");  // ~100 KiB

  ASSERT_TRUE(client.preconfigure(big));
  EXPECT_EQ(pending(agent_end.get()), 0) << "nothing may wait in a socket nobody reads yet";
  // Positive control: a small one is queued on the same kind of channel.
  {
    int sv2[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv2), 0);
    UniqueFd end2(sv2[1]);
    AgentHandshake small{UniqueFd(sv2[0])};
    ASSERT_TRUE(small.preconfigure(AgentProcess::defaultConfigure()));
    EXPECT_GT(pending(end2.get()), 0);
  }

  // Play the agent: Hello first, then the Configure must arrive and be answered.
  std::optional<Result<proto::Hello>> hello;
  // jthread: joined on every way out (the handshake gives up at its deadline).
  std::jthread supervisor([&] { hello = client.handshake(big, Clock::now() + 10s); });
  std::string out;
  proto::Hello h;
  h.agent_pid = 1;
  proto::encode(out, 0, h);
  ASSERT_TRUE(proto::writeFrame(agent_end.get(), out));
  proto::FrameReader reader;
  std::optional<std::pair<proto::FrameHeader, std::string>> frame;
  char buf[65536];
  while (!frame) {
    ssize_t n = read(agent_end.get(), buf, sizeof buf);
    ASSERT_GT(n, 0);
    reader.feed({buf, static_cast<size_t>(n)});
    auto next = reader.next();
    ASSERT_TRUE(next);
    frame = std::move(*next);
  }
  EXPECT_EQ(frame->first.type, proto::MsgType::kConfigure);
  auto conf = proto::decodeConfigure(frame->second);
  ASSERT_TRUE(conf) << conf.error().message();
  EXPECT_EQ(conf->writable_paths.size(), 3000u);
  out.clear();
  proto::encode(out, frame->first.request_id, proto::Ok{});
  ASSERT_TRUE(proto::writeFrame(agent_end.get(), out));
  supervisor.join();
  ASSERT_TRUE(hello && *hello) << (hello ? hello->error().message() : "no result");
}

}  // namespace
}  // namespace airlock::agent::testing
