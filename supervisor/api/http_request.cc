#include "supervisor/api/http_request.h"

#include <boost/beast/core/string.hpp>
#include <limits>
#include <string_view>

namespace airlock::api {

namespace http = boost::beast::http;

void limitRequestParser(RequestParser& parser) {
  parser.header_limit(kHeaderLimit);
  // Limits are per route, in the handlers. (Not boost::none: Beast 1.74 compares the content
  // length against the empty optional and reports body_limit for every body.)
  parser.body_limit(std::numeric_limits<uint64_t>::max());
}

RequestHead readRequestHead(const RequestParser& parser, bool from_tcp) {
  RequestHead head;
  const auto& msg = parser.get();
  Request& req = head.request;
  req.method = std::string(msg.method_string());
  std::string_view target(msg.target().data(), msg.target().size());
  auto q = target.find('?');
  req.path = std::string(target.substr(0, q));
  if (q != std::string_view::npos) req.query = std::string(target.substr(q + 1));
  if (auto it = msg.find(http::field::authorization); it != msg.end()) {
    req.authorization = std::string(it->value());
  }
  if (auto it = msg.find(http::field::accept); it != msg.end()) {
    req.accept = std::string(it->value());
  }
  if (auto it = msg.find(http::field::content_type); it != msg.end()) {
    req.content_type = std::string(it->value());
  }
  if (auto it = msg.find(http::field::origin); it != msg.end())
    req.origin = std::string(it->value());
  if (auto it = msg.find(http::field::host); it != msg.end()) req.host = std::string(it->value());
  if (auto it = msg.find("Mcp-Session-Id"); it != msg.end()) {
    req.mcp_session_id = std::string(it->value());
  }
  if (auto it = msg.find("MCP-Protocol-Version"); it != msg.end()) {
    req.mcp_protocol_version = std::string(it->value());
  }
  if (auto len = parser.content_length()) req.content_length = *len;
  req.from_tcp = from_tcp;
  if (auto it = msg.find(http::field::expect); it != msg.end()) {
    head.expect_continue = boost::beast::iequals(it->value(), "100-continue");
  }
  head.keep_alive = msg.keep_alive();
  return head;
}

}  // namespace airlock::api
