// Proxy, its Attachments and the connections they accept (proxy.h). What a request gets is
// serving.cc's; this file owns the sockets and the threads.
#include "supervisor/packages/proxy.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <future>
#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "supervisor/api/fd_stream.h"
#include "supervisor/packages/serving.h"

namespace airlock::packages {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;
using api::detail::FdStream;

// One connection's thread; `done` tells the acceptor it may be joined without waiting.
struct Worker {
  std::thread thread;
  std::shared_ptr<std::atomic<bool>> done = std::make_shared<std::atomic<bool>>(false);
};

struct Proxy::Attachment::State {
  SandboxIdentity who;
  UniqueFd stop_fd;  // an eventfd: readable once the attachment closes
  std::atomic<uint64_t> served{0};
  std::unique_ptr<tcp::acceptor> acceptor;  // used on the io thread only
  std::unique_ptr<asio::steady_timer> retry;

  std::mutex mu;  // guards what follows
  bool closing = false, closed = false;
  std::condition_variable closed_cv;
  size_t active = 0;
  std::list<Worker> workers;
};

// What the Proxy and its Attachments share: the Proxy may go first, or an Attachment.
struct Proxy::Attachment::Owner {
  ProxyOptions options;
  std::unique_ptr<PackageService> service;
  asio::io_context ioc;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::thread io_thread;

  std::mutex mu;  // guards what follows
  bool shut_down = false;
  std::list<std::weak_ptr<State>> attachments;

  void startAccept(const std::shared_ptr<State>& st);
  void onAccepted(const std::shared_ptr<State>& st, tcp::socket socket);
  void serveConnection(State& st, UniqueFd fd);
  void close(const std::shared_ptr<State>& st);
  void shutDown();
};

namespace {

// The answer to one request, written on the connection; false when it could not be.
bool writeReply(FdStream& stream, const ProxyReply& reply, bool head, bool keep_alive) {
  error_code ec;
  auto prepare = [&](auto& res) {
    res.set(http::field::server, "airlock-packages");
    if (!reply.reason.empty()) res.reason(reply.reason);
    if (!reply.content_type.empty()) res.set(http::field::content_type, reply.content_type);
    res.set(http::field::cache_control, "no-store");
    res.keep_alive(keep_alive);
  };
  if (head) {
    http::response<http::empty_body> res{static_cast<http::status>(reply.status), 11};
    prepare(res);
    res.content_length(reply.file_path.empty() ? reply.body.size() : reply.file_size);
    http::response_serializer<http::empty_body> sr{res};
    sr.split(true);  // the header only: a HEAD answer has no body, whatever its length says
    http::write_header(stream, sr, ec);
    return !ec;
  }
  if (!reply.file_path.empty()) {
    http::response<http::file_body> res{static_cast<http::status>(reply.status), 11};
    prepare(res);
    res.body().open(reply.file_path.c_str(), beast::file_mode::scan, ec);
    if (ec) return false;
    res.prepare_payload();
    http::write(stream, res, ec);
    return !ec;
  }
  http::response<http::string_body> res{static_cast<http::status>(reply.status), 11};
  prepare(res);
  res.body() = reply.body;
  res.prepare_payload();
  http::write(stream, res, ec);
  return !ec;
}

std::string localAuthority(int fd) {
  auto port = boundPort(fd);
  return "127.0.0.1:" + std::to_string(port ? *port : 3141);
}

}  // namespace

void Proxy::Attachment::Owner::startAccept(const std::shared_ptr<State>& st) {
  st->acceptor->async_accept([this, st](const error_code& ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !st->acceptor->is_open()) return;
    if (!ec) {
      onAccepted(st, std::move(socket));
      startAccept(st);
      return;
    }
    // Out of descriptors or memory: try again shortly rather than spin or give up.
    st->retry->expires_after(std::chrono::milliseconds(100));
    st->retry->async_wait([this, st](const error_code& e) {
      if (!e && st->acceptor->is_open()) startAccept(st);
    });
  });
}

