// The hub that routes a served sandbox's agent frames to per-request handlers, over a socket
// pair standing in for the agent.
#include "supervisor/sandbox/agent/connection.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <future>

#include "airlock/protocol/messages.h"

namespace airlock::sandbox {
namespace {

namespace proto = airlock::protocol;

// Owns a request the way a Command does: its destructor closes the request.
struct RequestOwner {
  std::shared_ptr<AgentConnection> conn;
  uint32_t id = 0;
  std::promise<void>* destroyed = nullptr;
  ~RequestOwner() {
    conn->close(id);
    destroyed->set_value();
  }
};

class AgentConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds_), 0);
    auto hub = ChannelHub::start();
    ASSERT_TRUE(hub) << hub.error().message();
    hub_ = std::move(*hub);
    auto conn = hub_->attach(fds_[0], "sb-test");
    ASSERT_TRUE(conn) << conn.error().message();
    conn_ = *conn;
  }
  void TearDown() override {
    if (conn_) hub_->detach(conn_);
    conn_.reset();
    hub_.reset();
    ::close(fds_[0]);
    if (fds_[1] >= 0) ::close(fds_[1]);
  }
  // A handler that holds the only reference to its owner and lets go of it on the first frame,
  // so the owner's destructor (and its close()) runs inside the handler on the hub thread.
  uint32_t openWithOwnerReleasedInHandler(std::promise<void>& destroyed) {
    auto owner = std::make_shared<RequestOwner>();
    owner->conn = conn_;
    owner->destroyed = &destroyed;
    uint32_t id = conn_->open([owner](const proto::FrameHeader&, std::string_view) mutable {
      owner.reset();
      return false;  // not finished: only the owner's close() may drop the handler
    });
    owner->id = id;
    return id;
  }
  // A hub deadlock cannot be unwound (its thread holds the lock forever): end the process.
  static void expectWithin(std::future<void>& f, const char* what) {
    if (f.wait_for(std::chrono::seconds(10)) == std::future_status::ready) return;
    ADD_FAILURE() << what;
    std::_Exit(1);
  }

  int fds_[2] = {-1, -1};
  std::unique_ptr<ChannelHub> hub_;
  std::shared_ptr<AgentConnection> conn_;
};

TEST_F(AgentConnectionTest, AHandlerMayReleaseTheLastReferenceToItsOwner) {
  std::promise<void> destroyed;
  auto done = destroyed.get_future();
  uint32_t id = openWithOwnerReleasedInHandler(destroyed);

  std::string frame;
  proto::Output out;
  out.stream = proto::Stream::kStdout;
  out.data = "x";
  proto::encode(frame, id, out);
  ASSERT_EQ(::write(fds_[1], frame.data(), frame.size()), static_cast<ssize_t>(frame.size()));
  expectWithin(done, "the hub thread deadlocked closing a request from inside its handler");

  // The owner's close took effect once the handler returned: a later frame finds no handler,
  // and a new request on the same connection still works.
  std::promise<void> second;
  auto second_done = second.get_future();
  uint32_t id2 = conn_->open([&second](const proto::FrameHeader&, std::string_view) {
    second.set_value();
    return true;
  });
  std::string more;
  proto::encode(more, id, out);
  proto::encode(more, id2, out);
  ASSERT_EQ(::write(fds_[1], more.data(), more.size()), static_cast<ssize_t>(more.size()));
  expectWithin(second_done, "a frame after the deferred close was not dispatched");
}

TEST_F(AgentConnectionTest, AFailingChannelMayReleaseTheLastReferenceToAnOwner) {
  std::promise<void> destroyed;
  auto done = destroyed.get_future();
  openWithOwnerReleasedInHandler(destroyed);
  ::close(fds_[1]);  // the agent goes away: every handler gets the synthetic failure frame
  fds_[1] = -1;
  expectWithin(done, "the hub thread deadlocked failing a request whose handler closed it");
  EXPECT_TRUE(conn_->closed());
}

}  // namespace
}  // namespace airlock::sandbox
