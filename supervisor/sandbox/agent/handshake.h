// The supervisor's end of a sandbox's agent channel before any execution: the handshake, the
// takeover of an orphaned agent, and the last word at teardown. Everything after the handshake
// (executions, files, sessions) goes through the one connection type, AgentConnection
// (connection.h), which takes the channel over.
//
// Trust boundary: everything read here comes from inside the sandbox, where hostile code may
// have taken over the agent. Every frame is bounded by FrameReader, decoded by the strict
// protocol decoders, and checked against the request it claims to answer; any violation ends
// the conversation with an error instead of being interpreted.
#pragma once

#include <chrono>
#include <string>

#include "airlock/protocol/messages.h"
#include "airlock/result.h"
#include "airlock/unique_fd.h"

namespace airlock::sandbox {

using Clock = std::chrono::steady_clock;

class AgentHandshake {
 public:
  explicit AgentHandshake(UniqueFd channel) : fd_(std::move(channel)) {}

  // Sends Configure before the agent has said Hello, even before it runs: the agent reads it
  // right after sending Hello (docs/protocol.md), so its Ok is under way while this side is
  // still waiting, one round trip fewer. Only a frame that fits the socket buffer is sent
  // ahead (nothing reads it yet); a larger one waits for handshake().
  Result<> preconfigure(const protocol::Configure& config);
  // Waits for the agent's Hello, checks its protocol version, sends Configure unless
  // preconfigure() did, waits for Ok.
  Result<protocol::Hello> handshake(const protocol::Configure& config, Clock::time_point deadline);

  // Takes over a configured agent that waits for a new supervisor (docs/protocol.md, WAITING):
  // sends Reattach and returns the agent's account of what the dead supervisor left: its last
  // request id and the executions the agent ended.
  Result<protocol::Reattached> reattach(Clock::time_point deadline);

  // Asks the agent to kill everything and exit; best effort, never blocks long.
  void shutdown();

  // The channel, for the AgentConnection that takes over once the handshake is done. Request
  // ids below lastRequestId() are spent.
  int channelFd() const { return fd_.get(); }
  uint32_t lastRequestId() const { return next_id_ - 1; }

 private:
  struct Frame {
    protocol::FrameHeader header;
    std::string payload;
  };
  Result<Frame> nextFrame(Clock::time_point deadline);
  Result<> send(const std::string& frame);
  Result<> expectOk(uint32_t id, const char* what, Clock::time_point deadline);
  uint32_t nextId() { return next_id_++; }
  uint32_t configure_id_ = 0;  // the request id of a Configure sent ahead, 0: none

  UniqueFd fd_;
  protocol::FrameReader reader_;
  uint32_t next_id_ = 1;
};

}  // namespace airlock::sandbox
