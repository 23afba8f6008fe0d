// A synchronous HTTP client for the airlock API (docs/api.md), over a Unix socket or loopback
// TCP. Every call opens its own connection, so one Client may be used from several threads at
// once (a command's event stream on one, its stdin on another).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "airlock/result.h"
#include "supervisor/client/endpoint.h"

namespace airlock::client {

using Json = nlohmann::json;

// Called with each NDJSON event as soon as its line has arrived.
using EventHandler = std::function<void(const Json& event)>;
// Called after each piece of a transfer; `total` when the size is known.
using Progress = std::function<void(uint64_t done, std::optional<uint64_t> total)>;

class Client {
 public:
  Client(Endpoint endpoint, std::string token);
  // AIRLOCK_URL (default unix:///run/airlock/airlock.sock) and AIRLOCK_TOKEN.
  static Result<Client> fromEnvironment();

  const Endpoint& endpoint() const { return endpoint_; }

  // A JSON request (no body when `body` is null) and its JSON answer; null for an empty answer
  // (204). An error answer becomes "<message> (HTTP 404 not_found)"; a connection failure
  // "cannot connect to <socket>: ENOENT — is `airlock serve` running?".
  Result<Json> call(std::string_view method, const std::string& target,
                    const Json* body = nullptr) const;
  Result<Json> call(std::string_view method, const std::string& target, const Json& body) const {
    return call(method, target, &body);
  }

  // A request whose answer is NDJSON: `on_event` gets each event as its line arrives, until the
  // server ends the stream. An answer that is one JSON document (not NDJSON) is handed over as
  // a single event.
  Result<> stream(std::string_view method, const std::string& target, const Json& body,
                  const EventHandler& on_event) const;

  // PUT of `size` bytes read from `fd` in pieces (Content-Length, never all in memory); the
  // JSON answer.
  Result<Json> upload(const std::string& target, int fd, uint64_t size,
                      const Progress& progress = {}) const;

  // GET whose raw answer is written to `fd` as it arrives; the number of bytes written.
  Result<uint64_t> download(const std::string& target, int fd, const Progress& progress = {}) const;

 private:
  Endpoint endpoint_;
  std::string token_;
};

// Percent-encodes everything but RFC 3986 unreserved characters, for path segments and query
// values.
std::string percentEncode(std::string_view s);

}  // namespace airlock::client
