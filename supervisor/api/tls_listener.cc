#include "supervisor/api/tls_listener.h"

#include <openssl/ssl.h>
#include <sys/socket.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <future>
#include <map>
#include <set>
#include <thread>

namespace airlock::api {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using boost::system::error_code;
using Tcp = net::ip::tcp;

namespace {

constexpr size_t kRelayBuffer = 16 * 1024;

std::string sslErrorText(const error_code& ec) {
  std::string text = ec.message();
  // OpenSSL's queue often says more ("no such file", "key values mismatch").
  if (unsigned long e = ERR_get_error(); e != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    text += " (";
    text += buf;
    text += ")";
  }
  ERR_clear_error();
  return text;
}

Result<std::unique_ptr<ssl::context>> makeContext(const TlsOptions& o) {
  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_server);
  error_code ec;
  // TLS 1.2 and 1.3 only; no compression, no renegotiation, the server's cipher order.
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                       ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                       ssl::context::no_compression,
                   ec);
  SSL_CTX* native = ctx->native_handle();
  if (SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION) != 1) {
    return fail("TLS: cannot require TLS 1.2 or later");
  }
  SSL_CTX_set_options(native, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  ctx->use_certificate_chain_file(o.cert_file, ec);
  if (ec)
    return fail("server.tls_cert: cannot load the certificate chain: " + sslErrorText(ec),
                o.cert_file);
  ctx->use_private_key_file(o.key_file, ssl::context::pem, ec);
  if (ec)
    return fail("server.tls_key: cannot load the private key: " + sslErrorText(ec), o.key_file);
  if (SSL_CTX_check_private_key(native) != 1) {
    ERR_clear_error();
    return fail("server.tls_key does not match the certificate of server.tls_cert", o.key_file);
  }
  if (!o.client_ca_file.empty()) {
    ctx->load_verify_file(o.client_ca_file, ec);
    if (ec)
      return fail("server.tls_client_ca: cannot load the CA bundle: " + sslErrorText(ec),
                  o.client_ca_file);
    // Tells clients which CAs to pick a certificate for.
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(o.client_ca_file.c_str())) {
      SSL_CTX_set_client_CA_list(native, names);
    }
    ERR_clear_error();
    // A client without a certificate, or with one the CA did not sign, fails the handshake.
    ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert, ec);
    if (ec) return fail("TLS: cannot require client certificates: " + ec.message());
    // A client that resumes a session (HAProxy does, to every fleet node) needs a session id
    // context once peers are verified; without one OpenSSL fails the handshake ("session id
    // context uninitialized"). Resumption keeps the verified certificate of the first one.
    static constexpr unsigned char kSessionContext[] = "airlock-api";
    if (SSL_CTX_set_session_id_context(native, kSessionContext, sizeof kSessionContext - 1) != 1)
      return fail("TLS: cannot set the session id context");
  }
  return ctx;
}

}  // namespace

struct TlsTerminator::Impl {
  class Relay;

  TlsOptions options;
  Deliver deliver;
  Log log_fn;
  std::unique_ptr<ssl::context> ctx;
  net::io_context ioc;
  Tcp::acceptor acceptor{ioc};
  std::thread thread;
  // All below only on the io thread (one thread, so no strands).
  size_t handshakes = 0;
  std::map<std::string, size_t> handshakes_of;  // by client address
  std::set<std::shared_ptr<Relay>> relays;      // every connection, handshaking or relaying
  bool accepting = true;
  bool stopped = false;

  void log(const std::string& line) {
    if (log_fn) log_fn(line);
  }
  void accept();
};

// One client connection: its TLS stream, and after the handshake the socketpair end it relays to.
class TlsTerminator::Impl::Relay : public std::enable_shared_from_this<Relay> {
 public:
  Relay(Impl& owner, Tcp::socket socket, std::string address)
      : owner_(owner),
        address_(std::move(address)),
        tls_(std::move(socket), *owner.ctx),
        plain_(owner.ioc),
        handshake_timer_(owner.ioc),
        to_client_timer_(owner.ioc),
        to_server_timer_(owner.ioc) {}

