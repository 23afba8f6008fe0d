#include "supervisor/api/server.h"

#include <arpa/inet.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

#include "supervisor/api/admission.h"
#include "supervisor/api/auth.h"
#include "supervisor/api/blocking_exchange.h"
#include "supervisor/api/handlers.h"
#include "supervisor/api/http_metrics.h"
#include "supervisor/api/http_request.h"
#include "supervisor/api/listeners.h"
#include "supervisor/api/response_encoding.h"
#include "supervisor/api/tls_listener.h"
#include "supervisor/log/log.h"
#include "supervisor/mcp/http_transport.h"

namespace airlock::api {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;
using detail::BlockingExchange;
using detail::FdStream;
using Strand = net::strand<net::io_context::executor_type>;
using Socket = net::basic_stream_socket<net::generic::stream_protocol, Strand>;

constexpr size_t kReadBufferLimit = 64 * 1024;
// After an answer that closes the connection, what the client still sends is read and dropped
// for this long (at most kLingerBytes), so TCP does not reset the connection and discard the
// answer before the client reads it.
constexpr auto kLinger = std::chrono::seconds(1);
constexpr size_t kLingerBytes = 256 * 1024;
// Connections accepted in one go before other work on the io thread gets a turn.
constexpr int kAcceptBatch = 64;

// A whole HTTP/1.1 response as bytes.
std::string wireResponse(int status, std::string_view content_type,
                         const std::vector<std::pair<std::string, std::string>>& headers,
                         const std::string& body, bool keep_alive) {
  auto reason = http::obsolete_reason(static_cast<http::status>(status));
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " +
                    std::string(reason.data(), reason.size()) + "\r\nServer: airlock\r\n";
  if (!content_type.empty()) out += "Content-Type: " + std::string(content_type) + "\r\n";
  for (const auto& [name, value] : headers) out += name + ": " + value + "\r\n";
  out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  out += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return out + body;
}

// A refusal the server answers before any handler runs: JSON error body, Connection: close.
std::string refusalResponse(int status, const std::string& message) {
  sandbox::ErrorCode code = status == 429   ? sandbox::ErrorCode::kTooManyRequests
                            : status == 503 ? sandbox::ErrorCode::kUnavailable
                                            : sandbox::ErrorCode::kBadRequest;
  std::vector<std::pair<std::string, std::string>> headers;
  if (status == 429 || status == 503) headers.emplace_back("Retry-After", "1");
  return wireResponse(status, "application/json", headers,
                      errorBody(sandbox::ServiceError{code, message}), false);
}

// An Exchange that keeps its answer in memory, for requests answered on the io_context
// (GET /healthz): nothing on it may block, and it has no body to read.
class BufferedExchange final : public Exchange {
 public:
  explicit BufferedExchange(bool keep_alive) : keep_alive_(keep_alive) {}
  sandbox::SResult<size_t> readBody(char*, size_t) override { return size_t{0}; }
  void setHeader(std::string name, std::string value) override {
    headers_.emplace_back(std::move(name), std::move(value));
  }
  bool respond(int status, std::string_view content_type, std::string body) override {
    status_ = status;
    wire_ = wireResponse(status, content_type, headers_, body, keep_alive_);
    return true;
  }
  bool beginStream(int, std::string_view) override { return false; }
  bool writeStream(std::string_view) override { return false; }
  bool endStream() override { return false; }
  void abortStream() override {}
  bool clientGone() override { return false; }
  int status() const override { return status_; }

  bool keepAlive() const { return keep_alive_; }
  std::string& wire() { return wire_; }

 private:
  bool keep_alive_;
  int status_ = 0;
  std::string wire_;
  std::vector<std::pair<std::string, std::string>> headers_;
};

// "uid 1000" for a Unix socket peer (its credentials at connect time), "tcp 127.0.0.1" for TCP.
// A uid and not a pid: processes of one uid can act for each other anyway, and a pid is free to
// multiply.
struct Peer {
  std::string client;
  std::string description;  // for the log
};

Peer peerOf(int fd, const sockaddr_storage& ss, bool tcp) {
  if (tcp) {
    char host[INET6_ADDRSTRLEN] = "?";
    const void* addr =
        ss.ss_family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr)
            : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr);
    inet_ntop(ss.ss_family, addr, host, sizeof host);
    return {std::string("tcp ") + host, std::string("tcp ") + host};
  }
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return {"uid ?", "unix"};
  return {"uid " + std::to_string(cred.uid), "pid " + std::to_string(cred.pid) + " uid " +
                                                 std::to_string(cred.uid) + " gid " +
                                                 std::to_string(cred.gid)};
}

}  // namespace