void Proxy::Attachment::Owner::onAccepted(const std::shared_ptr<State>& st, tcp::socket socket) {
  std::lock_guard lock(st->mu);
  if (st->closing) return;
  for (auto it = st->workers.begin(); it != st->workers.end();) {
    if (!*it->done) {
      ++it;
      continue;
    }
    it->thread.join();  // it has finished its work: this returns at once
    it = st->workers.erase(it);
  }
  if (st->active >= options.max_connections_per_sandbox) {
    // Answered from the io thread: a short write a fresh socket's buffer always takes.
    const ProxyReply reply = jsonReply(
        503, "airlock: too many connections to the package proxy from this sandbox (at most " +
                 std::to_string(options.max_connections_per_sandbox) + " at once)");
    auto text = std::make_shared<std::string>(
        "HTTP/1.1 503 " + reply.reason + "\r\nContent-Type: application/json\r\nContent-Length: " +
        std::to_string(reply.body.size()) + "\r\nConnection: close\r\n\r\n" + reply.body);
    auto sock = std::make_shared<tcp::socket>(std::move(socket));
    asio::async_write(*sock, asio::buffer(*text), [sock, text](const error_code&, size_t) {
      error_code ignored;
      sock->shutdown(tcp::socket::shutdown_send, ignored);
      sock->close(ignored);
    });
    return;
  }
  UniqueFd fd(socket.release());
  ++st->active;
  Worker& w = st->workers.emplace_back();
  w.thread = std::thread([this, st, fd = std::move(fd), done = w.done]() mutable {
    serveConnection(*st, std::move(fd));
    std::lock_guard lock(st->mu);
    --st->active;
    *done = true;
  });
}

void Proxy::Attachment::Owner::serveConnection(State& st, UniqueFd fd) {
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags | O_NONBLOCK) != 0) return;
  FdStream stream(fd.get(), st.stop_fd.get(), std::chrono::seconds(options.idle_timeout_s));
  const std::string fallback_host = localAuthority(fd.get());
  const SandboxSession session{st.who, st.served, st.stop_fd.get()};
  beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::empty_body> parser;
    parser.header_limit(16 * 1024);
    error_code ec;
    http::read(stream, buffer, parser, ec);
    if (ec == http::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::error::operation_aborted || ec == asio::error::timed_out ||
        ec == asio::error::connection_reset)
      break;
    if (ec) {
      // A malformed request, or one with a body: answer and close (the rest is unread).
      (void)writeReply(stream, jsonReply(400, "airlock: bad request: " + ec.message()), false,
                       false);
      break;
    }
    const auto& req = parser.get();
    const bool keep_alive = req.keep_alive();
    const bool head = req.method() == http::verb::head;
    ProxyReply reply;
    if (req.method() != http::verb::get && !head) {
      reply = jsonReply(405, "airlock: the package proxy serves only GET and HEAD");
    } else {
      ProxyRequest request;
      request.head = head;
      request.target = std::string(req.target());
      const std::string host(req[http::field::host]);
      request.host = plausibleHost(host) ? host : fallback_host;
      request.accept = std::string(req[http::field::accept]);
      reply = service->handle(request, session);
    }
    if (reply.abandon) break;
    if (!writeReply(stream, reply, head, keep_alive) || !keep_alive) break;
  }
  ::shutdown(fd.get(), SHUT_RDWR);
}

void Proxy::Attachment::Owner::close(const std::shared_ptr<State>& st) {
  {
    std::unique_lock lock(st->mu);
    if (st->closing) {
      // Someone else (the Proxy, or the Attachment) is closing it: wait until it is closed.
      st->closed_cv.wait(lock, [&] { return st->closed; });
      return;
    }
    st->closing = true;
  }
  // The acceptor belongs to the io thread; close it there (or here once that thread is gone).
  bool io_running;
  {
    std::lock_guard lock(mu);
    io_running = io_thread.joinable() && !ioc.stopped();
  }
  auto closeAcceptor = [st] {
    error_code ignored;
    st->acceptor->close(ignored);
    st->retry->cancel();
  };
  if (io_running) {
    std::promise<void> done;
    asio::post(ioc, [&] {
      closeAcceptor();
      done.set_value();
    });
    done.get_future().wait();
  } else {
    closeAcceptor();
  }
  const uint64_t one = 1;
  (void)!::write(st->stop_fd.get(), &one, sizeof one);
  std::list<Worker> workers;
  {
    std::lock_guard lock(st->mu);
    workers.swap(st->workers);
  }
  for (Worker& w : workers) w.thread.join();
  std::lock_guard lock(st->mu);
  st->closed = true;
  st->closed_cv.notify_all();
}

