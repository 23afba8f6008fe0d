// airlock-agent port streams (docs/protocol.md, "Ports"): connecting to a loopback port, bytes
// both ways under the credit window, half-close and close, a refused port, the stream limit, and
// frames that break the rules. The agent runs as the test's child here, so it connects to the
// test's own loopback, where the test listens.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <thread>

#include "agent_harness.h"
#include "airlock/protocol/channel.h"
#include "supervisor/sandbox/agent/port_stream.h"

namespace airlock::agent::testing {
namespace {

namespace proto = airlock::protocol;
using ::testing::HasSubstr;

// A listening socket on 127.0.0.1 with an ephemeral port.
struct Listener {
  UniqueFd fd{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  uint16_t port = 0;
  Listener() {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd.get(), 128), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  UniqueFd accept() {
    pollfd p{fd.get(), POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1) return UniqueFd();
    return UniqueFd(::accept4(fd.get(), nullptr, nullptr, SOCK_CLOEXEC));
  }
};

std::string readExactly(int fd, size_t n) {
  std::string out;
  char buf[65536];
  while (out.size() < n) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1) break;
    ssize_t got = ::read(fd, buf, std::min(sizeof buf, n - out.size()));
    if (got <= 0) break;
    out.append(buf, static_cast<size_t>(got));
  }
  return out;
}

class AgentPorts : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ok = agent_.configure(AgentProcess::defaultConfigure());
    ASSERT_EQ(ok.first.type, proto::MsgType::kOk);
  }
  // Sends PortOpen; returns the answer frame.
  Frame open(uint32_t id, uint32_t port) {
    agent_.send(id, proto::PortOpen{port});
    auto f = agent_.nextFor(id);
    EXPECT_TRUE(f);
    return f ? *f : Frame{};
  }
  // Collects PortData of stream id until `n` bytes or an eof arrived, granting credit as it goes.
  std::string receive(uint32_t id, size_t n, bool* eof = nullptr) {
    std::string got;
    while (got.size() < n) {
      auto f = agent_.nextFor(id);
      if (!f || f->first.type != proto::MsgType::kPortData) {
        ADD_FAILURE() << "expected PortData, got "
                      << (f ? proto::msgTypeName(f->first.type) : "nothing");
        break;
      }
      auto d = proto::decodePortData(f->second);
      EXPECT_TRUE(d);
      EXPECT_LE(d->data.size(), proto::kMaxChunk);
      got += d->data;
      if (!d->data.empty()) agent_.send(id, proto::PortCredit{uint32_t(d->data.size())});
      if (d->eof) {
        if (eof) *eof = true;
        break;
      }
    }
    return got;
  }
  AgentProcess agent_;
};