struct Server::Impl {
  class Connection;
  // One listening socket, waited on by the io_context; accept4 itself sets close-on-exec.
  struct Acceptor {
    Acceptor(net::io_context& ioc, int fd, bool from_tcp)
        : strand(net::make_strand(ioc)), descriptor(strand, fd), pause(strand), tcp(from_tcp) {}
    Strand strand;
    net::posix::basic_stream_descriptor<Strand> descriptor;
    net::basic_waitable_timer<Clock, net::wait_traits<Clock>, Strand> pause;
    bool tcp;
  };

  sandbox::Service& service;
  ServerOptions options;
  TokenTable tokens;
  HttpMetrics metrics;
  Dispatcher dispatcher;
  mcp::HttpTransport mcp;  // /mcp: MCP's Streamable HTTP transport
  Admission admission;
  std::optional<UnixListener> unix_listener;
  std::optional<TcpListener> tcp_listener;
  std::unique_ptr<TlsTerminator> tls;  // owns the TCP listener when TLS is configured
  UniqueFd stop_fd;                    // stop(): every blocking wait on a request thread ends

  net::io_context ioc;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::vector<std::thread> io_threads;
  std::vector<std::unique_ptr<Acceptor>> acceptors;

  std::atomic<bool> draining{false};
  std::atomic<bool> stopped{false};
  std::atomic<uint64_t> next_connection_id{1};
  mutable std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, std::weak_ptr<Connection>> open;  // every connection not yet destroyed
  // Request threads are joined, never detached: a thread that has finished its work may still be
  // exiting, and stop() must not free what it touches before it is gone.
  std::map<uint64_t, std::thread> threads;
  std::vector<uint64_t> finished_threads;  // done with their work, to be joined
  uint64_t next_thread_id = 1;
  size_t request_threads = 0;  // started and not yet done
  size_t in_flight = 0;        // requests from header to the end of their answer
  std::mutex lifecycle_mu;     // serializes drain() and stop()
  bool listeners_closed = false;

  Impl(sandbox::Service& s, ServerOptions o, TokenTable t)
      : service(s),
        options(std::move(o)),
        tokens(std::move(t)),
        dispatcher(
            service, tokens, metrics,
            HandlerLimits{options.max_json_body, options.max_upload_bytes, options.stream_poll}),
        mcp(tokens,
            mcp::HttpTransportOptions{options.socket_path, options.mcp_max_sessions_per_tenant,
                                      options.mcp_session_idle_timeout, options.max_json_body,
                                      options.node}),
        admission(AdmissionLimits{options.max_connections, options.max_connections_per_client,
                                  options.max_requests, options.max_requests_per_client}) {}

  void log(const std::string& line) {
    if (options.log) options.log(line);
  }

  void requestStarted() {
    std::lock_guard lock(mu);
    ++in_flight;
  }
  void requestEnded() {
    {
      std::lock_guard lock(mu);
      --in_flight;
    }
    cv.notify_all();
  }

  void armAccept(Acceptor& a) {
    a.descriptor.async_wait(net::posix::descriptor_base::wait_read, [this, &a](error_code ec) {
      if (!ec && !draining.load()) acceptReady(a);
    });
  }

