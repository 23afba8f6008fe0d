#include "supervisor/api/port_proxy.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>

#include "supervisor/api/response_encoding.h"
#include "supervisor/sandbox/agent/port_stream.h"

namespace airlock::api {

namespace {

using sandbox::ErrorCode;
using sandbox::PortStream;
using sandbox::ServiceError;
using Clock = std::chrono::steady_clock;

constexpr size_t kReadChunk = 64 * 1024;

void sendError(Exchange& ex, ErrorCode code, std::string message) {
  ServiceError err{code, std::move(message)};
  ex.respond(sandbox::httpStatus(code), "application/json", errorBody(err));
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The port of the path: decimal 1..65535.
std::optional<uint16_t> parsePort(const std::string& text) {
  if (text.empty() || text.size() > 5) return std::nullopt;
  uint32_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  if (v < 1 || v > 65535) return std::nullopt;
  return static_cast<uint16_t>(v);
}

// The request header as the sandbox's server gets it.
std::string rewriteHead(const PortProxyTarget& target, uint16_t port, const Request& req,
                        const std::vector<std::pair<std::string, std::string>>& fields,
                        unsigned version, bool& upgrade) {
  std::string original_host;
  upgrade = false;
  for (const auto& [name, value] : fields) {
    const std::string n = lower(name);
    if (n == "host") original_host = value;
    if (n == "connection" && lower(value).find("upgrade") != std::string::npos) upgrade = true;
  }
  std::string head = req.method + " " + target.path;
  if (!req.query.empty()) head += "?" + req.query;
  head += version == 10 ? " HTTP/1.0\r\n" : " HTTP/1.1\r\n";
  head += "Host: localhost:" + std::to_string(port) + "\r\n";
  for (const auto& [name, value] : fields) {
    const std::string n = lower(name);
    // Hop-by-hop fields are the proxy's own; the tenant's token stays with airlock.
    if (n == "host" || n == "connection" || n == "keep-alive" || n == "proxy-connection" ||
        n == "expect" || n == "te" || n.starts_with("x-forwarded-") ||
        (n == "upgrade" && !upgrade) || (n == "authorization" && target.strip_authorization))
      continue;
    head += name + ": " + value + "\r\n";
  }
  head += upgrade ? "Connection: Upgrade\r\n" : "Connection: close\r\n";
  if (!original_host.empty()) head += "X-Forwarded-Host: " + original_host + "\r\n";
  head += std::string("X-Forwarded-Proto: http\r\n");
  if (!target.prefix.empty()) head += "X-Forwarded-Prefix: " + target.prefix + "\r\n";
  head += "\r\n";
  return head;
}

// "HTTP/1.1 200 OK" → 200; 0 until a whole status line is there.
int statusOf(std::string_view first_bytes) {
  if (!first_bytes.starts_with("HTTP/") || first_bytes.size() < 12) return 0;
  size_t sp = first_bytes.find(' ');
  if (sp == std::string_view::npos || sp + 4 > first_bytes.size()) return 0;
  int code = 0;
  for (size_t i = sp + 1; i < sp + 4; ++i) {
    char c = first_bytes[i];
    if (c < '0' || c > '9') return 0;
    code = code * 10 + (c - '0');
  }
  return code;
}

// Relays bytes both ways until the sandbox's server is done (or fails), the client leaves, the
// server stops, or nothing moves for io_timeout.
void relay(PortStream& stream, Exchange::RawConnection& raw, std::string to_server, Exchange& ex) {
  std::string to_client;
  bool client_eof = false, server_eof = false, ended = false, any_to_client = false;
  std::string status_probe;
  std::string error;
  auto idle_deadline = Clock::now() + raw.io_timeout;
  char buf[kReadChunk];
  while (true) {
    // Client → sandbox, within the agent's window.
    while (!to_server.empty()) {
      size_t n = std::min(to_server.size(), stream.sendWindow());
      if (n == 0) break;
      if (!stream.write(std::string_view(to_server).substr(0, n))) return;
      to_server.erase(0, n);
    }
    if (to_server.empty() && client_eof) (void)stream.writeEof();
    // Sandbox → client.
    if (!to_client.empty()) {
      ssize_t n = ::send(raw.fd, to_client.data(), to_client.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno != EAGAIN && errno != EINTR) return;  // the client left
      if (n > 0) {
        if (status_probe.size() < 16) {
          status_probe.append(to_client, 0, std::min<size_t>(16, static_cast<size_t>(n)));
          if (int code = statusOf(status_probe); code != 0) ex.setRelayedStatus(code);
        }
        to_client.erase(0, static_cast<size_t>(n));
        any_to_client = true;
        idle_deadline = Clock::now() + raw.io_timeout;
        if (!stream.consumed(static_cast<size_t>(n))) return;
      }
    }
    if (to_client.empty() && (server_eof || ended)) {
      if (!any_to_client && !error.empty()) {
        // Nothing was answered yet: the client gets a readable error instead of a bare close.
        ServiceError err{ErrorCode::kBadGateway,
                         "port " + std::to_string(stream.port()) + ": " + error};
        std::string body = errorBody(err);
        std::string wire =
            "HTTP/1.1 502 Bad Gateway\r\nContent-Type: application/json\r\n"
            "Content-Length: " +
            std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
        (void)!::send(raw.fd, wire.data(), wire.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        ex.setRelayedStatus(502);
      }
      ::shutdown(raw.fd, SHUT_WR);
      return;
    }

    pollfd p[3] = {{raw.fd, 0, 0}, {stream.readyFd(), POLLIN, 0}, {raw.stop_fd, POLLIN, 0}};
    if (!client_eof && to_server.empty() && stream.sendWindow() > 0) p[0].events |= POLLIN;
    if (!to_client.empty()) p[0].events |= POLLOUT;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(idle_deadline - Clock::now());
    if (left.count() <= 0) return;  // idle past io_timeout
    int rc = ::poll(p, 3, static_cast<int>(std::min<int64_t>(left.count() + 1, 1000000)));
    if (rc < 0 && errno != EINTR) return;
    if (rc <= 0) continue;
    if (p[2].revents != 0) return;  // the server is stopping
    if (p[1].revents != 0) {
      auto a = stream.take();
      if (!a.data.empty()) idle_deadline = Clock::now() + raw.io_timeout;
      to_client += a.data;
      server_eof = a.eof;
      ended = a.ended;
      error = a.error;
    }
    if ((p[0].revents & (POLLERR | POLLNVAL)) != 0) return;
    if ((p[0].revents & (POLLIN | POLLHUP)) != 0 && (p[0].events & POLLIN) != 0) {
      ssize_t n = ::recv(raw.fd, buf, std::min(sizeof buf, stream.sendWindow()), MSG_DONTWAIT);
      if (n > 0) {
        to_server.append(buf, static_cast<size_t>(n));
        idle_deadline = Clock::now() + raw.io_timeout;
      } else if (n == 0) {
        client_eof = true;
      } else if (errno != EAGAIN && errno != EINTR) {
        return;
      }
    } else if ((p[0].revents & POLLHUP) != 0 && to_client.empty()) {
      return;  // hung up while we had nothing to read for it
    }
  }
}

}  // namespace

void proxyPort(sandbox::Service& service, const PortProxyTarget& target, const Request& req,
               Exchange& ex) {
  auto port = parsePort(target.port);
  if (!port)
    return sendError(ex, ErrorCode::kBadRequest,
                     "port: must be a number from 1 to 65535, got '" + target.port + "'");
  auto stream = service.openPort(target.caller, target.sandbox, *port);
  if (!stream) {
    ServiceError err = stream.error();
    if (err.code == ErrorCode::kBadGateway)
      err.message = "sandbox '" + target.sandbox + "': " + err.message;
    return (void)ex.respond(sandbox::httpStatus(err.code), "application/json", errorBody(err));
  }
  auto fields = ex.requestFields();
  auto raw = ex.takeConnection();
  if (!raw)
    return sendError(ex, ErrorCode::kBadRequest, "the port proxy needs a connection of its own");
  if (raw->expect_continue) {
    // Answered here: the Expect field is not forwarded, so the client sends its body at once.
    static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
    (void)!::send(raw->fd, kContinue, sizeof kContinue - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  bool upgrade = false;
  std::string head = rewriteHead(target, *port, req, fields, raw->http_version, upgrade);
  relay(**stream, *raw, head + raw->pending, ex);
}

void createPortLink(sandbox::Service& service, const sandbox::Caller& caller, const std::string& sb,
                    const std::string& port_text, Exchange& ex) {
  auto port = parsePort(port_text);
  if (!port)
    return sendError(ex, ErrorCode::kBadRequest,
                     "port: must be a number from 1 to 65535, got '" + port_text + "'");
  auto token = service.createPortLink(caller, sb, *port);
  if (!token) {
    const auto& err = token.error();
    return (void)ex.respond(sandbox::httpStatus(err.code), "application/json", errorBody(err));
  }
  Json body{{"path", "/v1/ports/" + *token + "/"}, {"port", *port}};
  ex.respond(200, "application/json", dumpJson(body));
}

}  // namespace airlock::api
