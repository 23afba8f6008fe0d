// Process hygiene at agent start, before the first frame.
#pragma once

#include "airlock/result.h"
#include "airlock/unique_fd.h"

namespace airlock::agent {

// Not dumpable (same-uid code cannot open /proc/<agent>/mem or ptrace it); every fd but 0-2 and
// the channel closed; 0-2 open (on /dev/null if they were closed); the channel close-on-exec and
// non-blocking; every signal disposition default and nothing blocked, except SIGPIPE ignored and
// SIGCHLD blocked and delivered through the returned signalfd. When not PID 1, the agent becomes a
// child subreaper so orphans of its executions are still re-parented to it and reaped.
Result<UniqueFd> prepareProcess(int channel_in, int channel_out);

}  // namespace airlock::agent
