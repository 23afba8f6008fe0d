#include "supervisor/api/server.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/buffer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

#include "supervisor/api/auth.h"
#include "supervisor/api/fd_stream.h"
#include "supervisor/api/handlers.h"
#include "supervisor/api/http_metrics.h"
#include "supervisor/api/http_request.h"
#include "supervisor/api/listeners.h"
#include "supervisor/api/response_encoding.h"

namespace airlock::api {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

constexpr size_t kReadBufferLimit = 64 * 1024;
// Unread request body the server skips to keep a connection alive after answering early.
constexpr uint64_t kMaxDiscard = 64 * 1024;

using detail::FdStream;
using detail::msUntil;

using Parser = RequestParser;

// One request/response on a connection (handlers.h).
class BeastExchange final : public Exchange {
 public:
  BeastExchange(FdStream& stream, beast::flat_buffer& buffer, Parser& parser, bool keep_alive,
                bool expect_continue)
      : stream_(stream),
        buffer_(buffer),
        parser_(parser),
        keep_alive_(keep_alive),
        expect_continue_(expect_continue),
        skippable_(parser.content_length() && *parser.content_length() <= kMaxDiscard) {}

  sandbox::SResult<size_t> readBody(char* buf, size_t cap) override {
    if (parser_.is_done()) return size_t{0};
    if (broken_)
      return sandbox::serviceError(sandbox::ErrorCode::kBadRequest,
                                   "request body: connection broken");
    if (expect_continue_) {
      expect_continue_ = false;
      static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
      error_code ec;
      net::write(stream_, net::buffer(kContinue, sizeof kContinue - 1), ec);
      if (ec) return bodyError(ec);
    }
    auto& body = parser_.get().body();
    body.data = buf;
    body.size = cap;
    error_code ec;
    http::read(stream_, buffer_, parser_, ec);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) return bodyError(ec);
    return cap - body.size;
  }

  void setHeader(std::string name, std::string value) override {
    headers_.emplace_back(std::move(name), std::move(value));
  }

  bool respond(int status, std::string_view content_type, std::string body) override {
    status_ = status;
    http::response<http::string_body> res{static_cast<http::status>(status), 11};
    res.set(http::field::server, "airlock");
    if (!content_type.empty())
      res.set(http::field::content_type,
              beast::string_view(content_type.data(), content_type.size()));
    for (auto& [name, value] : headers_) res.set(name, value);
    sent_keep_alive_ = keepAlive();
    res.keep_alive(sent_keep_alive_);
    res.body() = std::move(body);
    res.prepare_payload();
    error_code ec;
    http::write(stream_, res, ec);
    if (ec) broken_ = true;
    return !ec;
  }

  bool beginStream(int status, std::string_view content_type) override {
    status_ = status;
    http::response<http::empty_body> res{static_cast<http::status>(status), 11};
    res.set(http::field::server, "airlock");
    res.set(http::field::content_type,
            beast::string_view(content_type.data(), content_type.size()));
    res.set(http::field::cache_control, "no-store");
    for (auto& [name, value] : headers_) res.set(name, value);
    sent_keep_alive_ = keepAlive();
    res.keep_alive(sent_keep_alive_);
    res.chunked(true);
    http::response_serializer<http::empty_body> sr{res};
    error_code ec;
    http::write_header(stream_, sr, ec);
    streaming_ = !ec;
    if (ec) broken_ = true;
    return !ec;
  }

  bool writeStream(std::string_view chunk) override {
    if (!streaming_ || broken_) return false;
    if (chunk.empty()) return true;
    error_code ec;
    net::write(stream_, http::make_chunk(net::const_buffer(chunk.data(), chunk.size())), ec);
    if (ec) broken_ = true;
    return !ec;
  }

  bool endStream() override {
    if (!streaming_ || broken_) return false;
    streaming_ = false;
    error_code ec;
    net::write(stream_, http::make_chunk_last(), ec);
    if (ec) broken_ = true;
    return !ec;
  }

  void abortStream() override {
    streaming_ = false;
    broken_ = true;  // the connection closes without the last chunk
  }

  bool clientGone() override { return broken_ || stream_.peerGone(); }
  int status() const override { return status_; }

