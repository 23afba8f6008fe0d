// The client of `airlock serve` that the CLI's sandbox/exec/code/files commands use: the C++
// SDK's transport (sdk/cpp, airlock::sdk::Http), answering airlock::Result like the rest of the
// supervisor's code. The SDK's typed errors become airlock::Errors carrying the same message.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "airlock/client/http.h"
#include "airlock/result.h"

namespace airlock::client {

using Json = sdk::Json;
using sdk::Endpoint;
using sdk::EventHandler;
using sdk::kDefaultUrl;
using sdk::percentEncode;
using sdk::Progress;

// An SDK Result as an airlock::Result with the SDK error's message.
template <typename T>
Result<T> toResult(sdk::Result<T> r) {
  if (!r) return fail(r.error().message());
  if constexpr (std::is_void_v<T>)
    return {};
  else
    return std::move(*r);
}

inline Result<Endpoint> parseEndpoint(std::string_view url) {
  return toResult(sdk::parseEndpoint(url));
}
inline Result<Endpoint> endpointFromEnvironment() {
  return toResult(sdk::endpointFromEnvironment());
}

class Client {
 public:
  Client(Endpoint endpoint, std::string token) : http_(std::move(endpoint), std::move(token)) {}
  // AIRLOCK_URL (default unix:///run/airlock/airlock.sock) and AIRLOCK_TOKEN.
  static Result<Client> fromEnvironment() {
    auto http = sdk::Http::fromEnvironment();
    if (!http) return fail(http.error().message());
    return Client(std::move(*http));
  }

  const Endpoint& endpoint() const { return http_.endpoint(); }
  const sdk::Http& http() const { return http_; }

  // See sdk::Http for each.
  Result<Json> call(std::string_view method, const std::string& target,
                    const Json* body = nullptr) const {
    return toResult(http_.call(method, target, body));
  }
  Result<Json> call(std::string_view method, const std::string& target, const Json& body) const {
    return call(method, target, &body);
  }
  Result<> stream(std::string_view method, const std::string& target, const Json& body,
                  const EventHandler& on_event) const {
    return toResult(http_.stream(method, target, body, on_event));
  }
  Result<Json> upload(const std::string& target, int fd, uint64_t size,
                      const Progress& progress = {}) const {
    return toResult(http_.upload(target, fd, size, progress));
  }
  Result<uint64_t> download(const std::string& target, int fd,
                            const Progress& progress = {}) const {
    return toResult(http_.download(target, fd, progress));
  }

 private:
  explicit Client(sdk::Http http) : http_(std::move(http)) {}
  sdk::Http http_;
};

}  // namespace airlock::client
