#include "airlock/client/http.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>

#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "airlock/unique_fd.h"
#include "api_error.h"

namespace airlock::sdk {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using ErrorCode = boost::system::error_code;
using Socket = asio::generic::stream_protocol::socket;
using Parser = http::response_parser<http::buffer_body>;
using Unexpected = std::unexpected<Error>;

constexpr size_t kPiece = 64 * 1024;
constexpr uint64_t kMaxErrorBody = 1 << 20;
constexpr uint64_t kMaxJsonBody = 512ull << 20;  // files/read answers carry whole files
constexpr const char* kUserAgent = "airlock-client";

const char* errnoName(int e) {
  const char* name = strerrorname_np(e);
  return name != nullptr ? name : "E?";
}

// "socket '/run/x.sock': EMFILE (Too many open files)"; reads errno now.
Unexpected systemError(ErrorKind kind, const std::string& op, const std::string& subject) {
  int e = errno;
  return failWith(kind, op + " '" + subject + "': " + errnoName(e) + " (" + std::strerror(e) + ")");
}

// One request's connection: asio wants an io_context even for blocking calls.
struct Connection {
  asio::io_context ioc;
  Socket socket{ioc};
  beast::flat_buffer buffer;
};

Unexpected connectError(const Endpoint& ep, int err) {
  std::string m = "cannot connect to " + ep.describe() + ": " + errnoName(err);
  if (err == ENOENT || err == ECONNREFUSED)
    m += " — is `airlock serve` running?";
  else if (err == EACCES)
    m += " — may this user open the socket? (its mode and group come from the policy's [server] "
         "table)";
  else
    m += std::string(" (") + std::strerror(err) + ")";
  return failWith(ErrorKind::kConnection, m);
}

Unexpected ioError(const Endpoint& ep, const std::string& what, const ErrorCode& ec) {
  return failWith(ErrorKind::kConnection, what + " " + ep.describe() + ": " + ec.message());
}

Result<std::unique_ptr<Connection>> connectTo(const Endpoint& ep) {
  int got = connectSocket(ep);
  if (got == -ENAMETOOLONG)
    return failWith(ErrorKind::kInvalidArgument, "socket path too long '" + ep.socket_path + "'");
  if (got == -EAFNOSUPPORT)
    return failWith(ErrorKind::kInvalidArgument, "host is not an IP address '" + ep.host + "'");
  if (got < 0) return connectError(ep, -got);
  UniqueFd fd(got);
  const int family = ep.kind == Endpoint::Kind::kUnix         ? AF_UNIX
                     : ep.host.find(':') != std::string::npos ? AF_INET6
                                                              : AF_INET;
  auto conn = std::make_unique<Connection>();
  ErrorCode ec;
  conn->socket.assign(asio::generic::stream_protocol(family, family == AF_UNIX ? 0 : IPPROTO_TCP),
                      fd.get(), ec);
  if (ec) return ioError(ep, "adopting the socket to", ec);
  (void)fd.release();  // the asio socket owns it now
  return conn;
}

Result<http::verb> verbOf(std::string_view method) {
  auto v = http::string_to_verb(beast::string_view(method.data(), method.size()));
  if (v == http::verb::unknown)
    return failWith(ErrorKind::kInvalidArgument,
                    "unknown HTTP method '" + std::string(method) + "'");
  return v;
}

template <class Body>
void setCommonHeaders(http::request<Body>& req, const Endpoint& ep, const std::string& token) {
  req.set(http::field::host, ep.hostHeader());
  req.set(http::field::user_agent, kUserAgent);
  if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
  req.keep_alive(false);
}

Result<> readHeader(Connection& c, Parser& p, const Endpoint& ep);

// Event streams as frames (docs/api.md): output as its own bytes, no JSON escaping to undo.
constexpr std::string_view kFramesType = "application/vnd.airlock.frames";

// Connects and sends a request with an optional JSON body; `accept` when not empty.
Result<std::unique_ptr<Connection>> sendJson(const Endpoint& ep, const std::string& token,
                                             std::string_view method, const std::string& target,
                                             const Json* body, std::string_view accept = {}) {
  auto verb = verbOf(method);
  if (!verb) return Unexpected(verb.error());
  http::request<http::string_body> req{*verb, target, 11};
  setCommonHeaders(req, ep, token);
  if (!accept.empty()) req.set(http::field::accept, std::string(accept));
  if (body != nullptr) {
    req.set(http::field::content_type, "application/json");
    req.body() = body->dump();
  }
  req.prepare_payload();
  auto conn = connectTo(ep);
  if (!conn) return conn;
  ErrorCode ec;
  http::write((*conn)->socket, req, ec);
  if (ec) {
    // The supervisor may have answered before the body was in (413 over its body limit) and
    // closed: that answer says more than the broken pipe.
    Parser p;
    auto early = readHeader(**conn, p, ep);
    if (!early && early.error().httpStatus() != 0) return Unexpected(early.error());
    return ioError(ep, "sending " + std::string(method) + " " + target + " to", ec);
  }
  return conn;
}

// Reads the body as it arrives, one piece at a time, into `sink`.
Result<> readBody(Connection& c, Parser& p, const Endpoint& ep, const ByteSink& sink) {
  auto piece = std::make_unique<char[]>(kPiece);
  while (!p.is_done()) {
    p.get().body().data = piece.get();
    p.get().body().size = kPiece;
    ErrorCode ec;
    http::read_some(c.socket, c.buffer, p, ec);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) return ioError(ep, "reading the answer from", ec);
    size_t n = kPiece - p.get().body().size;
    if (n > 0) {
      if (auto r = sink({piece.get(), n}); !r) return r;
    }
  }
  return {};
}