  bool broken() const { return broken_; }
  // Whether the connection may serve another request: the answer said keep-alive and went out
  // whole. The rest of an unread (small) body is skipped by the caller.
  bool reusable() const { return sent_keep_alive_ && !broken_; }
  void closeAfterResponse() { keep_alive_ = false; }

 private:
  // Keep the connection only when what is left of the request body can be skipped: none, or a
  // small one with a known length that the client is already sending (not waiting for 100).
  bool keepAlive() const {
    return keep_alive_ && !broken_ && (parser_.is_done() || (skippable_ && !expect_continue_));
  }

  sandbox::SResult<size_t> bodyError(const error_code& ec) {
    broken_ = true;
    if (ec == net::error::timed_out) {
      return sandbox::serviceError(sandbox::ErrorCode::kBadRequest,
                                   "request body: no data within the I/O timeout");
    }
    return sandbox::serviceError(sandbox::ErrorCode::kBadRequest, "request body: " + ec.message());
  }

  FdStream& stream_;
  beast::flat_buffer& buffer_;
  Parser& parser_;
  bool keep_alive_;
  bool expect_continue_;
  bool skippable_;
  bool sent_keep_alive_ = false;
  bool streaming_ = false;
  bool broken_ = false;
  int status_ = 0;
  std::vector<std::pair<std::string, std::string>> headers_;
};

std::string rejectionResponse(int status, const char* reason, sandbox::ErrorCode code,
                              const std::string& message) {
  std::string body = errorBody(sandbox::ServiceError{code, message});
  return "HTTP/1.1 " + std::to_string(status) + " " + reason +
         "\r\nServer: airlock\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

}  // namespace

struct Server::Impl {
  sandbox::Service& service;
  ServerOptions options;
  TokenTable tokens;
  HttpMetrics metrics;
  Dispatcher dispatcher;
  std::optional<UnixListener> unix_listener;
  std::optional<TcpListener> tcp_listener;
  UniqueFd stop_fd;   // stop(): every wait ends
  UniqueFd drain_fd;  // drain(): acceptors end
  std::vector<std::thread> acceptors;

  std::atomic<bool> draining{false};
  std::atomic<bool> stopped{false};
  mutable std::mutex mu;
  std::condition_variable cv;
  size_t live_connections = 0;  // connection threads running
  size_t in_flight = 0;         // requests between header and end of answer
  uint64_t next_connection_id = 1;
  std::mutex lifecycle_mu;  // serializes drain() and stop()
  bool listeners_closed = false;

  Impl(sandbox::Service& s, ServerOptions o, TokenTable t)
      : service(s),
        options(std::move(o)),
        tokens(std::move(t)),
        dispatcher(
            service, tokens, metrics,
            HandlerLimits{options.max_json_body, options.max_upload_bytes, options.stream_poll}) {}

  void log(const std::string& line) {
    if (options.log) options.log(line);
  }

