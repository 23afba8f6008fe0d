// One execution run to its end over the agent connection, its output handed over as raw bytes:
// what one-shot programs (`airlock run`, reviewers' checker programs) need. Served commands
// (command.h) wrap executions in API events instead.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "airlock/protocol/messages.h"
#include "airlock/result.h"
#include "supervisor/sandbox/agent/connection.h"

namespace airlock::sandbox {

struct ProgramInput {
  int fd = -1;       // forwarded to the program as it becomes readable (needs an inline hub)
  std::string data;  // or these bytes, then end of input
};

struct ProgramOutcome {
  protocol::Exited exited;
  std::string error;  // the agent's Error for this execution ("execve '/x': ENOENT"), if any
  uint32_t pid = 0;   // from Started: the process as the sandbox sees it (0: never started)
};

using OutputFn = std::function<void(protocol::Stream, std::string_view)>;

// Sends `exec` and waits for its Exited frame. Output goes to on_output as it arrives. With
// exec.stdin_pipe, `input` is forwarded to the program. Fails when `deadline` passes first, the
// channel closes (a cancelled run closes it), or the agent breaks the protocol.
Result<ProgramOutcome> runProgram(AgentConnection& conn, const protocol::Exec& exec,
                                  const OutputFn& on_output, const ProgramInput& input,
                                  Clock::time_point deadline);

}  // namespace airlock::sandbox
