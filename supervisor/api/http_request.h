// Reading one HTTP request's header for the API server, apart from its socket: the parser's
// limits and the Request (handlers.h) taken from a parsed header. server.cc feeds the parser from
// a connection; fuzz/api_http_fuzz.cc feeds it bytes, so both run this same code.
#pragma once

#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <cstdint>

#include "supervisor/api/handlers.h"

namespace airlock::api {

using RequestParser = boost::beast::http::request_parser<boost::beast::http::buffer_body>;

// A header longer than this is refused with 431 before any of it is used.
inline constexpr uint32_t kHeaderLimit = 16 * 1024;

// Sets a new parser's limits for one request.
void limitRequestParser(RequestParser& parser);

// What the server needs from a complete header: the request the dispatcher answers and how the
// connection goes on.
struct RequestHead {
  Request request;
  bool keep_alive = false;       // the client asked to keep the connection
  bool expect_continue = false;  // Expect: 100-continue
};

// `parser` has read a whole header (is_header_done()).
RequestHead readRequestHead(const RequestParser& parser, bool from_tcp);

}  // namespace airlock::api