  void acceptLoop(int listen_fd, bool tcp) {
    while (true) {
      pollfd p[3] = {
          {listen_fd, POLLIN, 0}, {stop_fd.get(), POLLIN, 0}, {drain_fd.get(), POLLIN, 0}};
      int rc = poll(p, 3, -1);
      if (rc < 0 && errno == EINTR) continue;
      if (rc < 0 || p[1].revents != 0 || p[2].revents != 0) return;
      int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE) {
          log(std::string("accept: ") + Error::errnoName(errno) + "; pausing");
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        continue;
      }
      UniqueFd conn(fd);
      uint64_t id = 0;
      {
        std::lock_guard lock(mu);
        if (live_connections >= options.max_connections) {
          id = 0;
        } else {
          ++live_connections;
          id = next_connection_id++;
        }
      }
      if (id == 0) {
        rejectConnection(std::move(conn));
        continue;
      }
      metrics.connectionOpened();
      try {
        // The thread takes the fd only once it exists, so a failed start leaves it ours.
        std::thread(&Impl::connectionThread, this, conn.get(), tcp, id).detach();
        (void)conn.release();
      } catch (const std::system_error& e) {
        // No thread to be had (EAGAIN): answer like a full server rather than end the acceptor.
        log(std::string("api: cannot start a connection thread: ") + e.what());
        metrics.connectionClosed();
        {
          std::lock_guard lock(mu);
          --live_connections;
        }
        cv.notify_all();
        rejectConnection(std::move(conn));
      }
    }
  }

  // Over max_connections: answer 429 from the acceptor without reading the request, and close.
  void rejectConnection(UniqueFd conn) {
    metrics.rejectConnection();
    static const std::string kResponse =
        rejectionResponse(429, "Too Many Requests", sandbox::ErrorCode::kTooManyRequests,
                          "too many connections to the supervisor; retry later");
    (void)send(conn.get(), kResponse.data(), kResponse.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(conn.get(), SHUT_WR);
    char sink[4096];
    while (recv(conn.get(), sink, sizeof sink, MSG_DONTWAIT) > 0) {
    }
  }

  void describePeer(int fd, bool tcp, uint64_t id) {
    if (!options.log) return;
    if (tcp) {
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      char host[INET6_ADDRSTRLEN] = "?";
      if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) == 0) {
        const void* addr =
            ss.ss_family == AF_INET
                ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&ss)->sin_addr)
                : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr);
        inet_ntop(ss.ss_family, addr, host, sizeof host);
      }
      log("api: connection " + std::to_string(id) + " from tcp " + host);
      return;
    }
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
      log("api: connection " + std::to_string(id) + " from pid " + std::to_string(cred.pid) +
          " uid " + std::to_string(cred.uid) + " gid " + std::to_string(cred.gid));
    }
  }

  void connectionThread(int fd, bool tcp, uint64_t id) {
    UniqueFd conn(fd);
    try {
      describePeer(conn.get(), tcp, id);
      serveConnection(conn.get(), tcp);
    } catch (const std::exception& e) {
      log("api: connection " + std::to_string(id) + ": " + e.what());
    } catch (...) {
      log("api: connection " + std::to_string(id) + ": unknown exception");
    }
    conn.reset();
    metrics.connectionClosed();
    std::unique_lock lock(mu);
    --live_connections;
    // Notifies after this thread is fully gone, so stop() may free Impl right after waking.
    std::notify_all_at_thread_exit(cv, std::move(lock));
  }

  void serveConnection(int fd, bool tcp) {
    FdStream stream(fd, stop_fd.get(), options.io_timeout);
    beast::flat_buffer buffer(kReadBufferLimit);
    // While draining, open connections still get answers (503, and /healthz saying so), each
    // with Connection: close.
    while (!stopped.load()) {
      Parser parser;
      limitRequestParser(parser);
      stream.expectRequest(Clock::now() + options.idle_timeout);
      error_code ec;
      http::read_header(stream, buffer, parser, ec);
      stream.requestStarted();
      if (ec) {
        if (ec == http::error::end_of_stream || ec == net::error::eof ||
            ec == net::error::operation_aborted || ec == net::error::timed_out ||
            ec == net::error::connection_reset || buffer.size() == 0) {
          return;  // the client left or went idle, or the server is stopping
        }
        int status = ec == http::error::header_limit ? 431 : 400;
        std::string msg = rejectionResponse(
            status, status == 431 ? "Request Header Fields Too Large" : "Bad Request",
            sandbox::ErrorCode::kBadRequest, "malformed HTTP request: " + ec.message());
        error_code ignored;
        net::write(stream, net::buffer(msg), ignored);
        metrics.observe("unknown", status, 0);
        return;
      }

      auto start = Clock::now();
      {
        std::lock_guard lock(mu);
        ++in_flight;
      }
      RequestHead head = readRequestHead(parser, tcp);
      const Request& req = head.request;
      bool expect_continue = head.expect_continue;
      bool keep_alive = head.keep_alive;

      BeastExchange ex(stream, buffer, parser, keep_alive && !draining.load(), expect_continue);
      std::string label;
      try {
        label = dispatcher.handle(req, ex, draining.load());
      } catch (const std::exception& e) {
        log(std::string("api: ") + req.method + " " + req.path + ": " + e.what());
        if (ex.status() == 0) {
          ex.closeAfterResponse();
          ex.respond(500, "application/json",
                     errorBody({sandbox::ErrorCode::kInternal,
                                std::string("internal error: ") + e.what()}));
        }
      }
      if (ex.status() == 0 && !ex.broken()) {
        ex.respond(500, "application/json",
                   errorBody({sandbox::ErrorCode::kInternal, "the handler sent no answer"}));
      }
      double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      metrics.observe(label.empty() ? "unknown" : label, ex.status(), seconds);
      {
        std::lock_guard lock(mu);
        --in_flight;
      }
      cv.notify_all();
      if (!ex.reusable()) return;
      if (!parser.is_done()) {
        char sink[8192];
        while (!parser.is_done()) {
          auto n = ex.readBody(sink, sizeof sink);
          if (!n || *n == 0) break;
        }
        if (!parser.is_done()) return;
      }
    }
  }

  void closeListeners() {
    if (listeners_closed) return;
    listeners_closed = true;
    uint64_t one = 1;
    (void)!write(drain_fd.get(), &one, sizeof one);
    for (auto& t : acceptors) t.join();
    acceptors.clear();
    if (unix_listener) {
      unlinkUnixListener(options.socket_path, *unix_listener);
      unix_listener->fd.reset();
    }
    if (tcp_listener) tcp_listener->fd.reset();
  }
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { stop(); }

