// Runs airlock-agent as a child of the test with a socketpair on fd 3 and speaks the protocol.
#pragma once

#include <sys/types.h>

#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "airlock/protocol/messages.h"
#include "airlock/unique_fd.h"

namespace airlock::agent::testing {

using Frame = std::pair<protocol::FrameHeader, std::string>;

// Everything the agent sent for one execution, in order.
struct ExecResult {
  std::string out, err, control;
  std::optional<uint32_t> started_pid;  // from the Started frame
  bool started_after_output = false;    // breaks the Started-before-Output guarantee
  std::vector<protocol::ErrorMsg> errors;
  std::optional<protocol::Exited> exited;
  std::vector<protocol::MsgType> order;  // frame types as received
  bool output_after_exit = false;
};

class AgentProcess {
 public:
  // Spawns the agent (behind wrapper argv, e.g. unshare, when given) and reads its Hello.
  explicit AgentProcess(const std::vector<std::string>& wrapper = {},
                        const std::vector<std::string>& agent_args = {});
  ~AgentProcess();  // closes the channel, waits for the agent (kills it by pid if it hangs)
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;

  // Configure with the test's own uid/gid, no seccomp program, Landlock on.
  static protocol::Configure defaultConfigure();
  // Sends Configure; returns the reply (Ok or Error).
  Frame configure(const protocol::Configure& c, uint32_t id = 1);

  pid_t pid() const { return pid_; }
  // Hands the channel to another client (e.g. sandbox::AgentClient); call when nothing is
  // pending. The agent then exits when that client closes it.
  UniqueFd takeChannel() { return std::move(sock_); }
  // Speaks over `channel` from now on, as a new supervisor does after taking the agent's spare
  // socket (kReattachFd); frames not yet read from the old channel are forgotten.
  void useChannel(UniqueFd channel);
  // True when the agent sends nothing for `ms` (and nothing is in the backlog).
  bool quietFor(int ms);
  const protocol::Hello& hello() const { return hello_; }

  template <typename M>
  void send(uint32_t id, const M& m) {
    std::string f;
    protocol::encode(f, id, m);
    sendRaw(f);
  }
  void sendRaw(const std::string& bytes);

  // Next frame (from the backlog first); fails the test on timeout.
  std::optional<Frame> next(int timeout_ms = 30000);
  // Next frame with this request id; frames of other ids are kept for later.
  std::optional<Frame> nextFor(uint32_t id, int timeout_ms = 30000);

  // Runs one execution to its Exited frame.
  ExecResult run(uint32_t id, const protocol::Exec& e, int timeout_ms = 60000);
  ExecResult collect(uint32_t id, int timeout_ms = 60000);
  // The next Output of execution id (skipping its Started frame); nullopt on another frame.
  std::optional<protocol::Output> nextOutput(uint32_t id, int timeout_ms = 30000);

  // Closes our end of the channel and waits for the agent's exit status (-1: killed after
  // timeout_ms).
  int closeAndWait(int timeout_ms = 10000);
  // Waits for the agent to exit without closing the channel.
  int waitExit(int timeout_ms = 10000);

 private:
  pid_t pid_ = -1;
  UniqueFd sock_;
  protocol::FrameReader reader_;
  std::deque<Frame> backlog_;
  protocol::Hello hello_;
};

protocol::Exec shell(const std::string& script);
bool processGone(pid_t pid);  // no such process (not even a zombie)
std::string procStatusField(const std::string& status, const std::string& key);

}  // namespace airlock::agent::testing
