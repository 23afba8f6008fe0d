#include "http_client.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <airlock/plugin.hpp>
#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cstring>
#include <functional>
#include <limits>

namespace airlock::transfer_http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using airlock::sdk::PluginError;
using error_code = boost::system::error_code;

constexpr size_t kChunk = 64 * 1024;
constexpr uint32_t kHeaderLimit = 64 * 1024;

std::string inQuotes(std::string_view s) { return "'" + std::string(s) + "'"; }
std::string ms(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

std::string endpointText(const tcp::endpoint& ep) {
  const std::string a = ep.address().to_string();
  return (ep.address().is_v6() ? "[" + a + "]" : a) + ":" + std::to_string(ep.port());
}

// What a server wrote as its reason phrase, fit for a message.
std::string reasonOf(std::string_view reason) {
  std::string out;
  for (char c : reason.substr(0, 100))
    if (c >= 0x20 && c < 0x7f) out += c;
  return out;
}

std::string_view sv(beast::string_view s) { return {s.data(), s.size()}; }

std::string statusText(unsigned status, beast::string_view reason) {
  std::string s = "HTTP " + std::to_string(status);
  const std::string r = reasonOf(sv(reason));
  return r.empty() ? s : s + " " + r;
}

int errnoOf(const error_code& ec) {
  if (ec == beast::error::timeout) return ETIMEDOUT;
  if (ec.category() == boost::system::system_category() && ec.value() > 0) return ec.value();
  return EIO;
}

bool isIpv4Literal(const std::string& host) {
  in_addr a{};
  return inet_pton(AF_INET, host.c_str(), &a) == 1;
}

// One connection, plain or TLS.
class Connection {
 public:
  Connection(asio::io_context& ioc, ssl::context* tls) {
    if (tls != nullptr)
      tls_.emplace(ioc, *tls);
    else
      plain_.emplace(ioc);
  }
  beast::tcp_stream& tcp() { return tls_ ? tls_->next_layer() : *plain_; }
  beast::ssl_stream<beast::tcp_stream>* tls() { return tls_ ? &*tls_ : nullptr; }
  // Calls f with the stream the HTTP layer reads and writes.
  template <class F>
  void visit(F&& f) {
    if (tls_)
      f(*tls_);
    else
      f(*plain_);
  }
  beast::flat_buffer buffer;  // bytes read past the last parse

 private:
  std::optional<beast::tcp_stream> plain_;
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls_;
};

// One transfer's io_context, TLS context, connection and deadline. Its operations run
// synchronously (await) until a Download's body is pumped from its own thread.
class Session {
 public:
  Session(const Rules& rules, std::string display)
      : rules_(rules), display_(std::move(display)), deadline_(ioc_) {}

  asio::io_context& ioc() { return ioc_; }
  Connection& conn() { return *conn_; }
  const Rules& rules() const { return rules_; }
  const std::string& display() const { return display_; }
  bool deadlineHit() const { return deadline_hit_; }

  // transfer.http.timeout_ms counts from here; when it passes, the connection is closed (the
  // pending operation fails) and on_deadline runs.
  void armDeadline() {
    if (rules_.timeout.count() == 0) return;
    deadline_.expires_after(rules_.timeout);
    deadline_.async_wait([this](const error_code& ec) {
      if (ec) return;
      deadline_hit_ = true;
      closeConnection();
      if (on_deadline_) on_deadline_();
    });
  }
  void cancelDeadline() { deadline_.cancel(); }
  // What else the deadline ends (a Download's pump), besides the connection.
  void onDeadline(std::function<void()> f) { on_deadline_ = std::move(f); }

  void closeConnection() {
    if (conn_) conn_->tcp().close();
  }

  // The idle timeout for the next operation on the connection.
  void idle() {
    if (rules_.idle_timeout.count() != 0)
      conn_->tcp().expires_after(rules_.idle_timeout);
    else
      conn_->tcp().expires_never();
  }

  // Starts one asynchronous operation and runs the io_context until it completes.
  template <class Start>
  error_code await(Start&& start) {
    bool done = false;
    error_code result;
    // The io_context stops whenever it runs out of work (no deadline, between operations).
    if (ioc_.stopped()) ioc_.restart();
    start([&done, &result](const error_code& ec, std::size_t = 0) {
      result = ec;
      done = true;
    });
    while (!done) {
      if (ioc_.run_one() == 0) {
        // Out of work with the operation still pending cannot happen; never spin on it.
        if (!done) return asio::error::operation_aborted;
      }
    }
    return result;
  }

  // Why an operation failed, naming the rule when a limit ended it.
  std::string describe(const error_code& ec, const std::string& doing, bool connecting) const {
    if (deadline_hit_)
      return "the transfer took longer than transfer.http.timeout_ms (" + ms(rules_.timeout) + ")";
    if (ec == beast::error::timeout)
      return connecting ? doing + ": no answer within transfer.http.connect_timeout_ms (" +
                              ms(rules_.connect_timeout) + ")"
                        : doing + ": nothing received or sent for transfer.http.idle_timeout_ms (" +
                              ms(rules_.idle_timeout) + ")";
    return doing + ": " + ec.message();
  }

  [[noreturn]] void fail(const std::string& context, const error_code& ec, const std::string& doing,
                         bool connecting = false) const {
    throw PluginError(deadline_hit_ ? ETIMEDOUT : errnoOf(ec),
                      context + describe(ec, doing, connecting));
  }

  // Connects to the first of `endpoints` that answers, then does the TLS handshake for https.
  void connect(const std::vector<tcp::endpoint>& endpoints, const Url& url,
               const std::string& context) {
    ssl::context* tls = url.tls() ? &tlsContext(context) : nullptr;
    std::string last_error;
    error_code last_ec;
    for (const auto& ep : endpoints) {
      conn_ = std::make_unique<Connection>(ioc_, tls);
      if (rules_.connect_timeout.count() != 0) conn_->tcp().expires_after(rules_.connect_timeout);
      last_ec = await([&](auto handler) { conn_->tcp().async_connect(ep, handler); });
      if (!last_ec) break;
      last_error = describe(last_ec, "connecting to " + endpointText(ep), true);
      if (deadline_hit_) break;
    }
    if (last_ec)
      throw PluginError(deadline_hit_ ? ETIMEDOUT : errnoOf(last_ec), context + last_error);
    if (tls != nullptr) handshake(url, context);
  }

  // Sends a request without a body.
  void request(const Url& url, const std::string& authorization, const std::string& context) {
    http::request<http::empty_body> req{http::verb::get, url.target(), 11};
    setHeaders(req, url, authorization);
    idle();
    const error_code ec = await([&](auto handler) {
      conn_->visit([&](auto& stream) { http::async_write(stream, req, handler); });
    });
    if (ec) fail(context, ec, "sending the request");
  }

  template <class Request>
  static void setHeaders(Request& req, const Url& url, const std::string& authorization) {
    req.set(http::field::host, url.authority());
    req.set(http::field::user_agent, kUserAgent);
    req.set(http::field::accept, "*/*");
    req.set(http::field::connection, "close");  // one request per connection
    if (!authorization.empty()) req.set(http::field::authorization, authorization);
  }

  // Reads a response header into `parser`, skipping interim (1xx) responses.
  template <class Body>
  error_code readHeader(std::optional<http::response_parser<Body>>& parser) {
    for (;;) {
      parser.emplace();
      parser->header_limit(kHeaderLimit);
      // The caller enforces max_bytes with its own message. Not boost::none: Boost 1.74 compares
      // a Content-Length with a disabled limit as greater, and fails every sized body.
      parser->body_limit(std::numeric_limits<std::uint64_t>::max());
      idle();
      const error_code ec = await([&](auto handler) {
        conn_->visit([&](auto& stream) {
          http::async_read_header(stream, conn_->buffer, *parser, handler);
        });
      });
      if (ec) return ec;
      const unsigned status = parser->get().result_int();
      if (status < 100 || status >= 200 || status == 101) return {};
    }
  }

 private:
  ssl::context& tlsContext(const std::string& context) {
    if (tls_) return *tls_;
    tls_.emplace(ssl::context::tls_client);
    SSL_CTX_set_min_proto_version(tls_->native_handle(), TLS1_2_VERSION);
    // Verification is not a rule: there is no way to turn it off.
    tls_->set_verify_mode(ssl::verify_peer);
    error_code ec;
    tls_->set_default_verify_paths(ec);
    if (!rules_.ca_file.empty()) {
      tls_->load_verify_file(rules_.ca_file, ec);
      if (ec) {
        tls_.reset();
        throw PluginError(EINVAL, context + "transfer.http.ca_file " + inQuotes(rules_.ca_file) +
                                      ": cannot load it: " + sslError(ec));
      }
    }
    return *tls_;
  }

  static std::string sslError(const error_code& ec) {
    std::string m = ec.message();
    if (m.empty()) m = "error " + std::to_string(ec.value());
    return m;
  }

  void handshake(const Url& url, const std::string& context) {
    auto& stream = *conn_->tls();
    SSL* ssl = stream.native_handle();
    if (url.ipv6_literal || isIpv4Literal(url.host)) {
      // No SNI for addresses (RFC 6066); the certificate must name the address.
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), url.host.c_str());
    } else {
      SSL_set_tlsext_host_name(ssl, url.host.c_str());
      SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      SSL_set1_host(ssl, url.host.c_str());
    }
    if (rules_.connect_timeout.count() != 0) conn_->tcp().expires_after(rules_.connect_timeout);
    const error_code ec =
        await([&](auto handler) { stream.async_handshake(ssl::stream_base::client, handler); });
    if (!ec) return;
    const long verify = SSL_get_verify_result(ssl);
    if (verify != X509_V_OK && !deadline_hit_ && ec != beast::error::timeout)
      throw PluginError(
          EPERM,
          context + "TLS certificate verification failed for " + inQuotes(url.host) + ": " +
              X509_verify_cert_error_string(verify) +
              (rules_.ca_file.empty() ? " (trusted: the system's CAs)"
                                      : " (trusted: the system's CAs and transfer.http.ca_file)"));
    fail(context, ec, "the TLS handshake with " + inQuotes(url.host), true);
  }

  Rules rules_;
  std::string display_;
  asio::io_context ioc_;             // first: everything below uses it
  std::optional<ssl::context> tls_;  // before conn_: its streams use it
  std::unique_ptr<Connection> conn_;
  asio::steady_timer deadline_;
  bool deadline_hit_ = false;
  std::function<void()> on_deadline_;
};

