// The supervisor's end of one sandbox's agent channel.
//
// Trust boundary: everything read here comes from inside the sandbox, where hostile code may
// have taken over the agent. Every frame is bounded by FrameReader, decoded by the strict
// protocol decoders, and checked against the request it claims to answer; any violation ends
// the conversation with an error instead of being interpreted.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "airlock/protocol/messages.h"
#include "airlock/result.h"
#include "airlock/unique_fd.h"

namespace airlock::sandbox {

using Clock = std::chrono::steady_clock;

class AgentClient {
 public:
  explicit AgentClient(UniqueFd channel) : fd_(std::move(channel)) {}

  // Waits for the agent's Hello, checks its protocol version, sends Configure, waits for Ok.
  Result<protocol::Hello> handshake(const protocol::Configure& config, Clock::time_point deadline);

  using OutputFn = std::function<void(protocol::Stream, std::string_view)>;
  struct ExecOutcome {
    protocol::Exited exited;
    std::string error;  // the agent's Error for this execution ("execve '/x': ENOENT"), if any
  };
  // Runs one execution to its end. Output is handed to on_output as it arrives. When stdin_fd
  // is >= 0 its bytes are forwarded to the program (exec.stdin_pipe must be true). Fails when
  // the deadline passes first or the agent breaks the protocol.
  Result<ExecOutcome> exec(const protocol::Exec& exec, const OutputFn& on_output, int stdin_fd,
                           Clock::time_point deadline);

  // Writes a file inside the sandbox from a host file descriptor, in chunks.
  Result<uint64_t> writeFile(const std::string& path, uint32_t mode, int src_fd,
                             Clock::time_point deadline);
  // Reads a file from inside the sandbox into a host file descriptor.
  Result<uint64_t> readFile(const std::string& path, uint64_t max_bytes, int dst_fd,
                            Clock::time_point deadline);

  // Asks the agent to kill everything and exit; best effort, never blocks long.
  void shutdown();

  // When fd becomes readable (a signal's self-pipe), every wait returns an "interrupted" error
  // with errnum EINTR, so the caller tears the sandbox down instead of waiting on.
  void setCancelFd(int fd) { cancel_fd_ = fd; }

 private:
  struct Frame {
    protocol::FrameHeader header;
    std::string payload;
  };
  Result<Frame> nextFrame(Clock::time_point deadline, int extra_fd = -1,
                          bool* extra_ready = nullptr);
  Result<> send(const std::string& frame);
  Result<> expectOk(uint32_t id, const char* what, Clock::time_point deadline);
  uint32_t nextId() { return next_id_++; }

  UniqueFd fd_;
  protocol::FrameReader reader_;
  uint32_t next_id_ = 1;
  int cancel_fd_ = -1;
};

}  // namespace airlock::sandbox
