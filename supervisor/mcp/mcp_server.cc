#include "supervisor/mcp/mcp_server.h"
#include "supervisor/log/log.h"

#include <algorithm>

#include "supervisor/mcp/tool_catalog.h"

namespace airlock::mcp {

namespace {

constexpr const char* kInstructions =
    "airlock runs code in isolated Linux sandboxes (no network, unprivileged user, resource "
    "limits). Tools without sandbox_id share one default sandbox for this session: Python "
    "variables, imports and files under /home/user persist between calls. matplotlib figures "
    "come back as PNG images. The session's sandboxes end when it ends.";

}  // namespace

const std::vector<std::string>& supportedProtocolVersions() {
  static const std::vector<std::string> versions = {"2025-11-25", "2025-06-18", "2025-03-26",
                                                    "2024-11-05"};
  return versions;
}

McpServer::McpServer(ToolRunner run_tool) : run_tool_(std::move(run_tool)) {
  rpc_.onRequest("initialize", [this](const Json& p) { return initialize(p); });
  rpc_.onRequest("ping", [](const Json&) -> RpcResult { return Json::object(); });
  rpc_.onRequest("tools/list", [](const Json&) -> RpcResult { return *toolDefinitions("mcp"); });
  rpc_.onRequest("tools/call", [this](const Json& p) { return callTool(p); });
  rpc_.onNotification("notifications/initialized", [this](const Json&) { initialized_ = true; });
  // A tool call runs to its end before the next message is read, so a cancellation always
  // arrives after the call it names has been answered: nothing is left to cancel.
  rpc_.onNotification("notifications/cancelled", [](const Json&) {});
}

RpcResult McpServer::initialize(const Json& params) {
  auto version = params.find("protocolVersion");
  if (version == params.end() || !version->is_string())
    return std::unexpected(
        RpcError{rpc::kInvalidParams, "initialize: 'protocolVersion' must be a string", nullptr});
  const auto& supported = supportedProtocolVersions();
  std::string asked = version->get<std::string>();
  protocol_version_ = std::find(supported.begin(), supported.end(), asked) != supported.end()
                          ? asked
                          : supported.front();
  std::string client = "an MCP client";
  if (auto info = params.find("clientInfo"); info != params.end() && info->is_object())
    client = info->value("name", client) + " " + info->value("version", "");
  log::info("mcp.connect",
            {{"client", client}, {"protocol", asked}, {"answering", protocol_version_}});
  return Json{{"protocolVersion", protocol_version_},
              {"capabilities", {{"tools", {{"listChanged", false}}}}},
              {"serverInfo",
               {{"name", "airlock"}, {"title", "airlock sandboxes"}, {"version", AIRLOCK_VERSION}}},
              {"instructions", kInstructions}};
}

RpcResult McpServer::callTool(const Json& params) {
  auto name = params.find("name");
  if (name == params.end() || !name->is_string())
    return std::unexpected(
        RpcError{rpc::kInvalidParams, "tools/call: 'name' must be a string", nullptr});
  if (findTool(name->get<std::string>()) == nullptr)
    return std::unexpected(
        RpcError{rpc::kInvalidParams, "unknown tool: " + name->get<std::string>(), nullptr});
  Json arguments = Json::object();
  if (auto a = params.find("arguments"); a != params.end() && !a->is_null()) arguments = *a;
  return run_tool_(name->get<std::string>(), arguments);
}

}  // namespace airlock::mcp
