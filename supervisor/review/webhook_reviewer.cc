#include "supervisor/review/webhook_reviewer.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <sstream>

#include "airlock/whole_file.h"
#include "supervisor/net/http_exchange.h"
#include "supervisor/review/external_verdict.h"

namespace airlock::review {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using ErrorCode = boost::system::error_code;

using Exchange = net::HttpExchange;

}  // namespace

Result<std::unique_ptr<WebhookReviewer>> WebhookReviewer::create(
    const policy::ReviewWebhook& webhook) {
  auto url = policy::parseWebhookUrl(webhook.url);
  if (!url)
    return Unexpected(std::move(url.error()).wrap("review.webhook.url '" + webhook.url + "'"));
  std::unique_ptr<WebhookReviewer> reviewer(new WebhookReviewer());
  reviewer->url_ = *url;
  reviewer->timeout_ms_ = webhook.timeout_ms;
  if (!webhook.token_file.empty()) {
    auto token = readWholeFile(webhook.token_file, 64 << 10);
    if (!token) return Unexpected(std::move(token.error()).wrap("review.webhook.token_file"));
    reviewer->token_ = std::move(*token);
    while (!reviewer->token_.empty() &&
           (reviewer->token_.back() == '\n' || reviewer->token_.back() == '\r')) {
      reviewer->token_.pop_back();
    }
  }
  return reviewer;
}

Result<Verdict> WebhookReviewer::review(const Subject& subject) {
  const std::string where =
      "review webhook http://" + url_.host + ":" + std::to_string(url_.port) + url_.target;
  asio::io_context ioc;
  Exchange x(ioc);
  x.request = {http::verb::post, url_.target, 11};
  x.request.set(http::field::host, url_.host + ":" + std::to_string(url_.port));
  x.request.set(http::field::user_agent, "airlock-review");
  x.request.set(http::field::content_type, "application/json");
  if (!token_.empty()) x.request.set(http::field::authorization, "Bearer " + token_);
  x.request.keep_alive(false);
  x.request.body() = subject.toJson().dump();
  x.request.prepare_payload();
  x.parser.body_limit(kMaxExternalAnswer);

  const auto timeout = std::chrono::milliseconds(timeout_ms_);
  x.stream.expires_after(timeout);
  x.start(url_);
  ioc.run_for(timeout);
  if (!x.done || x.error == beast::error::timeout) {
    return Unexpected(
        Error(where + ": no answer within " + std::to_string(timeout_ms_) + " ms", {}, ETIMEDOUT));
  }
  if (x.error) return fail(where + ": " + x.step + " it: " + x.error.message());
  const auto& response = x.parser.get();
  if (response.result() != http::status::ok) {
    std::string body = response.body().substr(0, 200);
    return fail(where + " answered HTTP " + std::to_string(response.result_int()) +
                (body.empty() ? "" : ": " + body));
  }
  auto verdict = parseExternalVerdict(response.body());
  if (!verdict) return Unexpected(std::move(verdict.error()).wrap(where));
  return verdict;
}

}  // namespace airlock::review
