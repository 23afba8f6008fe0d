// The supervisor's one connection type to a sandbox's agent, after the handshake
// (handshake.h): every execution, file operation and session goes through it.
//
// A sandbox carries many conversations at once — background commands, code contexts, file
// transfers — so each request gets an id and a handler, and a ChannelHub (epoll) routes every
// incoming frame to the handler of its request id. `airlock serve` runs the hub on its own thread
// for all sandboxes; `airlock run` drives it inline from the thread that waits (Mode::kInline),
// because on hosts where process start-up is dear a second thread in a short-lived process costs
// more than it overlaps.
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

namespace airlock::sandbox {
using Clock = std::chrono::steady_clock;
}

namespace airlock::sandbox {

// Called on the hub thread for each frame of the request; must not block. Returns true when the
// request is finished (the handler is then dropped). It may release the last reference to its
// owner: close() from inside a handler is deferred until the handler returns.
using FrameHandler = std::function<bool(const protocol::FrameHeader&, std::string_view payload)>;

class ChannelHub;
class Mailbox;

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
  // An adopted sandbox's execution the dead supervisor started: its frames (held by the agent
  // until Resume) go to `handler`. The id must be at most the one given to continueAfter.
  void openAt(uint32_t id, FrameHandler handler);
  // The agent's protocol::kFeature* bits (Sandbox::agentFeatures): whether it may be sent Note.
  void setAgentFeatures(uint32_t features) { features_ = features; }
  // Whether the agent keeps executions for the next supervisor, with their notes (Exec.note,
  // Stdin.note): an agent without it must never be sent Note or Resume.
  bool keepsSessions() const { return (features_ & protocol::kFeatureKeepSessions) != 0; }
  // Writes one whole frame; safe from any thread. Fails when the agent stops reading for
  // kWriteTimeout or the channel is closed.
  Result<> send(const std::string& frame);
  bool closed() const { return closed_.load(); }
  const std::string& sandboxId() const { return sandbox_id_; }
  ChannelHub& hub() { return hub_; }
  // A mailbox that waits correctly whichever way the hub runs.
  std::shared_ptr<Mailbox> mailbox();

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
  std::atomic<uint32_t> features_{0};
};

// One epoll set reading every live sandbox's channel: on its own thread (kThread), or pumped by
// whichever thread waits for an answer (kInline; one waiting thread at a time).
class ChannelHub {
 public:
  enum class Mode { kThread, kInline };
  static Result<std::unique_ptr<ChannelHub>> start(Mode mode = Mode::kThread);
  ~ChannelHub();

  Result<std::shared_ptr<AgentConnection>> attach(int fd, const std::string& sandbox_id);
  // Stops watching the connection's fd; afterwards no handler of it runs again. Call before the
  // fd is closed.
  void detach(const std::shared_ptr<AgentConnection>& conn);

  // Another fd to serve from the same loop (a program's stdin, the audit ring, a signal pipe):
  // `on_readable` runs on the hub's thread (or the pumping one) whenever it polls readable, and
  // returns false when the fd is no longer to be watched. unwatch() must not be called from a
  // callback (return false instead).
  Result<> watch(int fd, std::function<bool()> on_readable);
  void unwatch(int fd);

  // Fails every attached connection (their waits end with a channel failure): a cancelled run.
  void failAll(const std::string& why);

  bool isInline() const { return mode_ == Mode::kInline; }
  // kInline: waits for events until `deadline` (at most one epoll_wait) and dispatches them.
  void pump(Clock::time_point deadline);

 private:
  explicit ChannelHub(Mode mode) : mode_(mode) {}
  void loop();
  // Handles one epoll_wait's worth of events; false when the hub is stopping.
  void dispatch(const epoll_event* events, int n);

  Mode mode_;
  std::map<int, std::function<bool()>> watched_;  // under mu_

  UniqueFd epoll_;
  UniqueFd wake_;  // eventfd: stop
  std::mutex mu_;
  std::map<int, std::shared_ptr<AgentConnection>> conns_;
  std::mutex dispatch_mu_;  // held while a connection's frames are dispatched (detach waits)
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A handler that queues frames for a thread that waits on them. With an inline hub, the waiting
// thread pumps the hub itself.
class Mailbox {
 public:
  explicit Mailbox(ChannelHub* inline_hub = nullptr) : hub_(inline_hub) {}
  struct Frame {
    protocol::FrameHeader header;
    std::string payload;
  };
  // The handler to register; it reports the request finished when `is_last` says so.
  FrameHandler handler(std::function<bool(const protocol::FrameHeader&)> is_last);
  // The next frame, or nullopt when `deadline` passed first.
  std::optional<Frame> pop(std::chrono::steady_clock::time_point deadline);

 private:
  ChannelHub* hub_;  // non-null: pumped by pop()
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Frame> frames_;
};

// A synthetic frame the hub hands to handlers when the channel fails.
bool isChannelFailure(const protocol::FrameHeader& h);

}  // namespace airlock::sandbox