std::string redirectContext(const std::string& display, const Url& hop) {
  return inQuotes(display) + ": redirect to " + inQuotes(hop.display()) + ": ";
}

bool isRedirect(unsigned status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

}  // namespace

std::vector<tcp::endpoint> checkedEndpoints(const Rules& rules, const Url& url,
                                            const std::string& context) {
  if (!allowed(rules.allow, url))
    throw PluginError(EACCES, context + "not allowed by transfer.http.allow");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(url.host.c_str(), nullptr, &hints, &found);
  if (rc != 0) {
    const std::string why = rc == EAI_SYSTEM ? std::strerror(errno) : gai_strerror(rc);
    throw PluginError(rc == EAI_SYSTEM ? errno : EHOSTUNREACH,
                      context + "cannot resolve " + inQuotes(url.host) + ": " + why);
  }
  std::vector<tcp::endpoint> endpoints;
  std::string refused;
  for (const addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    IpAddress address;
    if (ai->ai_family == AF_INET) {
      const auto* sin = reinterpret_cast<const sockaddr_in*>(ai->ai_addr);
      address = asio::ip::address_v4(ntohl(sin->sin_addr.s_addr));
    } else if (ai->ai_family == AF_INET6) {
      const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(ai->ai_addr);
      asio::ip::address_v6::bytes_type bytes{};
      std::memcpy(bytes.data(), &sin6->sin6_addr, bytes.size());
      address = asio::ip::address_v6(bytes, sin6->sin6_scope_id);
    } else {
      continue;
    }
    address = unmapped(address);  // connect to what the mapped address reaches
    if (const ProtectedRange* range = rules.addresses.refuses(address)) {
      if (refused.empty())
        refused = address.to_string() + " is in protected range " + range->cidr.text + " (" +
                  range->why + ")";
      continue;
    }
    const tcp::endpoint ep(address, url.port);
    if (std::find(endpoints.begin(), endpoints.end(), ep) == endpoints.end())
      endpoints.push_back(ep);
  }
  ::freeaddrinfo(found);
  if (endpoints.empty())
    throw PluginError(EACCES, context + (refused.empty() ? "no address" : refused));
  return endpoints;
}

