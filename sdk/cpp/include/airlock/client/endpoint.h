// Where `airlock serve` listens, as clients name it in AIRLOCK_URL (docs/api.md):
// `unix:///path/to.sock` or `http://HOST:PORT` with HOST an IP literal or `localhost`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "airlock/client/error.h"

namespace airlock::sdk {

inline constexpr const char* kDefaultUrl = "unix:///run/airlock/airlock.sock";

struct Endpoint {
  enum class Kind { kUnix, kTcp };
  Kind kind = Kind::kUnix;
  std::string socket_path;  // kUnix: absolute path of the socket
  std::string host;         // kTcp: IPv4 or IPv6 literal (brackets removed)
  uint16_t port = 0;        // kTcp

  // "/run/airlock/airlock.sock" or "127.0.0.1:8080", for messages.
  std::string describe() const;
  // The Host header value.
  std::string hostHeader() const;
};

// Errors name the variable and the value: "AIRLOCK_URL 'ftp://x': scheme must be unix:// or
// http://".
Result<Endpoint> parseEndpoint(std::string_view url);

// AIRLOCK_URL, or kDefaultUrl when it is unset or empty.
Result<Endpoint> endpointFromEnvironment();

// A stream socket connected to `ep` (close-on-exec; the caller closes it), or -errno of the step
// that failed: ENAMETOOLONG for a socket path too long, EAFNOSUPPORT for a host that is no IP
// literal, else socket()'s or connect()'s.
int connectSocket(const Endpoint& ep);

}  // namespace airlock::sdk
