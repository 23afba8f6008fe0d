#include "supervisor/mcp/json_rpc.h"

#include <exception>

namespace airlock::mcp {

namespace {

bool validId(const Json& id) {
  return id.is_string() || id.is_number_integer() || id.is_number_unsigned();
}

}  // namespace

Json rpcErrorResponse(const Json& id, const RpcError& error) {
  Json e = {{"code", error.code}, {"message", error.message}};
  if (!error.data.is_null()) e["data"] = error.data;
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(e)}};
}

void JsonRpcDispatcher::onRequest(std::string method, Method handler) {
  requests_[std::move(method)] = std::move(handler);
}

void JsonRpcDispatcher::onNotification(std::string method, Notification handler) {
  notifications_[std::move(method)] = std::move(handler);
}

std::string JsonRpcDispatcher::oversizedMessage(size_t limit) {
  return rpcErrorResponse(
             nullptr,
             {rpc::kInvalidRequest,
              "message longer than " + std::to_string(limit) + " bytes; it was discarded", nullptr})
      .dump();
}

std::optional<std::string> JsonRpcDispatcher::handleLine(std::string_view line) {
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return std::nullopt;
  auto message = Json::parse(line, nullptr, false);
  if (message.is_discarded())
    return rpcErrorResponse(nullptr,
                            {rpc::kParseError, "parse error: the line is not JSON", nullptr})
        .dump();
  if (message.is_array()) {
    // A batch (protocol 2025-03-26): one answer array of the requests' answers.
    if (message.empty())
      return rpcErrorResponse(nullptr, {rpc::kInvalidRequest, "empty batch", nullptr}).dump();
    Json answers = Json::array();
    for (const auto& m : message)
      if (auto a = handleMessage(m)) answers.push_back(std::move(*a));
    if (answers.empty()) return std::nullopt;
    return answers.dump(-1, ' ', false, Json::error_handler_t::replace);
  }
  auto answer = handleMessage(message);
  if (!answer) return std::nullopt;
  // Tool output may hold invalid UTF-8 from the sandbox: replaced, never a throw.
  return answer->dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::optional<Json> JsonRpcDispatcher::handleMessage(const Json& message) {
  if (!message.is_object())
    return rpcErrorResponse(nullptr,
                            {rpc::kInvalidRequest, "a message must be a JSON object", nullptr});
  auto id_it = message.find("id");
  bool has_id = id_it != message.end();
  Json id = has_id ? *id_it : Json();
  if (has_id && !validId(id))
    return rpcErrorResponse(nullptr,
                            {rpc::kInvalidRequest, "'id' must be a string or an integer", nullptr});
  auto method_it = message.find("method");
  if (method_it == message.end()) {
    // A response to a request of ours: this server sends none, so there is nothing to match.
    if (message.contains("result") || message.contains("error")) return std::nullopt;
    return rpcErrorResponse(id, {rpc::kInvalidRequest, "missing 'method'", nullptr});
  }
  if (message.value("jsonrpc", Json()) != "2.0")
    return has_id ? std::optional<Json>(rpcErrorResponse(
                        id, {rpc::kInvalidRequest, "'jsonrpc' must be \"2.0\"", nullptr}))
                  : std::nullopt;
  if (!method_it->is_string())
    return rpcErrorResponse(id, {rpc::kInvalidRequest, "'method' must be a string", nullptr});
  const std::string method = method_it->get<std::string>();
  Json params = Json::object();
  if (auto p = message.find("params"); p != message.end()) {
    if (!p->is_object())
      return has_id ? std::optional<Json>(rpcErrorResponse(
                          id, {rpc::kInvalidParams, "'params' of " + method + " must be an object",
                               nullptr}))
                    : std::nullopt;
    params = *p;
  }

  if (!has_id) {
    if (auto n = notifications_.find(method); n != notifications_.end()) {
      try {
        n->second(params);
      } catch (const std::exception&) {
        // A notification has no answer to carry the failure.
      }
    }
    return std::nullopt;
  }
  auto handler = requests_.find(method);
  if (handler == requests_.end())
    return rpcErrorResponse(id, {rpc::kMethodNotFound, "method not found: " + method, nullptr});
  RpcResult result;
  try {
    result = handler->second(params);
  } catch (const std::exception& e) {
    // nlohmann::json throws on a wrong type the handler did not check: a bad params shape.
    result = std::unexpected(
        RpcError{rpc::kInvalidParams, std::string("invalid params: ") + e.what(), nullptr});
  }
  if (!result) return rpcErrorResponse(id, result.error());
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(*result)}};
}

}  // namespace airlock::mcp
