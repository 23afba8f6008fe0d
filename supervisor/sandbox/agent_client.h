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
#include <vector>

#include "airlock/protocol/messages.h"
#include "airlock/result.h"
#include "airlock/unique_fd.h"

namespace airlock::sandbox {

using Clock = std::chrono::steady_clock;

class AgentClient {
 public:
  explicit AgentClient(UniqueFd channel) : fd_(std::move(channel)) {}

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

  using OutputFn = std::function<void(protocol::Stream, std::string_view)>;
  struct ExecOutcome {
    protocol::Exited exited;
    std::string error;  // the agent's Error for this execution ("execve '/x': ENOENT"), if any
    uint32_t pid = 0;   // from Started: the process as the sandbox sees it (0: never started)
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

  // File operations inside the sandbox, as the sandbox user; symlinks in the last component
  // are acted on, never followed. Errors keep the agent's errno (ENOENT, EEXIST, ...).
  // Lists a directory; more than max_entries entries is an error (bounds a hostile agent).
  Result<std::vector<protocol::FileEntry>> listFiles(const std::string& path,
                                                     Clock::time_point deadline,
                                                     size_t max_entries = 100'000);
  Result<protocol::FileEntry> statFile(const std::string& path, Clock::time_point deadline);
  Result<> makeDirectory(const std::string& path, bool parents, uint32_t mode,
                         Clock::time_point deadline);
  Result<> removeFile(const std::string& path, bool recursive, Clock::time_point deadline);
  Result<> renameFile(const std::string& from, const std::string& to, Clock::time_point deadline);

  // Asks the agent to kill everything and exit; best effort, never blocks long.
  void shutdown();

  // When fd becomes readable (a signal's self-pipe), every wait returns an "interrupted" error
  // with errnum EINTR, so the caller tears the sandbox down instead of waiting on.
  void setCancelFd(int fd) { cancel_fd_ = fd; }
  // Work to drive while waiting for the agent: whenever fd polls readable, on_readable runs and
  // the wait goes on (`airlock run` reads its audit ring so, audit::EngineOptions::reader_thread).
  void setSideReader(int fd, std::function<void()> on_readable) {
    side_fd_ = fd;
    on_side_readable_ = std::move(on_readable);
  }

  // The channel itself, for the service's multiplexed connection (service/agent_connection.h),
  // which takes over once the handshake is done; this client is not used afterwards.
  int channelFd() const { return fd_.get(); }

 private:
  struct Frame {
    protocol::FrameHeader header;
    std::string payload;
  };
  Result<Frame> nextFrame(Clock::time_point deadline, int extra_fd = -1,
                          bool* extra_ready = nullptr);
  Result<> send(const std::string& frame);
  Result<> expectOk(uint32_t id, const char* what, Clock::time_point deadline);
  // Sends one request frame and waits for its Ok.
  template <typename M>
  Result<> request(const M& m, const std::string& what, Clock::time_point deadline);
  // Reads FileEntries frames for id until the last one, appending to out.
  Result<> readEntries(uint32_t id, const std::string& what, bool listing, size_t max_entries,
                       std::vector<protocol::FileEntry>& out, Clock::time_point deadline);
  uint32_t nextId() { return next_id_++; }
  uint32_t configure_id_ = 0;  // the request id of a Configure sent ahead, 0: none

  UniqueFd fd_;
  protocol::FrameReader reader_;
  uint32_t next_id_ = 1;
  int cancel_fd_ = -1;
  int side_fd_ = -1;
  std::function<void()> on_side_readable_;
};

}  // namespace airlock::sandbox
