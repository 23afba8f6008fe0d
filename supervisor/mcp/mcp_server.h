// The Model Context Protocol server (https://modelcontextprotocol.io/specification): the
// lifecycle (initialize, notifications/initialized, ping) and the tools capability (tools/list,
// tools/call) on top of the JSON-RPC dispatcher, with the tools run by SandboxTools.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "supervisor/mcp/json_rpc.h"

namespace airlock::mcp {

// Newest first; initialize answers the client's version when it is listed, else the first.
const std::vector<std::string>& supportedProtocolVersions();

class McpServer {
 public:
  // Runs a catalog tool: a tools/call result ({"content", "isError"}).
  using ToolRunner = std::function<Json(const std::string& name, const Json& arguments)>;

  explicit McpServer(ToolRunner run_tool);

  // One line from the client; the line to answer, if any.
  std::optional<std::string> handleLine(std::string_view line) { return rpc_.handleLine(line); }

  const std::string& protocolVersion() const { return protocol_version_; }
  bool initialized() const { return initialized_; }

 private:
  RpcResult initialize(const Json& params);
  RpcResult callTool(const Json& params);

  JsonRpcDispatcher rpc_;
  ToolRunner run_tool_;
  std::string protocol_version_;
  bool initialized_ = false;
};

}  // namespace airlock::mcp
