// The HTTP server of `airlock serve` (docs/api.md).
//
// Built on Boost.Beast (header-only, with Boost.Asio): it fits the Boost stack we already ship
// and gives a maintained HTTP/1.1 parser with header and body limits, chunked encoding and
// streaming bodies, so a 1 GB upload never sits in memory. Beast stays inside the server's own
// files (server.cc, blocking_exchange.h, fd_stream.h, http_request.h).
//
// Bounded by design, so a slow or hostile client cannot pin threads or memory:
// - An io_context pool (`io_threads`) accepts connections and waits for requests
//   asynchronously: an idle keep-alive connection, or one whose header is still arriving, costs
//   a socket and a small buffer, no thread. Its header must start within `idle_timeout` and end
//   within `header_timeout` of its first byte (slowloris is cut there).
// - A complete request header gets a thread of its own for the answer (blocking_exchange.h):
//   handlers call the Service, which blocks. Threads are bounded by `max_requests` and
//   `max_requests_per_client`; every body read and answer write that makes no progress for
//   `io_timeout` ends the connection.
// - Connections are bounded by `max_connections` and `max_connections_per_client`. Over a
//   limit, the oldest connection waiting for a request is evicted (admission.h); only when every
//   connection has a request in progress is the newcomer refused, 429 over a client's limit and
//   503 over the server's, with the limit named.
// - GET /healthz is answered on the io_context itself, so it answers while every request thread
//   is taken.
// A client is a local uid on the Unix socket and a peer address on TCP ("tls ADDRESS" when TLS
// terminates it: tls_listener.h hands those connections in over a socketpair).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "airlock/result.h"
#include "supervisor/sandbox/service.h"

namespace airlock::api {

struct ServerOptions {
  std::string socket_path;  // required
  uint32_t socket_mode = 0660;
  std::string socket_group;  // "": leave the group as created
  std::string tcp_listen;    // "127.0.0.1:8720", "[::1]:8720" or "" (no TCP)
  // TLS on the TCP listener (tls_listener.h); with it, tcp_listen may be any address.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;  // "": no client certificates
  // A fleet node's name (policy server.node): every answer says it in X-Airlock-Node, and MCP
  // session ids begin with it. "": a single host.
  std::string node;
  // sha256 hex of a bearer token → its tenant. TCP requests must carry one; Unix socket
  // requests are tenant "default" unless they do.
  std::map<std::string, std::string> token_sha256_to_tenant;
  size_t max_connections = 4096;
  size_t max_connections_per_client = 1024;
  size_t max_requests = 512;  // requests being answered at once, streams included
  size_t max_requests_per_client = 256;
  size_t max_json_body = 8 << 20;
  uint64_t max_upload_bytes = uint64_t{1} << 30;
  size_t io_threads = 2;
  std::chrono::milliseconds idle_timeout{60000};  // keep-alive wait for a request's first byte
  std::chrono::milliseconds header_timeout{
      10000};                                   // from a request's first byte to its header's end
  std::chrono::milliseconds io_timeout{60000};  // a body read or response write without progress
  std::chrono::milliseconds stream_poll{100};   // how often a stream checks for a gone client
  // MCP over HTTP (/mcp): open sessions per tenant, and how long one may sit unused before it
  // and its sandboxes end.
  size_t mcp_max_sessions_per_tenant = 16;
  std::chrono::milliseconds mcp_session_idle_timeout{std::chrono::minutes(30)};
  // One line per connection and per server-side failure; null: silent.
  std::function<void(std::string_view)> log;
};

class Server {
 public:
  // Binds the listeners and starts accepting. `service` must outlive the server.
  static Result<std::unique_ptr<Server>> start(sandbox::Service& service, ServerOptions options);
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Stops accepting (the socket file is removed), answers /healthz with 503 "draining" and other
  // new requests with 503 on connections still open (then closes them), and waits up to
  // `timeout` for in-flight requests (streams included) to finish. True when none is left.
  bool drain(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Drains without waiting, breaks every connection (streams see their client gone), and waits
  // for every request thread and the io_context pool to end. Idempotent.
  void stop();

  bool draining() const;
  size_t connections() const;     // open connections
  size_t requestThreads() const;  // requests being answered on their own threads
  uint16_t tcpPort() const;       // the bound TCP port, 0 without TCP
  const std::string& socketPath() const;

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace airlock::api
