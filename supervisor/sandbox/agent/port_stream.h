// The supervisor's end of a port stream (docs/protocol.md, "Ports"): a TCP connection the
// sandbox's agent made to a port on the sandbox's loopback, relayed over the agent channel.
//
// One thread uses a stream (the API request that proxies to it); the hub thread only queues
// what the agent sends and wakes that thread through readyFd(), so a proxy waits on its client's
// socket and the stream in one poll(). Flow control mirrors the agent's: the supervisor sends at
// most the agent's credit, and returns credit only for bytes it handed on (consumed()), so a
// slow client never makes the supervisor buffer more than one window per stream.
//
// Trust: frames come from inside the sandbox. Data beyond the window the supervisor granted, or
// credit beyond the window, ends the stream with an error naming the violation.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "supervisor/sandbox/agent/connection.h"
#include "supervisor/sandbox/service.h"

namespace airlock::sandbox {

class PortStream {
 public:
  // Asks the agent to connect to `port`; waits for its answer up to `timeout`. Nothing listening
  // is kBadGateway, naming the port; a sandbox at its stream limit is kTooManyRequests.
  static SResult<std::unique_ptr<PortStream>> open(std::shared_ptr<AgentConnection> conn,
                                                   uint16_t port,
                                                   std::chrono::milliseconds timeout);
  ~PortStream();  // tells the agent to close the connection unless it ended already
  PortStream(const PortStream&) = delete;
  PortStream& operator=(const PortStream&) = delete;

  uint16_t port() const { return port_; }
  // Readable when take() has something new (data, eof, the end).
  int readyFd() const;

  struct Arrived {
    std::string data;    // bytes from the sandbox's server, in order
    bool eof = false;    // the server closed its sending side (sticky)
    bool ended = false;  // the stream is over: nothing more comes, nothing more may be sent
    std::string error;   // why it ended, when not cleanly
  };
  // What arrived since the last call (clears readyFd()).
  Arrived take();
  // `n` bytes taken were handed on: the agent may send that many more.
  SResult<> consumed(size_t n);

  // Bytes write() may send now (the agent's credit).
  size_t sendWindow() const;
  // Sends bytes to the server; at most sendWindow().
  SResult<> write(std::string_view data);
  // Half-closes: the server reads EOF once it has read everything written.
  SResult<> writeEof();

  // Something to keep for as long as the stream lives (the sandbox's busy mark: a WebSocket
  // open for an hour must not see its sandbox idled out under it).
  void hold(std::shared_ptr<void> keep) { keep_ = std::move(keep); }

  struct State;

 private:
  PortStream(std::shared_ptr<AgentConnection> conn, std::shared_ptr<State> state, uint32_t id,
             uint16_t port)
      : conn_(std::move(conn)), state_(std::move(state)), id_(id), port_(port) {}
  SResult<> sendFrame(const std::string& frame);

  std::shared_ptr<AgentConnection> conn_;
  std::shared_ptr<State> state_;
  uint32_t id_;
  uint16_t port_;
  bool eof_sent_ = false;
  std::shared_ptr<void> keep_;
};

}  // namespace airlock::sandbox