  void acceptReady(Acceptor& a) {
    for (int i = 0; i < kAcceptBatch; ++i) {
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      int fd = accept4(a.descriptor.native_handle(), reinterpret_cast<sockaddr*>(&ss), &len,
                       SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) {
        admit(UniqueFd(fd), ss, a.tcp);
        continue;
      }
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: pausing keeps the acceptor from spinning on a socket that stays
        // readable; connections wait in the backlog meanwhile.
        log(std::string("api: accept: ") + Error::errnoName(errno) + "; pausing 50 ms");
        a.pause.expires_after(std::chrono::milliseconds(50));
        a.pause.async_wait([this, &a](error_code ec) {
          if (!ec && !draining.load()) armAccept(a);
        });
        return;
      }
      break;  // EAGAIN: the backlog is empty
    }
    armAccept(a);
  }

  // Joins the request threads that are done.
  void reapThreads() {
    std::vector<std::thread> done;
    {
      std::lock_guard lock(mu);
      for (uint64_t id : finished_threads) {
        auto it = threads.find(id);
        done.push_back(std::move(it->second));
        threads.erase(it);
      }
      finished_threads.clear();
    }
    for (auto& t : done) t.join();
  }

  void admit(UniqueFd fd, const sockaddr_storage& ss, bool tcp);
  // A connection handed in rather than accepted: `fd` is a Unix socket, `peer` who is really at
  // the other end (a TLS client through the terminator). Treated as TCP: tokens are required.
  void admitPeer(UniqueFd fd, const Peer& peer, int family, int protocol, bool tcp);
  void refuse(UniqueFd fd, int status, const std::string& message);
  void evict(uint64_t id);
  std::vector<std::shared_ptr<Connection>> liveConnections();
  void closeListeners();
};

