// airlock-agent: PID 1 of every sandbox. Serves the supervisor's requests over one framed
// channel (protocol/messages.h): runs executions, relays their stdio, reaps every process,
// reads and writes files as the sandbox user.
#pragma once

namespace airlock::agent {

struct Options {
  int channel_in = 3;   // frames from the supervisor
  int channel_out = 3;  // frames to the supervisor (same fd for a socket; 1 for stdio)
  // When the channel closes (its supervisor died), instead of ending the sandbox: keep every
  // execution running, offer a new channel and wait this long for a new supervisor to take it
  // and send Reattach. 0: end at once. The offer: one end of a fresh socket pair at fd
  // kReattachFd for pidfd_getfd, unless one of the two flags below says otherwise.
  int reattach_grace_ms = 0;
  // The next supervisor cannot take fd kReattachFd (the agent is not a host process): instead
  // listen for `airlock-agent --rechannel`, which it starts inside the sandbox with the new
  // channel (rechannel.h). The channel may then be stdio, closed on detach.
  bool reattach_by_helper = false;
  // The channel is a VM's port, which reads as closed while its host side is: on detach keep it
  // and wait until the next supervisor reopens that side (QMP chardev-change).
  bool reattach_in_place = false;
  // Once the process is prepared, write protocol::kAgentReadyLine to fd 2, then point fd 2 at
  // /dev/null (for launchers that cannot see the agent's exec, like gVisor's runsc).
  bool announce_ready = false;
  // The agent is PID 1 of a kernel of its own (a microVM's guest): every OOM kill of that kernel
  // is the sandbox's, and each execution reports those made while it ran (Exited.oom_kills).
  bool own_kernel = false;
};

// Where a waiting agent leaves the new channel's far end for its next supervisor.
inline constexpr int kReattachFd = 3;

// Prepares the process (dumpable off, stray fds closed, signals reset) and serves the channel
// until it closes or a Shutdown arrives. Returns the process exit code.
int run(const Options& options);

}  // namespace airlock::agent