  void start() {
    ++owner_.handshakes;
    ++owner_.handshakes_of[address_];
    handshaking_ = true;
    handshake_timer_.expires_after(owner_.options.handshake_timeout);
    handshake_timer_.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec) self->close();  // too slow: cut it (slowloris on the handshake)
    });
    tls_.async_handshake(ssl::stream_base::server,
                         [self = shared_from_this()](error_code ec) { self->onHandshake(ec); });
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    endHandshake();
    error_code ignored;
    handshake_timer_.cancel();
    to_client_timer_.cancel();
    to_server_timer_.cancel();
    tls_.lowest_layer().close(ignored);
    plain_.close(ignored);
    owner_.relays.erase(shared_from_this());
  }

 private:
  void endHandshake() {
    if (!handshaking_) return;
    handshaking_ = false;
    --owner_.handshakes;
    if (--owner_.handshakes_of[address_] == 0) owner_.handshakes_of.erase(address_);
  }

  void onHandshake(error_code ec) {
    handshake_timer_.cancel();
    endHandshake();
    if (closed_) return;
    if (ec) {
      owner_.log("api: tls " + address_ + ": handshake failed: " + sslErrorText(ec));
      return close();
    }
    // The server stopped taking connections while this one shook hands: it must not arrive after
    // the server's last look at its connections.
    if (!owner_.accepting) return close();
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) != 0) {
      owner_.log("api: tls " + address_ + ": socketpair: " + Error::errnoName(errno));
      return close();
    }
    UniqueFd ours(fds[0]), theirs(fds[1]);
    plain_.assign(net::local::stream_protocol(), ours.get(), ec);
    if (ec) return close();
    (void)ours.release();  // plain_ owns it now
    owner_.deliver(std::move(theirs), "tls " + address_);
    pumpToServer();
    pumpToClient();
  }

  // Client → server: decrypted bytes into the socketpair.
  void pumpToServer() {
    tls_.async_read_some(net::buffer(up_), [self = shared_from_this()](error_code ec, size_t n) {
      if (self->closed_) return;
      if (ec) {
        // The client is done (close_notify, EOF or an error): the server sees its end of input.
        error_code ignored;
        self->plain_.shutdown(net::socket_base::shutdown_send, ignored);
        self->client_done_ = true;
        if (self->server_done_) self->close();
        return;
      }
      self->armWriteTimer(self->to_server_timer_);
      net::async_write(self->plain_, net::buffer(self->up_.data(), n),
                       [self](error_code ec, size_t) {
                         self->to_server_timer_.cancel();
                         if (self->closed_) return;
                         if (ec) return self->close();
                         self->pumpToServer();
                       });
    });
  }

  // Server → client: answers out through TLS. When the server ends the connection, so does the
  // relay: close_notify, then close.
  void pumpToClient() {
    plain_.async_read_some(net::buffer(down_),
                           [self = shared_from_this()](error_code ec, size_t n) {
                             if (self->closed_) return;
                             if (ec) {
                               self->server_done_ = true;
                               self->armWriteTimer(self->to_client_timer_);
                               self->tls_.async_shutdown([self](error_code) { self->close(); });
                               return;
                             }
                             self->armWriteTimer(self->to_client_timer_);
                             net::async_write(self->tls_, net::buffer(self->down_.data(), n),
                                              [self](error_code ec, size_t) {
                                                self->to_client_timer_.cancel();
                                                if (self->closed_) return;
                                                if (ec) return self->close();
                                                self->pumpToClient();
                                              });
                           });
  }

  // A write that makes no progress for io_timeout ends the connection (a client that stopped
  // reading, a server end that is gone).
  void armWriteTimer(net::steady_timer& timer) {
    timer.expires_after(owner_.options.io_timeout);
    timer.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec) self->close();
    });
  }

  Impl& owner_;
  const std::string address_;
  ssl::stream<Tcp::socket> tls_;
  net::local::stream_protocol::socket plain_;
  net::steady_timer handshake_timer_;
  net::steady_timer to_client_timer_;
  net::steady_timer to_server_timer_;
  std::array<char, kRelayBuffer> up_{};
  std::array<char, kRelayBuffer> down_{};
  bool handshaking_ = false;
  bool client_done_ = false;
  bool server_done_ = false;
  bool closed_ = false;
};

void TlsTerminator::Impl::accept() {
  acceptor.async_accept([this](error_code ec, Tcp::socket socket) {
    if (!accepting || stopped) return;
    if (ec) {
      if (ec == net::error::operation_aborted) return;
      log("api: tls accept: " + ec.message());
      // Out of descriptors and the like: a short pause keeps the loop from spinning.
      auto pause = std::make_shared<net::steady_timer>(ioc, std::chrono::milliseconds(50));
      pause->async_wait([this, pause](error_code) { accept(); });
      return;
    }
    error_code aec;
    auto endpoint = socket.remote_endpoint(aec);
    std::string address = aec ? "?" : endpoint.address().to_string();
    if (relays.size() >= options.max_connections || handshakes >= options.max_handshakes ||
        handshakes_of[address] >= options.max_handshakes_per_client) {
      if (handshakes_of[address] == 0) handshakes_of.erase(address);
      log("api: tls " + address + ": over the connection or handshake limit; closed");
      socket.close(aec);  // nothing to answer in: HTTP has not started
    } else {
      socket.set_option(Tcp::no_delay(true), aec);
      auto relay = std::make_shared<Relay>(*this, std::move(socket), address);
      relays.insert(relay);
      relay->start();
    }
    accept();
  });
}

TlsTerminator::TlsTerminator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

TlsTerminator::~TlsTerminator() { stop(); }

Result<std::unique_ptr<TlsTerminator>> TlsTerminator::start(UniqueFd listener, TlsOptions options,
                                                            Deliver deliver, Log log) {
  auto impl = std::make_unique<Impl>();
  auto ctx = makeContext(options);
  if (!ctx) return Unexpected(ctx.error());
  impl->ctx = std::move(*ctx);
  impl->options = std::move(options);
  impl->deliver = std::move(deliver);
  impl->log_fn = std::move(log);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(listener.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return sysError("getsockname", "tls listener");
  }
  error_code ec;
  impl->acceptor.assign(ss.ss_family == AF_INET6 ? Tcp::v6() : Tcp::v4(), listener.get(), ec);
  if (ec) return fail("tls listener: " + ec.message());
  (void)listener.release();
  Impl& s = *impl;
  net::post(s.ioc, [&s] { s.accept(); });
  s.thread = std::thread([&s] { s.ioc.run(); });
  return std::unique_ptr<TlsTerminator>(new TlsTerminator(std::move(impl)));
}

void TlsTerminator::stopAccepting() {
  Impl& s = *impl_;
  if (!s.thread.joinable()) return;
  std::promise<void> done;
  net::post(s.ioc, [&s, &done] {
    s.accepting = false;
    error_code ignored;
    s.acceptor.close(ignored);
    done.set_value();
  });
  done.get_future().wait();
}

void TlsTerminator::stop() {
  Impl& s = *impl_;
  if (!s.thread.joinable()) return;
  net::post(s.ioc, [&s] {
    s.stopped = true;
    s.accepting = false;
    error_code ignored;
    s.acceptor.close(ignored);
    auto relays = s.relays;  // close() erases from the set
    for (const auto& r : relays) r->close();
    s.ioc.stop();
  });
  s.thread.join();
}

}  // namespace airlock::api
