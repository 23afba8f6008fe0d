// One request answered on its own thread: the Exchange (handlers.h) the dispatcher writes to,
// over Beast's parser and serializer on a blocking stream with deadlines (fd_stream.h).
//
// Why a thread per request and not a coroutine: the handlers call the Service, whose calls
// block (a sandbox starting, an execution streaming its output for minutes). Inside the
// io_context one slow handler would stall every connection on that thread; on its own thread it
// stalls only its client. The server bounds how many such threads exist (admission.h).
#pragma once

#include <boost/asio/buffer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <string>
#include <utility>
#include <vector>

#include "supervisor/api/fd_stream.h"
#include "supervisor/api/handlers.h"
#include "supervisor/api/http_request.h"

namespace airlock::api::detail {

namespace beast = boost::beast;
namespace http = boost::beast::http;

// Unread request body the server skips to keep a connection alive after answering early.
constexpr uint64_t kMaxDiscard = 64 * 1024;

using Parser = RequestParser;

class BlockingExchange final : public Exchange {
 public:
  BlockingExchange(FdStream& stream, beast::flat_buffer& buffer, Parser& parser, bool keep_alive,
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
    bytes_out_ += body.size();
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
    if (!ec) bytes_out_ += chunk.size();
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
  uint64_t bytesOut() const override { return bytes_out_; }

  std::vector<std::pair<std::string, std::string>> requestFields() const override {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& f : parser_.get()) out.emplace_back(f.name_string(), f.value());
    return out;
  }

  std::optional<RawConnection> takeConnection() override {
    if (broken_ || status_ != 0) return std::nullopt;
    RawConnection raw;
    raw.fd = stream_.fd();
    raw.stop_fd = stream_.stopFd();
    raw.io_timeout = stream_.ioTimeout();
    raw.http_version = parser_.get().version();
    raw.expect_continue = expect_continue_;
    auto data = buffer_.data();
    raw.pending.assign(static_cast<const char*>(data.data()), data.size());
    buffer_.consume(buffer_.size());
    broken_ = true;  // the connection is the handler's now, and closes after it
    status_ = 101;   // until setRelayedStatus() says what the relayed answer was
    return raw;
  }

  void setRelayedStatus(int status) override { status_ = status; }

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
  uint64_t bytes_out_ = 0;
  std::vector<std::pair<std::string, std::string>> headers_;
};

}  // namespace airlock::api::detail