// ---------------------------------------------------------------------------------------------

struct Download::Impl {
  Impl(const Rules& rules, std::string display, uint64_t max)
      : session(rules, std::move(display)), max_bytes(max) {}

  Session session;  // first: destroyed last, after the sockets that use its io_context
  uint64_t max_bytes;
  std::optional<http::response_parser<http::buffer_body>> parser;
  std::optional<asio::local::stream_protocol::socket> out;
  std::vector<char> chunk = std::vector<char>(kChunk);
  uint64_t bytes = 0;
  bool ended = false;  // the whole body reached the reader
  std::string error;
  std::atomic<bool> stopped{false};

  void open(std::string_view location);
  void readMore();
  void onRead(error_code ec);
  void watchReader();
  void end(std::string failure);
};

void Download::Impl::open(std::string_view location) {
  const std::string& display = session.display();
  const std::string first_context = inQuotes(display) + ": ";
  Url url;
  try {
    url = parseUrl(location);
  } catch (const std::invalid_argument& e) {
    throw PluginError(EINVAL, first_context + "not a usable http(s) URL: " + e.what());
  }
  std::string authorization =
      url.has_userinfo ? basicAuthorization(url.user, url.password) : std::string();
  session.armDeadline();
  for (int hop = 0;; ++hop) {
    const std::string context = hop == 0 ? first_context : redirectContext(display, url);
    session.connect(checkedEndpoints(session.rules(), url, context), url, context);
    session.request(url, authorization, context);
    if (const error_code ec = session.readHeader(parser))
      session.fail(context, ec, "reading the response header");
    const auto& res = parser->get();
    const unsigned status = res.result_int();
    const auto location_field = res.find(http::field::location);
    if (isRedirect(status) && location_field != res.end()) {
      const std::string_view target = sv(location_field->value());
      const std::string answer = statusText(status, res.reason());
      if (session.rules().redirects == 0)
        throw PluginError(EACCES, context + "the server redirects (" + answer + ") to " +
                                      inQuotes(redact(target)) +
                                      ", and transfer.http.redirects is 0");
      if (hop >= session.rules().redirects)
        throw PluginError(ELOOP, context + "more than " +
                                     std::to_string(session.rules().redirects) +
                                     " redirects (transfer.http.redirects)");
      Url next;
      try {
        next = resolveReference(url, target);
      } catch (const std::invalid_argument& e) {
        throw PluginError(EINVAL, context + "a redirect (" + answer + ") to " +
                                      inQuotes(redact(target)) + ": " + e.what());
      }
      if (url.tls() && !next.tls())
        throw PluginError(EACCES, inQuotes(display) + ": redirect to " + inQuotes(next.display()) +
                                      ": refused, a downgrade from https to http");
      // Credentials go only where the user sent them: the same origin, or the redirect's own.
      if (next.has_userinfo)
        authorization = basicAuthorization(next.user, next.password);
      else if (!next.sameOrigin(url))
        authorization.clear();
      session.closeConnection();
      url = std::move(next);
      continue;
    }
    if (status < 200 || status >= 300)
      throw PluginError(status == 404 ? ENOENT : EIO, context + statusText(status, res.reason()));
    break;
  }
  if (const auto length = parser->content_length(); length && max_bytes != 0 && *length > max_bytes)
    throw PluginError(EFBIG, first_context + std::to_string(*length) +
                                 " bytes (Content-Length), more than the transfer limit of " +
                                 std::to_string(max_bytes) + " bytes");
}