TEST_F(AgentPorts, RelaysBothWaysWithHalfCloseUnderTheWindow) {
  Listener server;
  auto answer = open(10, server.port);
  ASSERT_EQ(answer.first.type, proto::MsgType::kOk);
  UniqueFd conn = server.accept();
  ASSERT_TRUE(conn);

  // Supervisor → server: one window in chunks; credit comes back as the agent writes.
  std::string up(proto::kPortWindow, 'u');
  for (size_t at = 0; at < up.size(); at += proto::kMaxChunk / 2)
    agent_.send(10, proto::PortData{up.substr(at, proto::kMaxChunk / 2), false});
  EXPECT_EQ(readExactly(conn.get(), up.size()), up);
  uint64_t credited = 0;
  while (credited < up.size()) {
    auto f = agent_.nextFor(10);
    ASSERT_TRUE(f);
    ASSERT_EQ(f->first.type, proto::MsgType::kPortCredit);
    credited += proto::decodePortCredit(f->second)->bytes;
  }
  EXPECT_EQ(credited, up.size());

  // Server → supervisor: more than a window; the agent stops at the window until credit comes.
  std::string down(3 * proto::kPortWindow + 17, 'd');
  for (size_t i = 0; i < down.size(); i += 4099) down[i] = static_cast<char>('a' + i % 26);
  std::thread writer([&] {
    size_t off = 0;
    while (off < down.size()) {
      ssize_t n = ::write(conn.get(), down.data() + off, down.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
  });
  EXPECT_EQ(receive(10, down.size()), down);
  writer.join();

  // Half-close from the supervisor: the server reads EOF, and can still answer.
  agent_.send(10, proto::PortData{"", true});
  EXPECT_EQ(readExactly(conn.get(), 1), "");
  ASSERT_EQ(::write(conn.get(), "bye", 3), 3);
  ::shutdown(conn.get(), SHUT_WR);
  bool eof = false;
  EXPECT_EQ(receive(10, 100, &eof), "bye");
  EXPECT_TRUE(eof);
  // Both directions done: the agent ends the stream cleanly.
  auto close = agent_.nextFor(10);
  ASSERT_TRUE(close);
  ASSERT_EQ(close->first.type, proto::MsgType::kPortClose);
  EXPECT_EQ(proto::decodePortClose(close->second)->errnum, 0);
}

TEST_F(AgentPorts, RefusedPortNamesIt) {
  uint16_t port;
  {
    Listener gone;
    port = gone.port;
  }  // closed: nothing listens there now
  auto answer = open(20, port);
  ASSERT_EQ(answer.first.type, proto::MsgType::kError);
  auto e = proto::decodeError(answer.second);
  EXPECT_EQ(e->errnum, ECONNREFUSED);
  EXPECT_EQ(e->stage, "port");
  EXPECT_THAT(e->message, HasSubstr("nothing listens on port " + std::to_string(port)));
}

TEST_F(AgentPorts, SupervisorCloseDropsTheConnection) {
  Listener server;
  ASSERT_EQ(open(30, server.port).first.type, proto::MsgType::kOk);
  UniqueFd conn = server.accept();
  ASSERT_TRUE(conn);
  agent_.send(30, proto::PortClose{});
  EXPECT_EQ(readExactly(conn.get(), 1), "");  // EOF: the agent closed its socket
  // Late frames for the closed stream are ignored, and the agent still serves.
  agent_.send(30, proto::PortData{"late", false});
  Listener other;
  EXPECT_EQ(open(31, other.port).first.type, proto::MsgType::kOk);
}

TEST_F(AgentPorts, BoundsStreamsPerSandbox) {
  Listener server;
  std::vector<UniqueFd> conns;
  for (uint32_t i = 0; i < proto::kMaxPortStreams; ++i) {
    ASSERT_EQ(open(100 + i, server.port).first.type, proto::MsgType::kOk) << i;
    conns.push_back(server.accept());
  }
  auto over = open(500, server.port);
  ASSERT_EQ(over.first.type, proto::MsgType::kError);
  auto e = proto::decodeError(over.second);
  EXPECT_EQ(e->errnum, EMFILE);
  EXPECT_THAT(e->message, HasSubstr("64 port streams"));
  // Closing one makes room.
  agent_.send(100, proto::PortClose{});
  EXPECT_EQ(open(501, server.port).first.type, proto::MsgType::kOk);
}

TEST_F(AgentPorts, FramesThatBreakTheRulesEndTheStream) {
  Listener server;
  // A bad port is refused by the decoder.
  auto bad = open(40, 0);
  ASSERT_EQ(bad.first.type, proto::MsgType::kError);
  EXPECT_THAT(proto::decodeError(bad.second)->message, HasSubstr("outside 1..65535"));

  // Data past the window: an error naming it, and the stream ends.
  ASSERT_EQ(open(41, server.port).first.type, proto::MsgType::kOk);
  UniqueFd conn = server.accept();
  ASSERT_TRUE(conn);
  // The server reads nothing, so bytes pile up in the agent once the socket buffers fill.
  std::string chunk(proto::kMaxChunk, 'x');
  for (int i = 0; i < 128; ++i) agent_.send(41, proto::PortData{chunk, false});
  std::optional<proto::ErrorMsg> error;
  for (;;) {
    auto f = agent_.nextFor(41);
    ASSERT_TRUE(f);
    if (f->first.type == proto::MsgType::kError) error = *proto::decodeError(f->second);
    if (f->first.type == proto::MsgType::kPortClose) {
      EXPECT_EQ(proto::decodePortClose(f->second)->errnum, EPROTO);
      break;
    }
  }
  ASSERT_TRUE(error);
  EXPECT_THAT(error->message, HasSubstr("overruns the 262144-byte window"));

  // Credit that grows the window past its size.
  ASSERT_EQ(open(42, server.port).first.type, proto::MsgType::kOk);
  agent_.send(42, proto::PortCredit{1});
  auto f = agent_.nextFor(42);
  ASSERT_TRUE(f);
  ASSERT_EQ(f->first.type, proto::MsgType::kError);
  EXPECT_THAT(proto::decodeError(f->second)->message, HasSubstr("grows the window past"));
}

// The supervisor's end (sandbox/agent/port_stream.h) against the real agent: open, bytes both
// ways with credit returned, the server's close seen as eof and the stream's end.
TEST(PortStreamWithAgent, RelaysAndEnds) {
  AgentProcess agent;
  ASSERT_EQ(agent.configure(AgentProcess::defaultConfigure()).first.type, proto::MsgType::kOk);
  UniqueFd channel = agent.takeChannel();
  auto hub = sandbox::ChannelHub::start(sandbox::ChannelHub::Mode::kThread);
  ASSERT_TRUE(hub) << hub.error().message();
  auto conn = (*hub)->attach(channel.get(), "sb-test");
  ASSERT_TRUE(conn) << conn.error().message();
  uint16_t closed_port;
  {
    Listener gone;
    closed_port = gone.port;
  }
  auto refused = sandbox::PortStream::open(*conn, closed_port, std::chrono::seconds(10));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, sandbox::ErrorCode::kBadGateway);
  EXPECT_THAT(refused.error().message,
              HasSubstr("nothing listens on port " + std::to_string(closed_port)));

  Listener server;

  auto stream = sandbox::PortStream::open(*conn, server.port, std::chrono::seconds(10));
  ASSERT_TRUE(stream) << stream.error().message;
  UniqueFd peer = server.accept();
  ASSERT_TRUE(peer);
  EXPECT_EQ((*stream)->sendWindow(), proto::kPortWindow);
  ASSERT_TRUE((*stream)->write("ping"));
  EXPECT_EQ(readExactly(peer.get(), 4), "ping");
  std::string big(2 * proto::kPortWindow, 'b');
  ASSERT_EQ(::write(peer.get(), big.data(), big.size()), static_cast<ssize_t>(big.size()));
  peer.reset();  // the server closes: after its bytes, eof, then the stream ends
  std::string got;
  sandbox::PortStream::Arrived a;
  while (!a.ended) {
    pollfd p{(*stream)->readyFd(), POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 10000), 1) << "got " << got.size() << " bytes";
    a = (*stream)->take();
    got += a.data;
    ASSERT_TRUE((*stream)->consumed(a.data.size()));
    if (a.eof && !a.ended) {
      ASSERT_TRUE((*stream)->writeEof());  // both sides done: the agent ends the stream
    }
  }
  EXPECT_EQ(got.size(), big.size());
  EXPECT_TRUE(got == big);
  EXPECT_TRUE(a.eof);
  EXPECT_EQ(a.error, "");
  stream->reset();
  (*hub)->detach(*conn);
}