void Proxy::Attachment::Owner::shutDown() {
  std::list<std::weak_ptr<State>> all;
  {
    std::lock_guard lock(mu);
    if (shut_down) return;
    shut_down = true;
    all.swap(attachments);
  }
  for (auto& weak : all)
    if (auto st = weak.lock()) close(st);
  work.reset();
  ioc.stop();
  if (io_thread.joinable()) io_thread.join();
}

Result<std::shared_ptr<Proxy>> Proxy::create(ProxyOptions options, AuditSink audit) {
  if (options.timeout_s <= 0 || options.idle_timeout_s <= 0 || options.page_ttl_s < 0 ||
      options.max_connections_per_sandbox == 0)
    return fail("packages: timeouts and max_connections_per_sandbox must be positive");
  auto cache = DiskCache::open(options.cache_dir);
  if (!cache) return Unexpected(std::move(cache.error()));
  auto upstream = UpstreamClient::create(options.ca_file, std::chrono::seconds(options.timeout_s));
  if (!upstream) return Unexpected(std::move(upstream.error()));
  auto owner = std::make_shared<Attachment::Owner>();
  owner->options = options;
  owner->service = std::make_unique<PackageService>(std::move(options), std::move(audit),
                                                    std::move(*upstream), std::move(*cache));
  owner->work.emplace(owner->ioc.get_executor());
  owner->io_thread = std::thread([o = owner.get()] { o->ioc.run(); });
  return std::shared_ptr<Proxy>(new Proxy(std::move(owner)));
}

Proxy::Proxy(std::shared_ptr<Attachment::Owner> owner) : owner_(std::move(owner)) {}

Proxy::~Proxy() { owner_->shutDown(); }

Result<std::unique_ptr<Proxy::Attachment>> Proxy::attach(UniqueFd listener, SandboxIdentity who) {
  auto st = std::make_shared<Attachment::State>();
  st->who = std::move(who);
  st->stop_fd = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!st->stop_fd) return sysError("eventfd", "packages attachment");
  int type = 0;
  socklen_t len = sizeof type;
  if (::getsockopt(listener.get(), SOL_SOCKET, SO_TYPE, &type, &len) != 0)
    return sysError("getsockopt(SO_TYPE)", "packages listener");
  auto port = boundPort(listener.get());
  if (!port || type != SOCK_STREAM) return fail("packages: the listener is not a TCP socket");
  sockaddr_storage addr{};
  len = sizeof addr;
  (void)::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  const auto protocol = addr.ss_family == AF_INET6 ? tcp::v6() : tcp::v4();
  st->acceptor = std::make_unique<tcp::acceptor>(owner_->ioc);
  st->retry = std::make_unique<asio::steady_timer>(owner_->ioc);
  error_code ec;
  st->acceptor->assign(protocol, listener.get(), ec);
  if (ec) return fail("packages: cannot accept on the listener: " + ec.message());
  (void)listener.release();  // the acceptor owns it now
  {
    std::lock_guard lock(owner_->mu);
    if (owner_->shut_down) return fail("packages: the proxy is stopping");
    owner_->attachments.remove_if(
        [](const std::weak_ptr<Attachment::State>& w) { return w.expired(); });
    owner_->attachments.push_back(st);
  }
  asio::post(owner_->ioc, [o = owner_.get(), st] { o->startAccept(st); });
  return std::unique_ptr<Attachment>(new Attachment(owner_, std::move(st)));
}

Proxy::Attachment::Attachment(std::shared_ptr<Owner> owner, std::shared_ptr<State> state)
    : owner_(std::move(owner)), state_(std::move(state)) {}

Proxy::Attachment::~Attachment() { owner_->close(state_); }

uint64_t Proxy::Attachment::bytesServed() const { return state_->served.load(); }

}  // namespace airlock::packages
