#include "airlock/client/endpoint.h"

#include <arpa/inet.h>
#include <sys/un.h>

#include <charconv>
#include <cstdlib>

namespace airlock::sdk {

namespace {

std::unexpected<Error> badUrl(std::string_view url, const std::string& why) {
  return failWith(ErrorKind::kInvalidArgument, "AIRLOCK_URL '" + std::string(url) + "': " + why);
}

bool isIpLiteral(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace

std::string Endpoint::describe() const {
  if (kind == Kind::kUnix) return socket_path;
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string Endpoint::hostHeader() const {
  return kind == Kind::kUnix ? std::string("localhost") : describe();
}

Result<Endpoint> parseEndpoint(std::string_view url) {
  Endpoint ep;
  constexpr std::string_view kUnix = "unix://", kHttp = "http://";
  if (url.starts_with(kUnix)) {
    ep.kind = Endpoint::Kind::kUnix;
    ep.socket_path = std::string(url.substr(kUnix.size()));
    if (ep.socket_path.empty()) return badUrl(url, "missing socket path (unix:///path/to.sock)");
    if (ep.socket_path[0] != '/')
      return badUrl(url, "socket path must be absolute (unix:///path/to.sock)");
    if (ep.socket_path.size() >= sizeof(sockaddr_un::sun_path))
      return badUrl(url, "socket path is longer than " +
                             std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes");
    return ep;
  }
  if (!url.starts_with(kHttp)) {
    if (url.starts_with("https://"))
      return badUrl(url, "https is not supported; the TCP listener is loopback-only http://");
    return badUrl(url, "scheme must be unix:// or http://");
  }
  ep.kind = Endpoint::Kind::kTcp;
  std::string_view rest = url.substr(kHttp.size());
  if (rest.ends_with('/')) rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos)
    return badUrl(url, "must not have a path (http://HOST:PORT)");
  std::string_view port_text;
  if (rest.starts_with('[')) {
    auto close = rest.find(']');
    if (close == std::string_view::npos) return badUrl(url, "unterminated '[' in IPv6 host");
    ep.host = std::string(rest.substr(1, close - 1));
    rest.remove_prefix(close + 1);
    if (!rest.starts_with(':')) return badUrl(url, "missing port (http://HOST:PORT)");
    port_text = rest.substr(1);
  } else {
    auto colon = rest.rfind(':');
    if (colon == std::string_view::npos) return badUrl(url, "missing port (http://HOST:PORT)");
    ep.host = std::string(rest.substr(0, colon));
    port_text = rest.substr(colon + 1);
  }
  if (ep.host == "localhost") ep.host = "127.0.0.1";
  if (ep.host.empty()) return badUrl(url, "missing host (http://HOST:PORT)");
  if (!isIpLiteral(ep.host))
    return badUrl(url, "host '" + ep.host + "' must be an IP address or localhost");
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
      port == 0 || port > 65535)
    return badUrl(url, "port '" + std::string(port_text) + "' must be a number in 1-65535");
  ep.port = static_cast<uint16_t>(port);
  return ep;
}

Result<Endpoint> endpointFromEnvironment() {
  const char* url = std::getenv("AIRLOCK_URL");
  return parseEndpoint(url != nullptr && *url != '\0' ? url : kDefaultUrl);
}

}  // namespace airlock::sdk