// One client connection. Its socket, timer and state are touched only on its strand, except
// while a request thread answers on it (busy_): then that thread alone uses the socket's fd,
// and the strand does nothing with it until the thread posts afterRequest().
class Server::Impl::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Impl& server, uint64_t id, std::string client, bool tcp)
      : server_(server),
        id_(id),
        client_(std::move(client)),
        tcp_(tcp),
        strand_(net::make_strand(server.ioc)),
        socket_(strand_),
        timer_(strand_),
        buffer_(kReadBufferLimit) {}

  ~Connection() {
    release();
    {
      std::lock_guard lock(server_.mu);
      server_.open.erase(id_);
    }
    server_.cv.notify_all();
  }

  Socket& socket() { return socket_; }
  uint64_t id() const { return id_; }

  void start() {
    net::dispatch(strand_, [self = shared_from_this()] { self->waitForRequest(); });
  }

  // From any thread. Closes the connection now, or after the request being answered on it.
  // `hard`: also break that request (stop()), else let it finish (drain(), eviction).
  void closeSoon(bool hard) {
    net::post(strand_, [self = shared_from_this(), hard] {
      if (!self->busy_) return self->close();
      self->close_after_request_ = true;
      if (hard) ::shutdown(self->socket_.native_handle(), SHUT_RDWR);
    });
  }

 private:
  enum class State { kWaiting, kHeader, kAnswering, kWriting, kLingering, kClosed };

  // Keep-alive: wait, without a thread, for the next request's first byte.
  void waitForRequest() {
    if (state_ == State::kClosed) return;
    // While draining, an open connection still gets answers (503, /healthz saying so), each
    // with Connection: close.
    if (close_after_request_) return close();
    if (buffer_.size() > 0) return readHeader();  // pipelined: already here
    state_ = State::kWaiting;
    armTimer(server_.options.idle_timeout);
    socket_.async_wait(Socket::wait_read, [self = shared_from_this()](error_code ec) {
      self->disarmTimer();
      if (self->state_ == State::kClosed) return;
      if (ec) return self->close();
      self->readHeader();
    });
  }

  void readHeader() {
    state_ = State::kHeader;
    parser_.emplace();
    limitRequestParser(*parser_);
    armTimer(server_.options.header_timeout);
    http::async_read_header(socket_, buffer_, *parser_,
                            [self = shared_from_this()](error_code ec, size_t) {
                              self->disarmTimer();
                              if (self->state_ == State::kClosed) return;
                              self->onHeader(ec);
                            });
  }

  void onHeader(error_code ec) {
    if (ec) {
      if (ec == http::error::end_of_stream || ec == net::error::eof ||
          ec == net::error::operation_aborted || ec == net::error::connection_reset ||
          buffer_.size() == 0) {
        return close();  // the client left, or its time ran out
      }
      int status = ec == http::error::header_limit ? 431 : 400;
      server_.metrics.observe("unknown", status, 0);
      return writeThenClose(refusalResponse(status, "malformed HTTP request: " + ec.message()));
    }
    RequestHead head = readRequestHead(*parser_, tcp_);
    if (head.request.method == "GET" && head.request.path == "/healthz" && parser_->is_done()) {
      return answerHere(std::move(head));
    }
    Admit admit = server_.admission.beginRequest(id_);
    if (!admit.admitted) {
      if (admit.status == 0) return close();  // evicted while its header arrived
      server_.metrics.reject(admit.status);
      return writeThenClose(refusalResponse(admit.status, admit.refusal));
    }
    answerOnThread(std::move(head));
  }

  // GET /healthz, answered on the io_context so it answers while request threads are all taken.
  void answerHere(RequestHead head) {
    auto start = Clock::now();
    server_.requestStarted();
    BufferedExchange ex(head.keep_alive && !server_.draining.load());
    if (!server_.options.node.empty()) ex.setHeader("X-Airlock-Node", server_.options.node);
    std::string label = server_.dispatcher.handle(head.request, ex, server_.draining.load());
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    server_.metrics.observe(label, ex.status(), seconds);
    server_.requestEnded();
    server_.admission.used(id_);
    bool keep = ex.keepAlive();
    write(std::move(ex.wire()), keep);
  }

  void answerOnThread(RequestHead head) {
    state_ = State::kAnswering;
    busy_ = true;
    server_.reapThreads();
    std::unique_lock lock(server_.mu);
    const uint64_t thread_id = server_.next_thread_id++;
    ++server_.request_threads;
    ++server_.in_flight;
    try {
      // Started under the lock, so the thread cannot report itself done before it is listed.
      server_.threads.emplace(thread_id, std::thread(&Connection::requestThread, shared_from_this(),
                                                     std::move(head), thread_id));
    } catch (const std::system_error& e) {
      // No thread to be had (EAGAIN): answer like a full server.
      --server_.request_threads;
      lock.unlock();
      server_.log(std::string("api: cannot start a request thread: ") + e.what());
      server_.requestEnded();
      server_.admission.endRequest(id_);
      busy_ = false;
      server_.metrics.reject(503);
      writeThenClose(refusalResponse(503,
                                     "the supervisor cannot start a thread for this "
                                     "request; retry later"));
    }
  }

  // A request thread's body. `self` is this thread's reference, dropped before the thread
  // reports itself done, so its connection is never destroyed after stop() has returned.
  static void requestThread(std::shared_ptr<Connection> self, RequestHead head,
                            uint64_t thread_id) {
    Impl& server = self->server_;
    bool reusable = self->answer(head);
    server.admission.endRequest(self->id_);
    server.requestEnded();
    net::post(self->strand_, [self, reusable] { self->afterRequest(reusable); });
    self.reset();
    {
      std::lock_guard lock(server.mu);
      --server.request_threads;
      server.finished_threads.push_back(thread_id);
    }
    server.cv.notify_all();
  }

  // On the request thread: dispatches and answers. True when the connection may carry another
  // request.
  bool answer(const RequestHead& head) {
    const Request& req = head.request;
    auto start = Clock::now();
    FdStream stream(socket_.native_handle(), server_.stop_fd.get(), server_.options.io_timeout);
    BlockingExchange ex(stream, buffer_, *parser_, head.keep_alive && !server_.draining.load(),
                        head.expect_continue);
    // Which fleet node answered: a proxy's client (and the fleet test) can tell.
    if (!server_.options.node.empty()) ex.setHeader("X-Airlock-Node", server_.options.node);
    std::string label;
    try {
      label = req.path == "/mcp" ? server_.mcp.handle(req, ex, server_.draining.load())
                                 : server_.dispatcher.handle(req, ex, server_.draining.load());
    } catch (const std::exception& e) {
      // A port link's path is its credential: logged without the token.
      const std::string path =
          req.path.starts_with("/v1/ports/") ? std::string("/v1/ports/<token>/...") : req.path;
      server_.log(std::string("api: ") + req.method + " " + path + ": " + e.what());
      if (ex.status() == 0) {
        ex.closeAfterResponse();
        ex.respond(
            500, "application/json",
            errorBody({sandbox::ErrorCode::kInternal, std::string("internal error: ") + e.what()}));
      }
    }
    if (ex.status() == 0 && !ex.broken()) {
      ex.respond(500, "application/json",
                 errorBody({sandbox::ErrorCode::kInternal, "the handler sent no answer"}));
    }
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    server_.metrics.observe(label.empty() ? "unknown" : label, ex.status(), seconds);
    // The route pattern, not the path: a port link's path is its credential.
    log::info("api.request", {{"method", req.method},
                              {"route", label.empty() ? "unknown" : label},
                              {"tenant", ex.log_tenant},
                              {"status", ex.status()},
                              {"ms", seconds * 1000},
                              {"bytes_out", ex.bytesOut()},
                              {"connection", id_}});
    if (!ex.reusable()) return false;
    // Skip what is left of a small unread body to keep the connection.
    char sink[8192];
    while (!parser_->is_done()) {
      auto n = ex.readBody(sink, sizeof sink);
      if (!n || *n == 0) break;
    }
    return parser_->is_done();
  }

  void afterRequest(bool reusable) {
    busy_ = false;
    if (!reusable) return close();
    waitForRequest();
  }

  void write(std::string wire, bool keep_alive) {
    state_ = State::kWriting;
    out_ = std::move(wire);
    armTimer(server_.options.io_timeout);
    net::async_write(socket_, net::buffer(out_),
                     [self = shared_from_this(), keep_alive](error_code ec, size_t) {
                       self->disarmTimer();
                       if (self->state_ == State::kClosed) return;
                       if (ec) return self->close();
                       if (!keep_alive) return self->linger();
                       self->waitForRequest();
                     });
  }
  void writeThenClose(std::string wire) { write(std::move(wire), false); }

  // The answer is out and the connection ends: stop sending, then read and drop what the
  // client still sends for a moment, so the close does not reset the connection under an
  // answer the client has not read yet.
  void linger() {
    state_ = State::kLingering;
    error_code ec;
    socket_.shutdown(net::socket_base::shutdown_send, ec);
    if (ec) return close();
    armTimer(kLinger);
    lingerRead();
  }
  void lingerRead() {
    socket_.async_read_some(net::buffer(scratch_),
                            [self = shared_from_this()](error_code ec, size_t n) {
                              if (self->state_ == State::kClosed) return;
                              self->lingered_ += n;
                              if (ec || self->lingered_ >= kLingerBytes) return self->close();
                              self->lingerRead();
                            });
  }

  void close() {
    if (state_ == State::kClosed) return;
    state_ = State::kClosed;
    disarmTimer();
    error_code ec;
    socket_.close(ec);
    release();
  }

  // The connection's place in the admission table and the metrics, given back once.
  void release() {
    if (released_) return;
    released_ = true;
    server_.admission.closeConnection(id_);
    server_.metrics.connectionClosed();
  }

  // A deadline for what the connection waits for now: when it passes, the connection closes,
  // which cancels the wait. The generation makes a timer that fired just as it was disarmed
  // harmless.
  void armTimer(std::chrono::milliseconds after) {
    uint64_t generation = ++timer_generation_;
    timer_.expires_after(after);
    timer_.async_wait([self = shared_from_this(), generation](error_code ec) {
      if (ec || generation != self->timer_generation_) return;
      self->close();
    });
  }
  void disarmTimer() {
    ++timer_generation_;
    timer_.cancel();
  }

  Impl& server_;
  const uint64_t id_;
  const std::string client_;
  const bool tcp_;
  Strand strand_;
  Socket socket_;
  net::basic_waitable_timer<Clock, net::wait_traits<Clock>, Strand> timer_;
  beast::flat_buffer buffer_;
  std::optional<RequestParser> parser_;
  std::string out_;
  std::array<char, 4096> scratch_{};
  size_t lingered_ = 0;
  uint64_t timer_generation_ = 0;
  State state_ = State::kWaiting;
  bool busy_ = false;  // a request thread owns the socket
  bool close_after_request_ = false;
  bool released_ = false;
};

