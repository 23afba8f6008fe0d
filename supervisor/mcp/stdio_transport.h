// MCP's stdio transport: JSON-RPC messages one per line on stdin, answers one per line on
// stdout, logs on stderr. Ends at end of input, or on SIGTERM/SIGINT/SIGHUP (taken through a
// signalfd, so a signal during a tool call ends the session after that call is answered and
// the caller still ends its sandboxes).
#pragma once

#include <cstddef>
#include <string>

#include "airlock/result.h"
#include "supervisor/mcp/mcp_server.h"

namespace airlock::mcp {

inline constexpr size_t kMaxMessageBytes = 64ull << 20;

// Serves until the end; "end of input", "SIGTERM", ... says why it stopped.
Result<std::string> serveStdio(McpServer& server, int in_fd, int out_fd);

}  // namespace airlock::mcp