std::string reasonOf(const Parser& p) {
  auto r = p.get().reason();
  return std::string(r.data(), r.size());
}

// Reads the answer's header. A 4xx/5xx answer is read to its end and becomes the error.
Result<> readHeader(Connection& c, Parser& p, const Endpoint& ep) {
  // Not boost::none: Beast 1.74 compares Content-Length against the empty optional and fails.
  p.body_limit(std::numeric_limits<std::uint64_t>::max());
  ErrorCode ec;
  http::read_header(c.socket, c.buffer, p, ec);
  if (ec) return ioError(ep, "reading the answer from", ec);
  unsigned status = p.get().result_int();
  if (status >= 200 && status < 300) return {};
  std::string body;
  auto r = readBody(c, p, ep, [&](std::string_view piece) -> Result<> {
    if (body.size() + piece.size() > kMaxErrorBody)
      return failWith(ErrorKind::kProtocol, "error answer too long");
    body.append(piece);
    return {};
  });
  if (!r && body.empty()) return Unexpected(errorFromAnswer(status, reasonOf(p), ""));
  return Unexpected(errorFromAnswer(status, reasonOf(p), body));
}

Result<Json> readJsonAnswer(Connection& c, const Endpoint& ep, const std::string& what) {
  Parser p;
  if (auto r = readHeader(c, p, ep); !r) return Unexpected(r.error());
  std::string body;
  auto r = readBody(c, p, ep, [&](std::string_view piece) -> Result<> {
    if (body.size() + piece.size() > kMaxJsonBody)
      return failWith(ErrorKind::kTooLarge, what + ": answer too long");
    body.append(piece);
    return {};
  });
  if (!r) return Unexpected(r.error());
  if (body.empty()) return Json();
  auto doc = Json::parse(body, nullptr, false);
  if (doc.is_discarded())
    return failWith(ErrorKind::kProtocol,
                    what + ": the supervisor's answer is not JSON: " + body.substr(0, 200));
  return doc;
}

Result<> writeAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return systemError(ErrorKind::kInvalidArgument, "write", "output");
    data.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

}  // namespace

Http::Http(Endpoint endpoint, std::string token)
    : endpoint_(std::move(endpoint)), token_(std::move(token)) {}

