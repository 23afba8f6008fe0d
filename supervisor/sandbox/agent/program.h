// One execution run to its end over the agent connection, its output handed over as raw bytes:
// what one-shot programs (`airlock run`, reviewers' checker programs, pre-started interpreters)
// need. Served commands (command.h) wrap executions in API events instead.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "airlock/protocol/messages.h"
#include "airlock/result.h"
#include "supervisor/sandbox/agent/connection.h"

namespace airlock::sandbox {

struct ProgramInput {
  int fd = -1;       // forwarded to the program as it becomes readable
  std::string data;  // or these bytes, then end of input
};

struct ProgramOutcome {
  protocol::Exited exited;
  std::string error;  // the agent's Error for this execution ("execve '/x': ENOENT"), if any
  uint32_t pid = 0;   // from Started: the process as the sandbox sees it (0: never started)
  bool killed_at_limit = false;  // wait()'s kill_at passed: the supervisor killed it
};

using OutputFn = std::function<void(protocol::Stream, std::string_view)>;

// An execution in progress. Not thread-safe: one thread starts, feeds and waits.
class ProgramRun {
 public:
  // Sends `exec`; its frames queue up until wait() or drain().
  static Result<std::unique_ptr<ProgramRun>> start(AgentConnection& conn,
                                                   const protocol::Exec& exec);
  ~ProgramRun();
  ProgramRun(const ProgramRun&) = delete;
  ProgramRun& operator=(const ProgramRun&) = delete;

  // Writes to the program's stdin (exec.stdin_pipe); a refused write is ignored (the program
  // may have exited already).
  void write(std::string data, bool eof);
  // Forwards `input` to the program: its bytes then end of input, or the fd as it becomes
  // readable (from the hub's loop) until its end.
  Result<> feed(const ProgramInput& input);
  Result<> signal(int signo);

  // Consumes what has arrived so far without waiting, dropping output: false when the
  // execution has already ended (a pre-started interpreter that died in the pool).
  bool drain();
  // Handles the next frame, waiting for it until `deadline` (a writer waiting for the program
  // to take its input). false once the execution has ended.
  Result<bool> pump(const OutputFn& on_output, Clock::time_point deadline);
  // Waits for the Exited frame, handing output to on_output as it arrives. At `kill_at` the
  // execution is killed (SIGKILL) and waiting goes on. Fails when `deadline` passes first, the
  // channel closes (a cancelled run closes it), or the agent breaks the protocol.
  Result<ProgramOutcome> wait(const OutputFn& on_output, Clock::time_point deadline,
                              std::optional<Clock::time_point> kill_at = std::nullopt);

 private:
  class StdinRelay;
  ProgramRun(AgentConnection& conn, bool control_pipe);
  // Applies one frame; an error for a protocol violation.
  Result<> apply(const Mailbox::Frame& f, const OutputFn* on_output);

  AgentConnection& conn_;
  bool control_;
  uint32_t id_ = 0;
  std::shared_ptr<Mailbox> box_;
  std::unique_ptr<StdinRelay> relay_;
  ProgramOutcome outcome_;
  bool exited_ = false;
};

// start + feed + wait: one program run to its end.
Result<ProgramOutcome> runProgram(AgentConnection& conn, const protocol::Exec& exec,
                                  const OutputFn& on_output, const ProgramInput& input,
                                  Clock::time_point deadline);

}  // namespace airlock::sandbox
