// FrameReader and the blocking channel helpers (readFrame/writeFrame) over real sockets and pipes.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <thread>

#include "airlock/protocol/channel.h"
#include "airlock/protocol/messages.h"
#include "airlock/unique_fd.h"
#include "protocol_test_util.h"

namespace airlock::protocol {
namespace {

using ::testing::HasSubstr;

std::string threeFrames() {
  std::string s;
  encode(s, 1, Hello{kProtocolVersion, "v", 1});
  Exec e;
  e.argv = {"/bin/echo", "hi"};
  encode(s, 2, e);
  encode(s, 3, Output{Stream::kStdout, std::string(3000, 'o')});
  return s;
}

TEST(FrameReader, ByteAtATime) {
  std::string s = threeFrames();
  FrameReader r;
  std::vector<std::pair<FrameHeader, std::string>> got;
  for (char c : s) {
    r.feed(std::string_view(&c, 1));
    auto n = r.next();
    ASSERT_TRUE(n) << n.error().message();
    if (*n) got.push_back(std::move(**n));
  }
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].first.type, MsgType::kHello);
  EXPECT_EQ(got[1].first.type, MsgType::kExec);
  EXPECT_EQ(got[1].first.request_id, 2u);
  auto exec = decodeExec(got[1].second);
  ASSERT_TRUE(exec);
  EXPECT_EQ(exec->argv[1], "hi");
  EXPECT_EQ(got[2].first.type, MsgType::kOutput);
  EXPECT_EQ(decodeOutput(got[2].second)->data.size(), 3000u);
  EXPECT_EQ(r.buffered(), 0u);
  auto none = r.next();
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
}

TEST(FrameReader, WholeStreamAtOnceAndPartialPayload) {
  std::string s = threeFrames();
  FrameReader r;
  r.feed(s.substr(0, s.size() - 1));
  int frames = 0;
  for (;;) {
    auto n = r.next();
    ASSERT_TRUE(n);
    if (!*n) break;
    ++frames;
  }
  EXPECT_EQ(frames, 2);
  EXPECT_GT(r.buffered(), 3000u);
  r.feed(s.substr(s.size() - 1));
  auto last = r.next();
  ASSERT_TRUE(last);
  ASSERT_TRUE(*last);
  EXPECT_EQ((*last)->first.type, MsgType::kOutput);
}

TEST(FrameReader, OversizeHeaderPoisons) {
  FrameReader r;
  r.feed(testing::header(kMaxPayload + 1, 6, 1));
  auto n = r.next();
  ASSERT_FALSE(n);
  EXPECT_THAT(n.error().message(),
              HasSubstr("agent channel: frame header: Output payload of 1048577 bytes exceeds"));
  std::string good;
  encode(good, 1, Ok{});
  r.feed(good);  // ignored: the stream can no longer be trusted
  auto again = r.next();
  ASSERT_FALSE(again);
  EXPECT_THAT(again.error().message(), HasSubstr("corrupt"));
  EXPECT_EQ(r.buffered(), 0u);
}

TEST(FrameReader, UnknownTypePoisonsEvenAfterGoodFrames) {
  FrameReader r;
  std::string s;
  encode(s, 1, Ok{});
  s += testing::header(0, 200, 2);
  r.feed(s);
  auto first = r.next();
  ASSERT_TRUE(first);
  ASSERT_TRUE(*first);
  auto bad = r.next();
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error().message(), HasSubstr("unknown message type 200"));
}

struct SocketPair {
  UniqueFd a, b;
  SocketPair() {
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    a.reset(sv[0]);
    b.reset(sv[1]);
  }
};

TEST(Channel, LargeFramesThroughSmallNonBlockingSocket) {
  SocketPair sp;
  int small = 4096;
  setsockopt(sp.a.get(), SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
  fcntl(sp.a.get(), F_SETFL, O_NONBLOCK);  // writeFrame must wait in poll on EAGAIN
  std::string frames;
  for (int i = 0; i < 8; ++i)
    encode(frames, static_cast<uint32_t>(i),
           Output{Stream::kStdout, std::string(kMaxChunk, 'a' + i)});
  std::thread writer([&] {
    auto r = writeFrame(sp.a.get(), frames);
    EXPECT_TRUE(r) << r.error().message();
  });
  FrameReader reader;
  for (int i = 0; i < 8; ++i) {
    auto f = readFrame(sp.b.get(), reader, 10000);
    ASSERT_TRUE(f) << f.error().message();
    EXPECT_EQ(f->first.request_id, static_cast<uint32_t>(i));
    auto o = decodeOutput(f->second);
    ASSERT_TRUE(o);
    EXPECT_EQ(o->data, std::string(kMaxChunk, 'a' + i));
  }
  writer.join();
}

TEST(Channel, TimeoutEofAndBrokenPeer) {
  SocketPair sp;
  FrameReader reader;
  auto t = readFrame(sp.b.get(), reader, 50);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().errnum(), ETIMEDOUT);
  EXPECT_FALSE(isChannelClosed(t.error()));

  std::string half;
  encode(half, 1, Exec{{"/bin/true"}, {}, "/", 0, 0, 0, false});
  ASSERT_TRUE(writeFrame(sp.a.get(), half.substr(0, 20)));
  sp.a.reset();
  auto eof = readFrame(sp.b.get(), reader, 1000);
  ASSERT_FALSE(eof);
  EXPECT_TRUE(isChannelClosed(eof.error()));
  EXPECT_THAT(eof.error().message(), HasSubstr("mid-frame, 20 bytes pending"));

  // Writing to a closed peer fails with EPIPE instead of killing the process with SIGPIPE.
  auto w = writeFrame(sp.b.get(), half);
  ASSERT_FALSE(w);
  EXPECT_EQ(w.error().errnum(), EPIPE);
}

TEST(Channel, WorksOverPipes) {
  int p[2];
  ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
  UniqueFd r(p[0]), w(p[1]);
  std::string f;
  encode(f, 77, Signal{9});
  ASSERT_TRUE(writeFrame(w.get(), f));
  FrameReader reader;
  auto got = readFrame(r.get(), reader, 1000);
  ASSERT_TRUE(got) << got.error().message();
  EXPECT_EQ(got->first.type, MsgType::kSignal);
  EXPECT_EQ(got->first.request_id, 77u);
  EXPECT_EQ(decodeSignal(got->second)->signo, 9);
  w.reset();
  auto eof = readFrame(r.get(), reader, 1000);
  ASSERT_FALSE(eof);
  EXPECT_TRUE(isChannelClosed(eof.error()));
}

}  // namespace
}  // namespace airlock::protocol