void Server::Impl::admit(UniqueFd fd, const sockaddr_storage& ss, bool tcp) {
  Peer peer = peerOf(fd.get(), ss, tcp);
  admitPeer(std::move(fd), peer, ss.ss_family, tcp ? IPPROTO_TCP : 0, tcp);
}

void Server::Impl::admitPeer(UniqueFd fd, const Peer& peer, int family, int protocol, bool tcp) {
  uint64_t id = next_connection_id.fetch_add(1);
  Admit verdict = admission.openConnection(id, peer.client);
  if (!verdict.admitted) return refuse(std::move(fd), verdict.status, verdict.refusal);
  if (verdict.evict != 0) evict(verdict.evict);

  metrics.connectionOpened();
  auto conn = std::make_shared<Connection>(*this, id, peer.client, tcp);
  error_code ec;
  conn->socket().assign(net::generic::stream_protocol(family, protocol), fd.get(), ec);
  if (ec) {
    log("api: connection " + std::to_string(id) + ": " + ec.message());
    return;  // fd closes here; the connection's destructor gives back its place
  }
  (void)fd.release();
  {
    std::lock_guard lock(mu);
    open[id] = conn;
  }
  log::debug("api.connection", {{"connection", id}, {"peer", peer.description}});
  conn->start();
}

