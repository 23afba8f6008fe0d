#include "supervisor/packages/upstream_client.h"

#include <fcntl.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <limits>
#include <stdexcept>
#include <vector>

#include "url.h"  // the transfer plugin's strict URL parser (plugins/transfer/http)

namespace airlock::packages {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;
using transfer_http::Url;

constexpr size_t kChunk = 64 * 1024;
constexpr int kMaxRedirects = 5;

bool isRedirect(unsigned s) { return s == 301 || s == 302 || s == 303 || s == 307 || s == 308; }

bool isIpLiteral(const std::string& host) {
  error_code ec;
  asio::ip::make_address(host, ec);
  return !ec;
}

FetchError transportError(const Url& url, const std::string& what) {
  return {FetchError::Kind::transport, "upstream '" + url.authority() + "': " + what};
}

// One request's io_context, connection and stop watch.
class Exchange {
 public:
  Exchange(ssl::context& tls, std::chrono::seconds timeout, int stop_fd)
      : tls_context_(tls), timeout_(timeout), stop_(ioc_) {
    if (stop_fd >= 0) {
      stop_.assign(::fcntl(stop_fd, F_DUPFD_CLOEXEC, 0));
      stop_.async_wait(asio::posix::stream_descriptor::wait_read, [this](const error_code& ec) {
        if (ec) return;
        stopped_ = true;
        if (plain_) plain_->close();
        if (tls_) tls_->next_layer().close();
      });
    }
  }
  bool stopped() const { return stopped_; }

  // Starts one operation and runs the io_context until it completes.
  template <class Start>
  error_code await(Start&& start) {
    bool done = false;
    error_code result;
    start([&done, &result](const error_code& ec, auto&&...) {
      result = ec;
      done = true;
    });
    while (!done)
      if (ioc_.run_one() == 0) return asio::error::operation_aborted;
    return stopped_ ? error_code(asio::error::operation_aborted) : result;
  }

  std::optional<FetchError> connect(const Url& url) {
    tcp::resolver resolver(ioc_);
    tcp::resolver::results_type found;
    error_code ec = await([&](auto handler) {
      resolver.async_resolve(url.host, std::to_string(url.port),
                             [&found, handler](const error_code& e, tcp::resolver::results_type r) {
                               found = std::move(r);
                               handler(e);
                             });
    });
    if (stopped_) return FetchError{FetchError::Kind::stopped, "stopped"};
    if (ec) return transportError(url, "cannot resolve '" + url.host + "': " + ec.message());
    if (url.tls())
      tls_.emplace(ioc_, tls_context_);
    else
      plain_.emplace(ioc_);
    tcp().expires_after(timeout_);
    ec = await([&](auto handler) {
      tcp().async_connect(found,
                          [handler](const error_code& e, const tcp::endpoint&) { handler(e); });
    });
    if (auto e = failure(url, ec, "connecting")) return e;
    if (!tls_) return std::nullopt;
    SSL* ssl = tls_->native_handle();
    if (isIpLiteral(url.host)) {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), url.host.c_str());
    } else {
      SSL_set_tlsext_host_name(ssl, url.host.c_str());
      SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      SSL_set1_host(ssl, url.host.c_str());
    }
    tcp().expires_after(timeout_);
    ec = await([&](auto handler) { tls_->async_handshake(ssl::stream_base::client, handler); });
    if (ec && !stopped_ && ec != beast::error::timeout) {
      const long verify = SSL_get_verify_result(ssl);
      if (verify != X509_V_OK)
        return transportError(url, std::string("TLS certificate verification failed: ") +
                                       X509_verify_cert_error_string(verify));
    }
    return failure(url, ec, "TLS handshake");
  }

  std::optional<FetchError> send(const Url& url, std::string_view accept) {
    http::request<http::empty_body> req{http::verb::get, url.target(), 11};
    req.set(http::field::host, url.authority());
    req.set(http::field::user_agent, "airlock-packages/1");
    req.set(http::field::accept, beast::string_view(accept.data(), accept.size()));
    req.set(http::field::connection, "close");
    tcp().expires_after(timeout_);
    const error_code ec =
        await([&](auto handler) { visit([&](auto& s) { http::async_write(s, req, handler); }); });
    return failure(url, ec, "sending the request");
  }

  std::optional<FetchError> readHeader(const Url& url,
                                       std::optional<http::response_parser<http::buffer_body>>& p) {
    for (;;) {
      p.emplace();
      p->header_limit(64 * 1024);
      p->body_limit(std::numeric_limits<std::uint64_t>::max());
      tcp().expires_after(timeout_);
      const error_code ec = await([&](auto handler) {
        visit([&](auto& s) { http::async_read_header(s, buffer_, *p, handler); });
      });
      if (auto e = failure(url, ec, "reading the response header")) return e;
      const unsigned status = p->get().result_int();
      if (status < 100 || status >= 200) return std::nullopt;
    }
  }

  // Reads the body chunk by chunk into on_data.
  std::optional<FetchError> readBody(const Url& url, http::response_parser<http::buffer_body>& p,
                                     const UpstreamClient::DataCallback& on_data) {
    std::vector<char> chunk(kChunk);
    while (!p.is_done()) {
      p.get().body().data = chunk.data();
      p.get().body().size = chunk.size();
      tcp().expires_after(timeout_);
      error_code ec = await([&](auto handler) {
        visit([&](auto& s) { http::async_read_some(s, buffer_, p, handler); });
      });
      if (ec == http::error::need_buffer) ec = {};
      // A TLS server that closes without close_notify ends a body delimited by the close.
      if (ec == ssl::error::stream_truncated && !p.is_done()) p.put_eof(ec);
      if (auto e = failure(url, ec, "reading the response body")) return e;
      const size_t got = chunk.size() - p.get().body().size;
      if (got == 0) continue;
      if (auto refused = on_data(std::string_view(chunk.data(), got)))
        return FetchError{FetchError::Kind::callback, *refused};
    }
    return std::nullopt;
  }

 private:
  beast::tcp_stream& tcp() { return tls_ ? tls_->next_layer() : *plain_; }
  template <class F>
  void visit(F&& f) {
    if (tls_)
      f(*tls_);
    else
      f(*plain_);
  }

  std::optional<FetchError> failure(const Url& url, const error_code& ec, const std::string& what) {
    if (stopped_) return FetchError{FetchError::Kind::stopped, "stopped"};
    if (!ec) return std::nullopt;
    if (ec == beast::error::timeout)
      return transportError(url,
                            what + ": no progress for " + std::to_string(timeout_.count()) + " s");
    return transportError(url, what + ": " + ec.message());
  }

  asio::io_context ioc_;  // first: everything below uses it
  ssl::context& tls_context_;
  std::chrono::seconds timeout_;
  asio::posix::stream_descriptor stop_;
  std::optional<beast::tcp_stream> plain_;
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls_;
  beast::flat_buffer buffer_;
  bool stopped_ = false;
};

}  // namespace

