#include "airlock/client/endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdlib>
#include <cstring>

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

int connectSocket(const Endpoint& ep) {
  sockaddr_storage addr{};
  socklen_t len = 0;
  int family = AF_UNIX;
  if (ep.kind == Endpoint::Kind::kUnix) {
    auto* un = reinterpret_cast<sockaddr_un*>(&addr);
    un->sun_family = AF_UNIX;
    if (ep.socket_path.size() >= sizeof un->sun_path) return -ENAMETOOLONG;
    std::memcpy(un->sun_path, ep.socket_path.c_str(), ep.socket_path.size() + 1);
    len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + ep.socket_path.size() + 1);
  } else {
    auto* in4 = reinterpret_cast<sockaddr_in*>(&addr);
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&addr);
    if (inet_pton(AF_INET, ep.host.c_str(), &in4->sin_addr) == 1) {
      family = in4->sin_family = AF_INET;
      in4->sin_port = htons(ep.port);
      len = sizeof(sockaddr_in);
    } else if (inet_pton(AF_INET6, ep.host.c_str(), &in6->sin6_addr) == 1) {
      family = in6->sin6_family = AF_INET6;
      in6->sin6_port = htons(ep.port);
      len = sizeof(sockaddr_in6);
    } else {
      return -EAFNOSUPPORT;
    }
  }
  int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), len) != 0) {
    int err = errno;
    ::close(fd);
    return -err;
  }
  return fd;
}

}  // namespace airlock::sdk