// Over a limit with nothing to evict: answer from the acceptor without reading the request,
// and close. The socket is fresh, so the short answer fits its send buffer.
void Server::Impl::refuse(UniqueFd fd, int status, const std::string& message) {
  metrics.reject(status);
  std::string response = refusalResponse(status, message);
  (void)send(fd.get(), response.data(), response.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  shutdown(fd.get(), SHUT_WR);
  char sink[4096];
  while (recv(fd.get(), sink, sizeof sink, MSG_DONTWAIT) > 0) {
  }
}

void Server::Impl::evict(uint64_t id) {
  std::shared_ptr<Connection> victim;
  {
    std::lock_guard lock(mu);
    if (auto it = open.find(id); it != open.end()) victim = it->second.lock();
  }
  metrics.evicted();
  if (victim) victim->closeSoon(false);
}

std::vector<std::shared_ptr<Server::Impl::Connection>> Server::Impl::liveConnections() {
  std::vector<std::shared_ptr<Connection>> out;
  std::lock_guard lock(mu);
  for (auto& [id, weak] : open)
    if (auto c = weak.lock()) out.push_back(std::move(c));
  return out;
}

void Server::Impl::closeListeners() {
  if (listeners_closed) return;
  listeners_closed = true;
  // Each acceptor is touched only on its strand: cancel there and wait for it.
  for (auto& a : acceptors) {
    std::promise<void> done;
    net::post(a->strand, [&a, &done] {
      error_code ec;
      a->pause.cancel();
      a->descriptor.cancel(ec);
      (void)a->descriptor.release();  // the listener's UniqueFd closes it
      done.set_value();
    });
    done.get_future().wait();
  }
  if (unix_listener) {
    unlinkUnixListener(options.socket_path, *unix_listener);
    unix_listener->fd.reset();
  }
  if (tcp_listener) tcp_listener->fd.reset();
  if (tls) tls->stopAccepting();
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { stop(); }

Result<std::unique_ptr<Server>> Server::start(sandbox::Service& service, ServerOptions options) {
  if (options.socket_path.empty()) return fail("server options: socket_path is required");
  for (auto [name, value] : {std::pair{"max_connections", options.max_connections},
                             {"max_connections_per_client", options.max_connections_per_client},
                             {"max_requests", options.max_requests},
                             {"max_requests_per_client", options.max_requests_per_client},
                             {"io_threads", options.io_threads}}) {
    if (value == 0) return fail(std::string("server options: ") + name + " must be > 0");
  }
  auto tokens = TokenTable::create(options.token_sha256_to_tenant);
  if (!tokens) return Unexpected(std::move(tokens.error()).wrap("server tokens"));
  if (!options.tcp_listen.empty() && tokens->empty()) {
    return fail("a TCP listener needs at least one bearer token", options.tcp_listen);
  }
  auto impl = std::make_unique<Impl>(service, std::move(options), std::move(*tokens));
  impl->stop_fd = UniqueFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!impl->stop_fd) return sysError("eventfd", "api server");

  auto unix_listener =
      listenUnix(impl->options.socket_path, impl->options.socket_mode, impl->options.socket_group);
  if (!unix_listener) return Unexpected(std::move(unix_listener.error()).wrap("api socket"));
  impl->unix_listener = std::move(*unix_listener);
  if (!impl->options.tcp_listen.empty()) {
    auto tcp = listenTcp(impl->options.tcp_listen, !impl->options.tls_cert.empty());
    if (!tcp) {
      unlinkUnixListener(impl->options.socket_path, *impl->unix_listener);
      return Unexpected(std::move(tcp.error()).wrap("api tcp listener"));
    }
    impl->tcp_listener = std::move(*tcp);
  }
  Impl& s = *impl;
  if (s.tcp_listener && !s.options.tls_cert.empty()) {
    // The handshake shares the header's deadline; handshake counts keep TlsOptions' defaults.
    TlsOptions tls;
    tls.cert_file = s.options.tls_cert;
    tls.key_file = s.options.tls_key;
    tls.client_ca_file = s.options.tls_client_ca;
    tls.max_connections = s.options.max_connections;
    tls.handshake_timeout = s.options.header_timeout;
    tls.io_timeout = s.options.io_timeout;
    auto terminator = TlsTerminator::start(
        std::move(s.tcp_listener->fd), std::move(tls),
        [&s](UniqueFd fd, std::string client) {
          s.admitPeer(std::move(fd), Peer{client, client}, AF_UNIX, 0, true);
        },
        s.options.log);
    if (!terminator) {
      unlinkUnixListener(s.options.socket_path, *s.unix_listener);
      return Unexpected(std::move(terminator.error()).wrap("api tcp listener"));
    }
    s.tls = std::move(*terminator);
  }
  s.acceptors.push_back(std::make_unique<Impl::Acceptor>(s.ioc, s.unix_listener->fd.get(), false));
  if (s.tcp_listener && !s.tls) {
    s.acceptors.push_back(std::make_unique<Impl::Acceptor>(s.ioc, s.tcp_listener->fd.get(), true));
  }
  for (auto& a : s.acceptors) {
    Impl::Acceptor& acceptor = *a;
    net::post(acceptor.strand, [&s, &acceptor] { s.armAccept(acceptor); });
  }
  s.work.emplace(s.ioc.get_executor());
  for (size_t i = 0; i < s.options.io_threads; ++i) {
    s.io_threads.emplace_back([&s] { s.ioc.run(); });
  }
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

bool Server::drain(std::chrono::milliseconds timeout) {
  Impl& s = *impl_;
  std::lock_guard lifecycle(s.lifecycle_mu);
  s.draining.store(true);
  if (s.stopped.load()) return true;
  s.closeListeners();
  std::unique_lock lock(s.mu);
  return s.cv.wait_for(lock, timeout, [&] { return s.in_flight == 0; });
}

void Server::stop() {
  Impl& s = *impl_;
  std::lock_guard lifecycle(s.lifecycle_mu);
  if (s.stopped.exchange(true)) return;
  s.draining.store(true);
  s.closeListeners();
  uint64_t one = 1;
  (void)!write(s.stop_fd.get(), &one, sizeof one);
  for (auto& c : s.liveConnections()) c->closeSoon(true);
  {
    std::unique_lock lock(s.mu);
    s.cv.wait(lock, [&] { return s.request_threads == 0 && s.open.empty(); });
  }
  if (s.tls) s.tls->stop();
  s.reapThreads();
  s.work.reset();
  s.ioc.stop();
  for (auto& t : s.io_threads) t.join();
  s.io_threads.clear();
}

bool Server::draining() const { return impl_->draining.load(); }

size_t Server::connections() const {
  std::lock_guard lock(impl_->mu);
  return impl_->open.size();
}

size_t Server::requestThreads() const {
  std::lock_guard lock(impl_->mu);
  return impl_->request_threads;
}

uint16_t Server::tcpPort() const { return impl_->tcp_listener ? impl_->tcp_listener->port : 0; }

const std::string& Server::socketPath() const { return impl_->options.socket_path; }

}  // namespace airlock::api