struct UpstreamClient::Impl {
  ssl::context tls{ssl::context::tls_client};
  std::chrono::seconds timeout{60};
};

UpstreamClient::UpstreamClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
UpstreamClient::~UpstreamClient() = default;

Result<std::shared_ptr<UpstreamClient>> UpstreamClient::create(const std::string& ca_file,
                                                               std::chrono::seconds timeout) {
  auto impl = std::make_unique<Impl>();
  impl->timeout = timeout;
  SSL_CTX_set_min_proto_version(impl->tls.native_handle(), TLS1_2_VERSION);
  impl->tls.set_verify_mode(ssl::verify_peer);
  error_code ec;
  impl->tls.set_default_verify_paths(ec);
  if (!ca_file.empty()) {
    impl->tls.load_verify_file(ca_file, ec);
    if (ec) return fail("packages: cannot load the CA file: " + ec.message(), ca_file);
  }
  return std::shared_ptr<UpstreamClient>(new UpstreamClient(std::move(impl)));
}

FetchResult<UpstreamHeader> UpstreamClient::get(const std::string& location,
                                                std::string_view accept, int stop_fd,
                                                const HeaderCallback& on_header,
                                                const DataCallback& on_data) {
  Url url;
  try {
    url = transfer_http::parseUrl(location);
  } catch (const std::invalid_argument& e) {
    return std::unexpected(FetchError{
        FetchError::Kind::transport,
        "upstream URL '" + transfer_http::redact(location) + "' is not usable: " + e.what()});
  }
  for (int hop = 0;; ++hop) {
    Exchange ex(impl_->tls, impl_->timeout, stop_fd);
    if (auto e = ex.connect(url)) return std::unexpected(*e);
    if (auto e = ex.send(url, accept)) return std::unexpected(*e);
    std::optional<http::response_parser<http::buffer_body>> parser;
    if (auto e = ex.readHeader(url, parser)) return std::unexpected(*e);
    const auto& res = parser->get();
    UpstreamHeader header;
    header.status = res.result_int();
    header.url = url.withoutUserinfo();
    if (isRedirect(header.status) && res.count(http::field::location) != 0) {
      if (hop == kMaxRedirects) return std::unexpected(transportError(url, "too many redirects"));
      try {
        const auto location = res[http::field::location];
        url = transfer_http::resolveReference(url,
                                              std::string_view(location.data(), location.size()));
      } catch (const std::invalid_argument& e) {
        return std::unexpected(transportError(url, std::string("bad redirect: ") + e.what()));
      }
      continue;
    }
    const auto content_type = res[http::field::content_type];
    header.content_type.assign(content_type.data(), content_type.size());
    if (parser->content_length()) header.content_length = *parser->content_length();
    if (auto refused = on_header(header))
      return std::unexpected(FetchError{FetchError::Kind::callback, *refused});
    if (header.status / 100 == 2)
      if (auto e = ex.readBody(url, *parser, on_data)) return std::unexpected(*e);
    return header;
  }
}

FetchResult<std::pair<UpstreamHeader, std::string>> UpstreamClient::getText(const std::string& url,
                                                                            std::string_view accept,
                                                                            int stop_fd,
                                                                            uint64_t max_bytes) {
  std::string body;
  auto header = get(
      url, accept, stop_fd,
      [&](const UpstreamHeader& h) -> std::optional<std::string> {
        if (h.content_length && *h.content_length > max_bytes)
          return "upstream '" + transfer_http::redact(h.url) + "': answer larger than " +
                 std::to_string(max_bytes) + " bytes";
        return std::nullopt;
      },
      [&](std::string_view chunk) -> std::optional<std::string> {
        if (body.size() + chunk.size() > max_bytes)
          return "upstream answer larger than " + std::to_string(max_bytes) + " bytes";
        body.append(chunk);
        return std::nullopt;
      });
  if (!header) return std::unexpected(header.error());
  return std::pair{std::move(*header), std::move(body)};
}

}  // namespace airlock::packages
