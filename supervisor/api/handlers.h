// Turns one parsed HTTP request into Service calls and writes the answer (docs/api.md).
//
// The HTTP wire (Beast, sockets, timeouts) lives in server.cc behind the Exchange interface, so
// this file holds the API's semantics without any networking types and compiles quickly.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "supervisor/api/auth.h"
#include "supervisor/api/http_metrics.h"
#include "supervisor/sandbox/service.h"

namespace airlock::api {

struct Request {
  std::string method;  // "GET"
  std::string path;    // target without the query string
  std::string query;   // raw, without '?'
  std::string authorization;
  std::string accept;  // the Accept header: event streams as frames when it names them
  std::optional<uint64_t> content_length;  // nullopt: chunked or no body
  bool from_tcp = false;
  // Headers only MCP's Streamable HTTP transport reads (supervisor/mcp/http_transport.h).
  std::string content_type;
  std::string origin;
  std::string host;
  std::string mcp_session_id;        // Mcp-Session-Id
  std::string mcp_protocol_version;  // MCP-Protocol-Version
};

// One request/response exchange on a connection.
class Exchange {
 public:
  virtual ~Exchange() = default;
  // Request body bytes into buf: the count, 0 at the end of the body, or an error (client gone,
  // timeout, malformed chunking). The first call answers `Expect: 100-continue`.
  virtual sandbox::SResult<size_t> readBody(char* buf, size_t cap) = 0;
  // Adds a header to the next response (Allow, WWW-Authenticate).
  virtual void setHeader(std::string name, std::string value) = 0;
  // A whole response. False when the client is gone.
  virtual bool respond(int status, std::string_view content_type, std::string body) = 0;
  // A chunked response: header, chunks, end. abortStream() closes the connection without the
  // final chunk so the client sees a truncated transfer.
  virtual bool beginStream(int status, std::string_view content_type) = 0;
  virtual bool writeStream(std::string_view chunk) = 0;
  virtual bool endStream() = 0;
  virtual void abortStream() = 0;
  // True once the client has hung up (or the server is stopping): stop streaming to it.
  virtual bool clientGone() = 0;
  // Status of the response sent (for metrics), 0 before.
  virtual int status() const = 0;

  // For a handler that relays the connection's bytes itself (the port proxy, port_proxy.h).
  struct RawConnection {
    int fd = -1;          // the client's socket, non-blocking
    int stop_fd = -1;     // readable when the server stops
    std::string pending;  // bytes the server read past the request header (body, or more)
    std::chrono::milliseconds io_timeout{60000};
    unsigned http_version = 11;  // the request's: 10 or 11
    bool expect_continue = false;
  };
  // The request header's fields, in order, as received.
  virtual std::vector<std::pair<std::string, std::string>> requestFields() const { return {}; }
  // Hands the connection over: nothing more is answered through the exchange, and the server
  // closes the connection once the handler returns. nullopt where there is no socket.
  virtual std::optional<RawConnection> takeConnection() { return std::nullopt; }
  // The status the relayed answer carried (for metrics).
  virtual void setRelayedStatus(int status) { (void)status; }
  // Body bytes sent so far (for the request log); 0 where not counted.
  virtual uint64_t bytesOut() const { return 0; }

  // The tenant the request was authenticated as, set by the dispatcher for the request log
  // ("" when it got no further than authentication).
  std::string log_tenant;
};

struct HandlerLimits {
  size_t max_json_body = 8 << 20;
  uint64_t max_upload_bytes = uint64_t{1} << 30;
  // How long one EventStream::next waits before the handler checks whether the client is gone.
  std::chrono::milliseconds stream_poll{100};
};

class Dispatcher {
 public:
  Dispatcher(sandbox::Service& service, const TokenTable& tokens, HttpMetrics& metrics,
             HandlerLimits limits)
      : service_(service), tokens_(tokens), metrics_(metrics), limits_(limits) {}

  // Authenticates, routes and answers `req`. Returns the route label for metrics.
  std::string handle(const Request& req, Exchange& ex, bool draining);

 private:
  sandbox::Service& service_;
  const TokenTable& tokens_;
  HttpMetrics& metrics_;
  HandlerLimits limits_;
};

}  // namespace airlock::api