void Download::Impl::readMore() {
  auto& body = parser->get().body();
  body.data = chunk.data();
  body.size = chunk.size();
  session.idle();
  session.conn().visit([this](auto& stream) {
    http::async_read_some(stream, session.conn().buffer, *parser,
                          [this](error_code ec, std::size_t) { onRead(ec); });
  });
}

void Download::Impl::onRead(error_code ec) {
  if (ec == http::error::need_buffer) ec = {};
  if (ec) {
    if (ec == http::error::partial_message || ec == asio::error::eof ||
        ec == ssl::error::stream_truncated)
      return end("the server closed the connection after " + std::to_string(bytes) +
                 " bytes, before the end of the body");
    return end(session.describe(ec, "reading the body", false));
  }
  const size_t n = chunk.size() - parser->get().body().size;
  bytes += n;
  if (max_bytes != 0 && bytes > max_bytes)
    return end("more than the transfer limit of " + std::to_string(max_bytes) + " bytes");
  if (n == 0) {
    if (parser->is_done()) return end("");
    return readMore();
  }
  asio::async_write(*out, asio::buffer(chunk.data(), n), [this](error_code wec, std::size_t) {
    if (wec == asio::error::operation_aborted && session.deadlineHit()) return;
    if (wec)
      return end(wec == asio::error::broken_pipe || wec == asio::error::connection_reset
                     ? "the reader closed the stream before its end"
                     : "writing to the reader: " + wec.message());
    if (parser->is_done()) return end("");
    readMore();
  });
}

