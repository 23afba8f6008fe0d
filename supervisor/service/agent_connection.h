// The supervisor's multiplexed end of one live sandbox's agent channel.
//
// One-shot runs talk to the agent synchronously (sandbox/agent_client.h). A served sandbox
// carries many conversations at once — background commands, code contexts, file transfers — so
// each request gets an id and a handler, and one reader thread for all sandboxes (ChannelHub,
// epoll) routes every incoming frame to the handler of its request id.
//
// Trust boundary: frames come from inside the sandbox. The hub bounds and decodes them with the
// strict protocol reader; a frame for an unknown request id is dropped, a corrupt stream closes
// the connection, and every open handler then sees a synthetic kError frame ("channel closed").
#pragma once

#include <sys/epoll.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "airlock/protocol/messages.h"
#include "airlock/result.h"
#include "airlock/unique_fd.h"

namespace airlock::service {

// Called on the hub thread for each frame of the request; must not block. Returns true when the
// request is finished (the handler is then dropped). It may release the last reference to its
// owner: close() from inside a handler is deferred until the handler returns.
using FrameHandler = std::function<bool(const protocol::FrameHeader&, std::string_view payload)>;

class ChannelHub;

class AgentConnection : public std::enable_shared_from_this<AgentConnection> {
 public:
  // `fd` is borrowed: the Sandbox owns the channel and outlives this connection's registration.
  AgentConnection(ChannelHub& hub, int fd, std::string sandbox_id);
  ~AgentConnection();

  // Registers a handler and returns the request id to send frames under.
  uint32_t open(FrameHandler handler);
  // Drops a handler (the request's remaining frames are ignored).
  void close(uint32_t id);
  // An adopted sandbox: request ids (and so command ids, "c<id>") continue above the dead
  // supervisor's last one, so an id a client still holds never names a different execution.
  void continueAfter(uint32_t last_request_id);
  // Writes one whole frame; safe from any thread. Fails when the agent stops reading for
  // kWriteTimeout or the channel is closed.
  Result<> send(const std::string& frame);
  bool closed() const { return closed_.load(); }
  const std::string& sandboxId() const { return sandbox_id_; }

  // Hub side.
  void onReadable();
  void failAll(const std::string& why);
  int fd() const { return fd_; }

 private:
  ChannelHub& hub_;
  int fd_;
  std::string sandbox_id_;
  protocol::FrameReader reader_;
  void eraseClosedWhileDispatching();

  std::mutex mu_;  // handlers_, next_id_, closed_while_dispatching_
  std::map<uint32_t, FrameHandler> handlers_;
  std::vector<uint32_t> closed_while_dispatching_;  // close() calls made by running handlers
  uint32_t next_id_ = 1;
  std::mutex write_mu_;
  std::atomic<bool> closed_{false};
};

// One epoll thread reading every live sandbox's channel.
class ChannelHub {
 public:
  static Result<std::unique_ptr<ChannelHub>> start();
  ~ChannelHub();

  Result<std::shared_ptr<AgentConnection>> attach(int fd, const std::string& sandbox_id);
  // Stops watching the connection's fd; afterwards no handler of it runs again. Call before the
  // fd is closed.
  void detach(const std::shared_ptr<AgentConnection>& conn);

 private:
  ChannelHub() = default;
  void loop();

  UniqueFd epoll_;
  UniqueFd wake_;  // eventfd: stop
  std::mutex mu_;
  std::map<int, std::shared_ptr<AgentConnection>> conns_;
  std::mutex dispatch_mu_;  // held while a connection's frames are dispatched (detach waits)
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A handler that queues frames for a thread that waits on them.
class Mailbox {
 public:
  struct Frame {
    protocol::FrameHeader header;
    std::string payload;
  };
  // The handler to register; it reports the request finished when `is_last` says so.
  FrameHandler handler(std::function<bool(const protocol::FrameHeader&)> is_last);
  // The next frame, or nullopt when `deadline` passed first.
  std::optional<Frame> pop(std::chrono::steady_clock::time_point deadline);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Frame> frames_;
};

// A synthetic frame the hub hands to handlers when the channel fails.
bool isChannelFailure(const protocol::FrameHeader& h);

}  // namespace airlock::service
