// The HTTP server of `airlock serve` (docs/api.md).
//
// Built on Boost.Beast (header-only, with Boost.Asio): it fits the Boost stack we already ship
// and gives a maintained HTTP/1.1 parser with header and body limits, chunked encoding and
// streaming bodies, so a 1 GB upload never sits in memory. Beast stays inside server.cc.
//
// Threading, kept simple and bounded: one acceptor thread per listener (the Unix socket, and
// loopback TCP when configured) and one thread per connection doing synchronous reads and writes
// with poll()-based deadlines. Connections past max_connections are answered 429 at once and
// closed, never queued. Keep-alive connections close after idle_timeout without a request, and
// any body read or response write that makes no progress for io_timeout ends the connection, so
// a stuck client cannot hold a thread forever.
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
  // sha256 hex of a bearer token → its tenant. TCP requests must carry one; Unix socket
  // requests are tenant "default" unless they do.
  std::map<std::string, std::string> token_sha256_to_tenant;
  size_t max_connections = 256;
  size_t max_json_body = 8 << 20;
  uint64_t max_upload_bytes = uint64_t{1} << 30;
  std::chrono::milliseconds idle_timeout{60000};  // keep-alive wait, and the time to send a header
  std::chrono::milliseconds io_timeout{60000};    // a body read or response write without progress
  std::chrono::milliseconds stream_poll{100};     // how often a stream checks for a gone client
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
  // new requests with 503 on connections still open, closes idle connections, and waits up to
  // `timeout` for in-flight requests (streams included) to finish. True when none is left.
  bool drain(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  // Drains without waiting, breaks every connection (streams see their client gone), and waits
  // for every connection thread to end. Idempotent.
  void stop();

  bool draining() const;
  size_t connections() const;  // open connections
  uint16_t tcpPort() const;    // the bound TCP port, 0 without TCP
  const std::string& socketPath() const;

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace airlock::api