// The reader (the host) closing its end early ends the download at once, even while the
// server is silent.
void Download::Impl::watchReader() {
  out->async_wait(asio::socket_base::wait_read, [this](const error_code& ec) {
    if (ec) return;
    end("the reader closed the stream before its end");
  });
}

// Ends the pump: closes the connection and the reader's stream (EOF there), cancels the
// deadline, so the io_context runs out of work.
void Download::Impl::end(std::string failure) {
  if (ended || !error.empty()) return;
  if (failure.empty())
    ended = true;
  else
    error = std::move(failure);
  session.cancelDeadline();
  session.closeConnection();
  error_code ignored;
  out->close(ignored);
}

Download::Download(const Rules& rules, std::string_view location, uint64_t max_bytes)
    : impl_(std::make_unique<Impl>(rules, redact(location), max_bytes)) {
  impl_->open(location);
}

Download::~Download() = default;

const std::string& Download::display() const { return impl_->session.display(); }

std::optional<uint64_t> Download::contentLength() const {
  const auto length = impl_->parser->content_length();
  return length ? std::optional<uint64_t>(*length) : std::nullopt;
}

std::string Download::pump(int fd) {
  Impl& d = *impl_;
  error_code ec;
  d.out.emplace(d.session.ioc());
  d.out->assign(asio::local::stream_protocol(), fd, ec);
  if (ec) {
    ::close(fd);
    return "the reader's stream: " + ec.message();
  }
  // From here the deadline also ends the pump (its own message, the reader sees EOF).
  d.session.onDeadline([&d] { d.end(d.session.describe({}, "", false)); });
  if (d.parser->is_done()) {
    d.end("");
  } else {
    d.watchReader();
    d.readMore();
  }
  // Restart first, then check the flag: a stop() after the check still stops run().
  d.session.ioc().restart();
  if (!d.stopped) d.session.ioc().run();
  d.session.closeConnection();
  d.out->close(ec);
  if (d.ended) return "";
  if (!d.error.empty()) return d.error;
  return "stopped before the end of the body";
}