Result<Http> Http::fromEnvironment() { return connect("", ""); }

Result<Http> Http::connect(std::string_view url, std::string_view token) {
  auto ep = url.empty() ? endpointFromEnvironment() : parseEndpoint(url);
  if (!ep) return Unexpected(ep.error());
  std::string tok(token);
  if (tok.empty()) {
    const char* env = std::getenv("AIRLOCK_TOKEN");
    if (env != nullptr) tok = env;
  }
  return Http(std::move(*ep), std::move(tok));
}

Result<Json> Http::call(std::string_view method, const std::string& target,
                        const Json* body) const {
  auto conn = sendJson(endpoint_, token_, method, target, body);
  if (!conn) return Unexpected(conn.error());
  return readJsonAnswer(**conn, endpoint_, std::string(method) + " " + target);
}

Result<> Http::stream(std::string_view method, const std::string& target, const Json& body,
                      const EventHandler& on_event) const {
  const std::string what = std::string(method) + " " + target;
  auto conn = sendJson(endpoint_, token_, method, target, &body,
                       std::string(kFramesType) + ", application/x-ndjson");
  if (!conn) return Unexpected(conn.error());
  Parser p;
  if (auto r = readHeader(**conn, p, endpoint_); !r) return r;
  std::string pending;
  if (std::string_view(p.get()[http::field::content_type]).starts_with(kFramesType)) {
    // A kind byte, the payload's length (4 bytes, big-endian), the payload. Output events carry
    // their bytes in "data" as they came, which may not be UTF-8: these events are only read
    // (fields::bytes), never serialized again.
    auto r = readBody(**conn, p, endpoint_, [&](std::string_view piece) -> Result<> {
      pending.append(piece);
      size_t at = 0;
      while (pending.size() - at >= 5) {
        const auto* h = reinterpret_cast<const unsigned char*>(pending.data() + at);
        const size_t size =
            (size_t{h[1]} << 24) | (size_t{h[2]} << 16) | (size_t{h[3]} << 8) | h[4];
        if (pending.size() - at - 5 < size) break;
        std::string_view payload(pending.data() + at + 5, size);
        const char kind = pending[at];
        at += 5 + size;
        if (kind == 'o' || kind == 'e') {
          on_event(
              Json{{"type", kind == 'o' ? "stdout" : "stderr"}, {"data", std::string(payload)}});
        } else if (kind == 'j') {
          auto event = Json::parse(payload, nullptr, false);
          if (event.is_discarded())
            return failWith(ErrorKind::kProtocol, what +
                                                      ": an event from the supervisor is not "
                                                      "JSON: " +
                                                      std::string(payload.substr(0, 200)));
          on_event(event);
        } else {
          return failWith(ErrorKind::kProtocol,
                          what + ": the supervisor sent a frame of unknown kind " +
                              std::to_string(static_cast<unsigned char>(kind)));
        }
      }
      pending.erase(0, at);
      return {};
    });
    if (!r) return r;
    if (!pending.empty())
      return failWith(ErrorKind::kProtocol, what + ": the stream ended inside a frame (" +
                                                std::to_string(pending.size()) + " bytes left)");
    return {};
  }
  auto emit = [&](std::string_view line) -> Result<> {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) return {};
    auto event = Json::parse(line, nullptr, false);
    if (event.is_discarded())
      return failWith(ErrorKind::kProtocol, what + ": an event from the supervisor is not JSON: " +
                                                std::string(line.substr(0, 200)));
    on_event(event);
    return {};
  };
  auto r = readBody(**conn, p, endpoint_, [&](std::string_view piece) -> Result<> {
    pending.append(piece);
    size_t start = 0;
    for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
      if (auto e = emit(std::string_view(pending).substr(start, nl - start)); !e) return e;
    }
    pending.erase(0, start);
    return {};
  });
  if (!r) return r;
  // A non-streamed answer (one JSON document, maybe pretty-printed) is one event.
  if (!pending.empty()) return emit(pending);
  return {};
}

