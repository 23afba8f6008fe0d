// The transport under the SDK: a synchronous HTTP client for the airlock API (docs/api.md), over
// a Unix socket or loopback TCP. Every call opens its own connection, so one Http may be used
// from several threads at once (a command's event stream on one, its stdin on another).
// Sandbox, Commands and Files are built on it; use it directly for routes they do not wrap.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "airlock/client/endpoint.h"
#include "airlock/client/error.h"

namespace airlock::sdk {

using Json = nlohmann::json;

// Called with each NDJSON event as soon as its line has arrived.
using EventHandler = std::function<void(const Json& event)>;
// Called after each piece of a transfer; `total` when the size is known.
using Progress = std::function<void(uint64_t done, std::optional<uint64_t> total)>;
// Receives a download's bytes piece by piece; an error stops the transfer.
using ByteSink = std::function<Result<>(std::string_view piece)>;

class Http {
 public:
  Http(Endpoint endpoint, std::string token);
  // AIRLOCK_URL (default unix:///run/airlock/airlock.sock) and AIRLOCK_TOKEN.
  static Result<Http> fromEnvironment();
  // `url` and `token` when given, else AIRLOCK_URL and AIRLOCK_TOKEN.
  static Result<Http> connect(std::string_view url, std::string_view token);

  const Endpoint& endpoint() const { return endpoint_; }

  // A JSON request (no body when `body` is null) and its JSON answer; null for an empty answer
  // (204). An error answer becomes an Error of the matching kind whose message is
  // "<message> (HTTP 404 not_found)"; a connection failure
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
  // PUT of bytes already in memory.
  Result<Json> upload(const std::string& target, std::string_view bytes) const;

  // GET whose raw answer is written to `fd` as it arrives; the number of bytes written.
  Result<uint64_t> download(const std::string& target, int fd, const Progress& progress = {}) const;
  // GET whose raw answer goes to `sink` as it arrives; the number of bytes received.
  Result<uint64_t> download(const std::string& target, const ByteSink& sink,
                            const Progress& progress = {}) const;

 private:
  using Source = std::function<Result<size_t>(char* buffer, size_t capacity)>;
  Result<Json> put(const std::string& target, uint64_t size, const Source& source,
                   const Progress& progress) const;

  Endpoint endpoint_;
  std::string token_;
};

// Percent-encodes everything but RFC 3986 unreserved characters, for path segments and query
// values.
std::string percentEncode(std::string_view s);

}  // namespace airlock::sdk