// A hostile agent: data past the window the supervisor granted ends the stream, naming it.
TEST(PortStreamWithAgent, AgentOverrunningTheWindowEndsTheStream) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd ours(sv[0]), theirs(sv[1]);
  auto hub = sandbox::ChannelHub::start(sandbox::ChannelHub::Mode::kThread);
  ASSERT_TRUE(hub);
  auto conn = (*hub)->attach(ours.get(), "sb-hostile");
  ASSERT_TRUE(conn);
  std::thread fake([&] {
    proto::FrameReader reader;
    auto open = proto::readFrame(theirs.get(), reader, 10000);
    if (!open || open->first.type != proto::MsgType::kPortOpen) return;
    const uint32_t id = open->first.request_id;
    std::string out;
    proto::encode(out, id, proto::Ok{});
    proto::encode(out, id, proto::PortData{std::string(proto::kMaxChunk, 'x'), false});
    proto::encode(out, id, proto::PortData{"!", false});  // one byte past the window
    (void)proto::writeFrame(theirs.get(), out);
  });
  auto stream = sandbox::PortStream::open(*conn, 8000, std::chrono::seconds(10));
  fake.join();
  ASSERT_TRUE(stream) << stream.error().message;
  sandbox::PortStream::Arrived a;
  for (int i = 0; i < 100 && !a.ended; ++i) {
    pollfd p{(*stream)->readyFd(), POLLIN, 0};
    ::poll(&p, 1, 100);
    auto more = (*stream)->take();
    a.data += more.data;
    a.ended = more.ended;
    a.error = more.error;
  }
  EXPECT_TRUE(a.ended);
  EXPECT_EQ(a.data.size(), proto::kMaxChunk);  // what fit the window was delivered
  EXPECT_THAT(a.error, HasSubstr("agent overran its 262144-byte window"));
  EXPECT_EQ((*stream)->sendWindow(), 0u);
  EXPECT_FALSE((*stream)->write("x"));
  stream->reset();
  (*hub)->detach(*conn);
}

}  // namespace
}  // namespace airlock::agent::testing