Result<Json> Http::upload(const std::string& target, int fd, uint64_t size,
                          const Progress& progress) const {
  return put(
      target, size,
      [fd](char* buffer, size_t capacity) -> Result<size_t> {
        for (;;) {
          ssize_t n = ::read(fd, buffer, capacity);
          if (n < 0 && errno == EINTR) continue;
          if (n < 0)
            return systemError(ErrorKind::kInvalidArgument, "read", "the file being uploaded");
          return static_cast<size_t>(n);
        }
      },
      progress);
}

Result<Json> Http::upload(const std::string& target, std::string_view bytes) const {
  size_t offset = 0;
  return put(target, bytes.size(),
             [&](char* buffer, size_t capacity) -> Result<size_t> {
               size_t n = std::min(capacity, bytes.size() - offset);
               std::memcpy(buffer, bytes.data() + offset, n);
               offset += n;
               return n;
             },
             {});
}

Result<Json> Http::put(const std::string& target, uint64_t size, const Source& source,
                       const Progress& progress) const {
  const std::string what = "PUT " + target;
  http::request<http::buffer_body> req{http::verb::put, target, 11};
  setCommonHeaders(req, endpoint_, token_);
  req.set(http::field::content_type, "application/octet-stream");
  req.content_length(size);
  req.body().data = nullptr;
  req.body().more = size > 0;
  auto connected = connectTo(endpoint_);
  if (!connected) return Unexpected(connected.error());
  auto& conn = *connected;
  http::request_serializer<http::buffer_body> sr{req};
  ErrorCode ec;
  http::write_header(conn->socket, sr, ec);
  auto piece = std::make_unique<char[]>(kPiece);
  uint64_t sent = 0;
  Result<> local_error;
  while (!ec && sent < size) {
    auto n = source(piece.get(), static_cast<size_t>(std::min<uint64_t>(kPiece, size - sent)));
    if (!n) {
      local_error = Unexpected(n.error());
      break;
    }
    if (*n == 0) {
      local_error =
          failWith(ErrorKind::kInvalidArgument,
                   "the file being uploaded shrank to " + std::to_string(sent) +
                       " bytes while it was sent (" + std::to_string(size) + " expected)");
      break;
    }
    sent += *n;
    req.body().data = piece.get();
    req.body().size = *n;
    req.body().more = sent < size;
    http::write(conn->socket, sr, ec);
    if (ec == http::error::need_buffer) ec = {};
    if (progress) progress(sent, size);
  }
  if (!local_error) return Unexpected(std::move(local_error.error()).wrap(what));
  if (ec) {
    // The supervisor may have answered early (413 over quota, 404 unknown sandbox) and closed.
    auto early = readJsonAnswer(*conn, endpoint_, what);
    if (!early) return early;
    return ioError(endpoint_, what + ": sending the file to", ec);
  }
  return readJsonAnswer(*conn, endpoint_, what);
}

Result<uint64_t> Http::download(const std::string& target, int fd, const Progress& progress) const {
  return download(
      target, [fd](std::string_view piece) { return writeAll(fd, piece); }, progress);
}

Result<uint64_t> Http::download(const std::string& target, const ByteSink& sink,
                                const Progress& progress) const {
  auto conn = sendJson(endpoint_, token_, "GET", target, nullptr);
  if (!conn) return Unexpected(conn.error());
  Parser p;
  if (auto r = readHeader(**conn, p, endpoint_); !r) return Unexpected(r.error());
  std::optional<uint64_t> total;
  if (auto len = p.content_length()) total = *len;
  uint64_t received = 0;
  auto r = readBody(**conn, p, endpoint_, [&](std::string_view piece) -> Result<> {
    if (auto w = sink(piece); !w) return w;
    received += piece.size();
    if (progress) progress(received, total);
    return {};
  });
  if (!r) return Unexpected(r.error());
  return received;
}

std::string percentEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace airlock::sdk