void Download::stop() {
  impl_->stopped = true;
  impl_->session.ioc().stop();
}

// ---------------------------------------------------------------------------------------------

struct Upload::Impl {
  Rules rules;
  std::string display;
  Url url;
  std::vector<tcp::endpoint> endpoints;
};

Upload::Upload(const Rules& rules, std::string_view location)
    : impl_(std::make_unique<Impl>(Impl{rules, redact(location), {}, {}})) {
  const std::string context = inQuotes(impl_->display) + ": ";
  try {
    impl_->url = parseUrl(location);
  } catch (const std::invalid_argument& e) {
    throw PluginError(EINVAL, context + "not a usable http(s) URL: " + e.what());
  }
  impl_->endpoints = checkedEndpoints(rules, impl_->url, context);
}

Upload::~Upload() = default;

const std::string& Upload::display() const { return impl_->display; }
const Url& Upload::url() const { return impl_->url; }

void Upload::send(int fd, uint64_t size) {
  const Impl& u = *impl_;
  const std::string context = inQuotes(u.display) + ": ";
  Session session(u.rules, u.display);
  session.armDeadline();
  session.connect(u.endpoints, u.url, context);

  http::request<http::empty_body> req;
  req.method_string(u.rules.method_out);
  req.target(u.url.target());
  req.version(11);
  Session::setHeaders(req, u.url,
                      u.url.has_userinfo ? basicAuthorization(u.url.user, u.url.password) : "");
  // Presigned URLs need the length up front: no chunked uploads.
  req.set(http::field::content_length, std::to_string(size));
  // No Content-Type: some signed URLs sign it (GCS V2), and an unsigned one would not match.
  http::request_serializer<http::empty_body> serializer(req);
  session.idle();
  error_code write_ec = session.await([&](auto handler) {
    session.conn().visit(
        [&](auto& stream) { http::async_write_header(stream, serializer, handler); });
  });
  std::vector<char> chunk(kChunk);
  for (uint64_t off = 0; !write_ec && off < size;) {
    const ssize_t n = ::pread(fd, chunk.data(), std::min<uint64_t>(chunk.size(), size - off),
                              static_cast<off_t>(off));
    if (n <= 0) {
      const int e = n < 0 ? errno : EIO;
      throw PluginError(e, context + "reading the spooled archive: " +
                               (n < 0 ? std::strerror(e) : "shorter than it was"));
    }
    session.idle();
    write_ec = session.await([&](auto handler) {
      session.conn().visit([&](auto& stream) {
        asio::async_write(stream, asio::buffer(chunk.data(), static_cast<size_t>(n)), handler);
      });
    });
    off += static_cast<uint64_t>(n);
  }
  // A server may refuse before the body is all sent (a 403, a 413) and close: its answer
  // explains more than the write's error, so read it either way.
  std::optional<http::response_parser<http::empty_body>> parser;
  const error_code read_ec = session.deadlineHit() ? error_code(asio::error::operation_aborted)
                                                   : session.readHeader(parser);
  if (read_ec) {
    if (write_ec) session.fail(context, write_ec, "sending the archive");
    session.fail(context, read_ec, "reading the answer to the upload");
  }
  const auto& res = parser->get();
  const unsigned status = res.result_int();
  if (status >= 300 && status < 400) {
    const auto loc = res.find(http::field::location);
    throw PluginError(EACCES, context + "the server answered " + statusText(status, res.reason()) +
                                  (loc == res.end() ? std::string()
                                                    : " to " + inQuotes(redact(sv(loc->value())))) +
                                  "; uploads follow no redirects");
  }
  if (status < 200 || status >= 300)
    throw PluginError(EIO, context + "the upload was refused: " + statusText(status, res.reason()));
  if (write_ec) session.fail(context, write_ec, "sending the archive");
}

}  // namespace airlock::transfer_http
