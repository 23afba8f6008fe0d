// A new channel for a waiting agent whose sandbox the supervisor cannot reach into with
// pidfd_getfd (its processes are a user-space kernel's, not the host's: gVisor). The next
// supervisor starts `airlock-agent --rechannel` inside the sandbox (runsc exec) with the new
// channel as its stdin; the helper passes that fd to the waiting agent over a Unix socket in the
// sandbox's own network stack, and the agent serves the channel from then on.
#pragma once

#include "airlock/result.h"
#include "airlock/unique_fd.h"

namespace airlock::agent {

// The agent's listening socket while it waits (abstract, so nothing on disk to clean up and no
// directory for the sandbox's code to race; only a root peer is accepted, see takeChannel).
Result<UniqueFd> listenForRechannel();

// Accepts one helper's connection on `listener` and returns the fd it passed, non-blocking and
// close-on-exec. Both sides prove who they are with credentials the kernel checks
// (SCM_CREDENTIALS): the agent its pid and uid 0 before the helper hands anything over, the
// helper uid 0 with the fd. A helper that is not root (the sandbox's code runs as its user)
// is refused: it could otherwise hand the agent a channel of its own.
Result<UniqueFd> takeChannel(int listener);

// `airlock-agent --rechannel [--agent-pid N]`: hands fd 0 to the waiting agent, which must be
// root and process N (default 1: the sandbox's PID 1); exit 0 once the agent has it, 1 when no
// such agent takes it, 2 on bad arguments.
int rechannelMain(int argc, char** argv);

}  // namespace airlock::agent
