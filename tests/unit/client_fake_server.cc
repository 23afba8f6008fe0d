#include "client_fake_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <limits>

#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

namespace airlock::testing {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Socket = asio::generic::stream_protocol::socket;
using ErrorCode = boost::system::error_code;

std::string lower(beast::string_view s) {
  std::string out(s.data(), s.size());
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

class BeastResponder : public Responder {
 public:
  explicit BeastResponder(Socket& s) : s_(s) {}

  void send(int status, const std::string& body, const std::string& content_type) override {
    http::response<http::string_body> res;
    res.version(11);
    res.result(static_cast<unsigned>(status));
    if (!body.empty()) res.set(http::field::content_type, content_type);
    res.body() = body;
    res.keep_alive(false);
    res.prepare_payload();
    ErrorCode ec;
    http::write(s_, res, ec);
  }

  void beginChunked(int status, const std::string& content_type) override {
    http::response<http::empty_body> res;
    res.version(11);
    res.result(static_cast<unsigned>(status));
    res.set(http::field::content_type, content_type);
    res.keep_alive(false);
    res.chunked(true);
    http::response_serializer<http::empty_body> sr{res};
    ErrorCode ec;
    http::write_header(s_, sr, ec);
  }

  void chunk(std::string_view data) override {
    ErrorCode ec;
    asio::write(s_, http::make_chunk(asio::buffer(data.data(), data.size())), ec);
  }

  void endChunked() override {
    ErrorCode ec;
    asio::write(s_, http::make_chunk_last(), ec);
  }

  void beginFixed(int status, uint64_t length, const std::string& content_type) override {
    http::response<http::empty_body> res;
    res.version(11);
    res.result(static_cast<unsigned>(status));
    res.set(http::field::content_type, content_type);
    res.keep_alive(false);
    res.content_length(length);
    http::response_serializer<http::empty_body> sr{res};
    ErrorCode ec;
    http::write_header(s_, sr, ec);
  }

  void raw(std::string_view data) override {
    ErrorCode ec;
    asio::write(s_, asio::buffer(data.data(), data.size()), ec);
  }

 private:
  Socket& s_;
};

}  // namespace

FakeServer::FakeServer(bool tcp) {
  if (tcp) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      throw std::runtime_error(std::string("fake server bind: ") + std::strerror(errno));
    port_ = ntohs(addr.sin_port);
  } else {
    socket_path_ = dir_.file("airlock.sock");
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket_path_.c_str(), sizeof addr.sun_path - 1);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
      throw std::runtime_error(std::string("fake server bind: ") + std::strerror(errno));
  }
  if (::listen(listen_fd_, 16) != 0)
    throw std::runtime_error(std::string("fake server listen: ") + std::strerror(errno));
  acceptor_ = std::thread([this] { acceptLoop(); });
}

FakeServer::~FakeServer() {
  stopping_ = true;
  ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
  acceptor_.join();
  std::vector<std::thread> conns;
  {
    std::lock_guard lock(mu_);
    conns.swap(connections_);
  }
  for (auto& t : conns) t.join();
  ::close(listen_fd_);
}

std::string FakeServer::url() const {
  return socket_path_.empty() ? "http://127.0.0.1:" + std::to_string(port_)
                              : "unix://" + socket_path_;
}

void FakeServer::on(const std::string& method, const std::string& path, Handler handler) {
  std::lock_guard lock(mu_);
  handlers_[method + " " + path] = std::move(handler);
}

void FakeServer::onBody(const std::string& method, const std::string& path, BodySink sink) {
  std::lock_guard lock(mu_);
  sinks_[method + " " + path] = std::move(sink);
}

void FakeServer::onHead(const std::string& method, const std::string& path, Handler handler) {
  std::lock_guard lock(mu_);
  head_handlers_[method + " " + path] = std::move(handler);
}

void FakeServer::json(const std::string& method, const std::string& path, int status,
                      const nlohmann::json& body) {
  on(method, path, [status, body](const RecordedRequest&, Responder& r) {
    if (status == 204)
      r.send(204, "");
    else
      r.json(status, body);
  });
}

std::vector<RecordedRequest> FakeServer::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

RecordedRequest FakeServer::last() const {
  std::lock_guard lock(mu_);
  return requests_.empty() ? RecordedRequest{} : requests_.back();
}

void FakeServer::acceptLoop() {
  for (;;) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      return;  // shut down
    }
    if (stopping_) {
      ::close(fd);
      return;
    }
    std::lock_guard lock(mu_);
    connections_.emplace_back([this, fd] { serve(fd); });
  }
}

void FakeServer::serve(int fd) {
  asio::io_context ioc;
  Socket sock(ioc);
  ErrorCode ec;
  sock.assign(asio::generic::stream_protocol(socket_path_.empty() ? AF_INET : AF_UNIX, 0), fd, ec);
  if (ec) {
    ::close(fd);
    return;
  }
  beast::flat_buffer buffer;
  http::request_parser<http::buffer_body> p;
  // Not boost::none: Beast 1.74 compares Content-Length against the empty optional and fails.
  p.body_limit(std::numeric_limits<std::uint64_t>::max());
  http::read_header(sock, buffer, p, ec);
  if (ec) return;
  RecordedRequest rec;
  rec.method = std::string(p.get().method_string());
  rec.target = std::string(p.get().target());
  rec.path = rec.target.substr(0, rec.target.find('?'));
  for (const auto& f : p.get()) rec.headers[lower(f.name_string())] = std::string(f.value());
  const std::string key = rec.method + " " + rec.path;
  Handler handler, head_handler;
  BodySink sink;
  {
    std::lock_guard lock(mu_);
    if (auto it = head_handlers_.find(key); it != head_handlers_.end()) head_handler = it->second;
    if (auto it = handlers_.find(key); it != handlers_.end()) handler = it->second;
    if (auto it = sinks_.find(key); it != sinks_.end()) sink = it->second;
  }
  BeastResponder responder(sock);
  if (head_handler) {
    {
      std::lock_guard lock(mu_);
      requests_.push_back(rec);
    }
    head_handler(rec, responder);
    sock.shutdown(Socket::shutdown_both, ec);
    return;
  }
  std::vector<char> piece(64 * 1024);
  while (!p.is_done()) {
    p.get().body().data = piece.data();
    p.get().body().size = piece.size();
    http::read_some(sock, buffer, p, ec);
    if (ec == http::error::need_buffer) ec = {};
    if (ec) break;
    size_t n = piece.size() - p.get().body().size;
    rec.body_bytes += n;
    if (sink)
      sink({piece.data(), n});
    else
      rec.body.append(piece.data(), n);
  }
  {
    std::lock_guard lock(mu_);
    requests_.push_back(rec);
  }
  if (handler)
    handler(rec, responder);
  else
    responder.error(404, "not_found", "no route " + key);
  sock.shutdown(Socket::shutdown_both, ec);
}

}  // namespace airlock::testing
