// airlock-agent: PID 1 of every sandbox. Serves the supervisor's requests over one framed
// channel (protocol/messages.h): runs executions, relays their stdio, reaps every process,
// reads and writes files as the sandbox user.
#pragma once

namespace airlock::agent {

struct Options {
  int channel_in = 3;   // frames from the supervisor
  int channel_out = 3;  // frames to the supervisor (same fd for a socket; 1 for stdio)
};

// Prepares the process (dumpable off, stray fds closed, signals reset) and serves the channel
// until it closes or a Shutdown arrives. Returns the process exit code.
int run(const Options& options);

}  // namespace airlock::agent