Result<std::unique_ptr<Server>> Server::start(sandbox::Service& service, ServerOptions options) {
  if (options.socket_path.empty()) return fail("server options: socket_path is required");
  if (options.max_connections == 0) return fail("server options: max_connections must be > 0");
  auto tokens = TokenTable::create(options.token_sha256_to_tenant);
  if (!tokens) return Unexpected(std::move(tokens.error()).wrap("server tokens"));
  if (!options.tcp_listen.empty() && tokens->empty()) {
    return fail("a TCP listener needs at least one bearer token", options.tcp_listen);
  }
  auto impl = std::make_unique<Impl>(service, std::move(options), std::move(*tokens));
  impl->stop_fd = UniqueFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  impl->drain_fd = UniqueFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!impl->stop_fd || !impl->drain_fd) return sysError("eventfd", "api server");

  auto unix_listener =
      listenUnix(impl->options.socket_path, impl->options.socket_mode, impl->options.socket_group);
  if (!unix_listener) return Unexpected(std::move(unix_listener.error()).wrap("api socket"));
  impl->unix_listener = std::move(*unix_listener);
  if (!impl->options.tcp_listen.empty()) {
    auto tcp = listenTcpLoopback(impl->options.tcp_listen);
    if (!tcp) {
      unlinkUnixListener(impl->options.socket_path, *impl->unix_listener);
      return Unexpected(std::move(tcp.error()).wrap("api tcp listener"));
    }
    impl->tcp_listener = std::move(*tcp);
  }
  Impl* raw = impl.get();
  raw->acceptors.emplace_back(&Impl::acceptLoop, raw, raw->unix_listener->fd.get(), false);
  if (raw->tcp_listener) {
    raw->acceptors.emplace_back(&Impl::acceptLoop, raw, raw->tcp_listener->fd.get(), true);
  }
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

bool Server::drain(std::chrono::milliseconds timeout) {
  Impl& s = *impl_;
  std::lock_guard lifecycle(s.lifecycle_mu);
  s.draining.store(true);
  s.closeListeners();
  std::unique_lock lock(s.mu);
  return s.cv.wait_for(lock, timeout, [&] { return s.in_flight == 0; });
}

void Server::stop() {
  Impl& s = *impl_;
  std::lock_guard lifecycle(s.lifecycle_mu);
  s.draining.store(true);
  s.closeListeners();
  if (!s.stopped.exchange(true)) {
    uint64_t one = 1;
    (void)!write(s.stop_fd.get(), &one, sizeof one);
  }
  std::unique_lock lock(s.mu);
  s.cv.wait(lock, [&] { return s.live_connections == 0; });
}

bool Server::draining() const { return impl_->draining.load(); }

size_t Server::connections() const {
  std::lock_guard lock(impl_->mu);
  return impl_->live_connections;
}

uint16_t Server::tcpPort() const { return impl_->tcp_listener ? impl_->tcp_listener->port : 0; }

const std::string& Server::socketPath() const { return impl_->options.socket_path; }

}  // namespace airlock::api
