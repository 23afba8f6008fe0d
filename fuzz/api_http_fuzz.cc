// The HTTP API as a client reaches it: the bytes of one connection (pipelined requests allowed)
// go through the server's request parser (supervisor/api/http_request.h: Beast with the server's
// limits), then the Dispatcher (handlers.cc): bearer tokens, the router, query and path
// parameters, the JSON body decoders, and the response encoders, against a service that says yes
// to everything (support/stub_service.h). Only the socket is left out: the bytes come from here.
//
// Invariants checked, per request: the handler answers at most once; a status is an HTTP status;
// a JSON answer is JSON and every NDJSON line of a stream is JSON; nothing is streamed outside a
// stream.
#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "supervisor/api/auth.h"
#include "supervisor/api/handlers.h"
#include "supervisor/api/http_metrics.h"
#include "supervisor/api/http_request.h"
#include "support/fuzz_check.h"
#include "support/stub_service.h"

namespace api = airlock::api;
namespace http = boost::beast::http;
namespace net = boost::asio;

namespace {

// Requests a connection may pipeline before the fuzzer stops reading it.
constexpr int kMaxRequests = 8;

// One exchange on the fuzzed connection: the body comes from the bytes after the header.
class BytesExchange final : public api::Exchange {
 public:
  BytesExchange(api::RequestParser& parser, std::string_view& rest) : parser_(parser), rest_(rest) {
    parser_.eager(true);  // as http::read does: the body, chunk framing included, in one go
  }

  airlock::sandbox::SResult<size_t> readBody(char* buf, size_t cap) override {
    if (parser_.is_done()) return size_t{0};
    auto& body = parser_.get().body();
    body.data = buf;
    body.size = cap;
    while (!parser_.is_done() && body.size > 0) {
      boost::system::error_code ec;
      const size_t used = parser_.put(net::buffer(rest_.data(), rest_.size()), ec);
      rest_.remove_prefix(used);
      if (ec == http::error::need_buffer) break;
      if (ec && ec != http::error::need_more) return bodyError(ec.message());
      // All the connection's bytes are here: no progress means the client hung up mid-body.
      if (used == 0) return bodyError("the connection closed");
    }
    return cap - body.size;
  }

  void setHeader(std::string, std::string) override {}

  bool respond(int status, std::string_view content_type, std::string body) override {
    answered(status);
    if (content_type == "application/json") {
      FUZZ_CHECK(!nlohmann::json::parse(body, nullptr, false).is_discarded());
    }
    return true;
  }

  bool beginStream(int status, std::string_view content_type) override {
    answered(status);
    streaming_ = true;
    ndjson_ = content_type == "application/x-ndjson";
    return true;
  }

  bool writeStream(std::string_view chunk) override {
    FUZZ_CHECK(streaming_);
    if (ndjson_) {
      FUZZ_CHECK(!chunk.empty() && chunk.back() == '\n');
      FUZZ_CHECK(!nlohmann::json::parse(chunk, nullptr, false).is_discarded());
    }
    return true;
  }

  bool endStream() override {
    FUZZ_CHECK(streaming_);
    streaming_ = false;
    return true;
  }

  void abortStream() override { streaming_ = false; }
  bool clientGone() override { return false; }
  int status() const override { return status_; }

 private:
  static airlock::sandbox::SResult<size_t> bodyError(const std::string& what) {
    return airlock::sandbox::serviceError(airlock::sandbox::ErrorCode::kBadRequest,
                                          "request body: " + what);
  }

  void answered(int status) {
    FUZZ_CHECK(status_ == 0);  // a second answer would corrupt the connection
    FUZZ_CHECK(status >= 100 && status <= 599);
    status_ = status;
  }

  api::RequestParser& parser_;
  std::string_view& rest_;
  int status_ = 0;
  bool streaming_ = false;
  bool ndjson_ = false;
};

// The table `Authorization: Bearer fuzz-token` passes (the seeds use it): the key is the token's
// SHA-256, as in a policy's [tenants.*] token_sha256.
const api::TokenTable& tokens() {
  static const api::TokenTable table = *api::TokenTable::create(
      {{"33cc09ba35314d19e32ed9a5a30fca56eebbfab5faec7247fd0403cd26e155b5", "tenant-a"}});
  return table;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  airlock::fuzz::StubService service;
  api::HttpMetrics metrics;
  api::HandlerLimits limits;
  limits.max_json_body = 64 * 1024;
  limits.max_upload_bytes = 1 << 20;
  limits.stream_poll = std::chrono::milliseconds(0);
  api::Dispatcher dispatcher(service, tokens(), metrics, limits);

  for (int i = 0; i < kMaxRequests && !rest.empty(); ++i) {
    api::RequestParser parser;
    api::limitRequestParser(parser);
    boost::system::error_code ec;
    while (!parser.is_header_done()) {
      const size_t used = parser.put(net::buffer(rest.data(), rest.size()), ec);
      rest.remove_prefix(used);
      // The server answers 400 or 431 and closes; a header cut short is a client that left.
      if (ec || used == 0) return 0;
    }
    const api::RequestHead head = api::readRequestHead(parser, /*from_tcp=*/false);
    BytesExchange ex(parser, rest);
    const std::string label = dispatcher.handle(head.request, ex, /*draining=*/false);
    FUZZ_CHECK(!label.empty());
    // As serveConnection: the connection goes on only when kept alive with its body read.
    if (!head.keep_alive) return 0;
    char sink[8192];
    while (!parser.is_done()) {
      auto n = ex.readBody(sink, sizeof sink);
      if (!n || *n == 0) break;
    }
    if (!parser.is_done()) return 0;
  }
  return 0;
}
