// JSON-RPC 2.0 (https://www.jsonrpc.org/specification) over newline-delimited messages, as MCP's
// stdio transport carries it: one message per line, no embedded newlines. Transport-free, so the
// tests feed it lines and read the lines it answers.
#pragma once

#include <expected>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace airlock::mcp {

using Json = nlohmann::json;

namespace rpc {
inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;
}  // namespace rpc

struct RpcError {
  int code;
  std::string message;
  Json data;  // null: no data member
};

using RpcResult = std::expected<Json, RpcError>;

class JsonRpcDispatcher {
 public:
  // `params` is the request's params, an empty object when it had none.
  using Method = std::function<RpcResult(const Json& params)>;
  using Notification = std::function<void(const Json& params)>;

  void onRequest(std::string method, Method handler);
  void onNotification(std::string method, Notification handler);

  // One line in; the line to answer (without its newline), or nullopt when there is nothing to
  // answer (a notification, a response from the client, a blank line). Never throws.
  std::optional<std::string> handleLine(std::string_view line);

  // The answer to a line that was too long to read (its content is not known).
  static std::string oversizedMessage(size_t limit);

 private:
  std::optional<Json> handleMessage(const Json& message);
  std::map<std::string, Method, std::less<>> requests_;
  std::map<std::string, Notification, std::less<>> notifications_;
};

Json rpcErrorResponse(const Json& id, const RpcError& error);

}  // namespace airlock::mcp
