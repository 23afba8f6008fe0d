// Blocking frame I/O on the agent channel, used by both the supervisor and airlock-agent.
//
// Both work on blocking and non-blocking descriptors alike (EAGAIN waits in poll) and retry
// EINTR. They never raise SIGPIPE on sockets (MSG_NOSIGNAL); on pipes the caller ignores SIGPIPE.
#pragma once

#include <string>
#include <utility>

#include "airlock/protocol/messages.h"
#include "airlock/result.h"

namespace airlock::protocol {

// What `airlock-agent --announce-ready` writes to its stderr once it serves the channel, for
// launchers that cannot see the agent's exec (gVisor's runsc): everything before this line on
// their stderr pipe is the launcher's own error text.
inline constexpr char kAgentReadyLine[] = "airlock-agent: ready\n";

// Writes a whole encoded frame (or several back to back), handling partial writes.
Result<> writeFrame(int fd, const std::string& frame);

// Returns the next whole frame, reading from fd into reader as needed. timeout_ms < 0 waits
// forever. Errors: the peer closed the channel (isChannelClosed), the deadline passed
// (errnum() == ETIMEDOUT), a read failed, or the stream is corrupt (the reader is poisoned:
// close the channel). The payload is not decoded; call the decodeX matching header.type.
Result<std::pair<FrameHeader, std::string>> readFrame(int fd, FrameReader& reader, int timeout_ms);

// True when err is readFrame's "peer closed the channel" (EOF, possibly mid-frame).
bool isChannelClosed(const Error& err);

}  // namespace airlock::protocol
