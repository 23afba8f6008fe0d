#include "supervisor/audit/webhook_sink.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>

#include "airlock/whole_file.h"
#include "supervisor/log/log.h"
#include "supervisor/net/http_exchange.h"

namespace airlock::audit {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using ErrorCode = boost::system::error_code;
using SteadyClock = std::chrono::steady_clock;

std::string hex(const unsigned char* bytes, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    out += kDigits[bytes[i] >> 4];
    out += kDigits[bytes[i] & 15];
  }
  return out;
}

using Exchange = net::HttpExchange;

}  // namespace

std::string webhookSignature(std::string_view secret, std::string_view body) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  ::HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
         reinterpret_cast<const unsigned char*>(body.data()), body.size(), mac, &len);
  return "sha256=" + hex(mac, len);
}

Millis webhookBackoff(uint32_t retry, Millis base, Millis cap, double jitter01,
                      std::optional<Millis> retry_after) {
  if (retry_after) return std::min(*retry_after, kMaxRetryAfter);
  const uint32_t doublings = std::min<uint32_t>(retry == 0 ? 0 : retry - 1, 30);
  const auto full = std::min<int64_t>(cap.count(), base.count() << doublings);
  const double j = std::clamp(jitter01, 0.0, 1.0);
  return Millis(static_cast<int64_t>(static_cast<double>(full) * (0.5 + 0.5 * j)));
}

std::optional<Millis> parseRetryAfter(std::string_view value) {
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  if (value.empty() || value.size() > 9) return std::nullopt;
  uint32_t seconds = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
  if (ec != std::errc() || end != value.data() + value.size()) return std::nullopt;
  return Millis(int64_t{seconds} * 1000);
}

Result<WebhookOptions> webhookOptionsFrom(const policy::AuditSettings& s) {
  WebhookOptions o;
  auto url = policy::parseWebhookUrl(s.webhook_url);
  if (!url)
    return Unexpected(std::move(url.error()).wrap("[audit] webhook_url '" + s.webhook_url + "'"));
  o.url = *url;
  o.url_text = s.webhook_url;
  if (!s.webhook_secret_file.empty()) {
    auto secret = readWholeFile(s.webhook_secret_file, 64 << 10);
    if (!secret) return Unexpected(std::move(secret.error()).wrap("[audit] webhook_secret_file"));
    o.secret = std::move(*secret);
    while (!o.secret.empty() && (o.secret.back() == '\n' || o.secret.back() == '\r'))
      o.secret.pop_back();
    if (o.secret.empty())
      return fail("[audit] webhook_secret_file: the file is empty", s.webhook_secret_file);
  }
  o.events = {s.webhook_events.begin(), s.webhook_events.end()};
  o.timeout = Millis(s.webhook_timeout_ms);
  o.max_retries = s.webhook_max_retries;
  o.queue_limit = s.webhook_queue;
  return o;
}

WebhookSink::WebhookSink(WebhookOptions options)
    : options_(std::move(options)), rng_(std::random_device{}()) {}

std::unique_ptr<WebhookSink> WebhookSink::start(WebhookOptions options) {
  std::unique_ptr<WebhookSink> sink(new WebhookSink(std::move(options)));
  sink->thread_ = std::thread([p = sink.get()] { p->loop(); });
  return sink;
}

WebhookSink::~WebhookSink() { shutdown(kShutdownDeadline); }

std::string WebhookSink::newDeliveryId() {
  std::lock_guard lock(mu_);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng_()));
  return buf;
}

bool WebhookSink::offer(std::string_view type, const nlohmann::json& record) {
  if (!options_.events.contains(std::string(type))) return false;
  Delivery d{newDeliveryId(), std::string(type),
             record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
  uint64_t dropped = 0;
  {
    std::lock_guard lock(mu_);
    if (!stopping_ && queue_.size() < options_.queue_limit) {
      queue_.push_back(std::move(d));
      cv_.notify_one();
      return true;
    }
    dropped = ++stats_.dropped;
  }
  // Said once, then every 1000th: a receiver that is down for long must not flood stderr.
  if (dropped == 1 || dropped % 1000 == 0)
    log::warn("audit.webhook.dropped",
              {{"url", options_.url_text}, {"queue", options_.queue_limit}, {"dropped", dropped}});
  return false;
}

void WebhookSink::shutdown(Millis deadline) {
  {
    std::lock_guard lock(mu_);
    if (!thread_.joinable()) return;
    if (!stopping_) {
      stopping_ = true;
      deadline_ = SteadyClock::now() + deadline;
    }
  }
  cv_.notify_all();
  thread_.join();
}

WebhookSink::Stats WebhookSink::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void WebhookSink::loop() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, all delivered
    if (stopping_ && SteadyClock::now() >= deadline_) {
      const auto left = queue_.size();
      stats_.dropped += left;
      queue_.clear();
      log::warn("audit.webhook.undelivered",
                {{"url", options_.url_text}, {"records", left}, {"why", "shutdown deadline"}});
      return;
    }
    Delivery d = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    deliver(std::move(d));
    lock.lock();
  }
}

bool WebhookSink::waitFor(Millis delay) {
  std::unique_lock lock(mu_);
  const auto until = SteadyClock::now() + delay;
  // Shutting down: a retry that would come after the deadline is given up now, not waited for.
  auto pastDeadline = [&] { return stopping_ && deadline_ < until; };
  while (!pastDeadline() && SteadyClock::now() < until) cv_.wait_until(lock, until);
  return !pastDeadline();
}

void WebhookSink::deliver(Delivery d) {
  for (uint32_t attempt = 0;; ++attempt) {
    Millis timeout = options_.timeout;
    {
      std::lock_guard lock(mu_);
      if (stopping_) {
        auto left = std::chrono::duration_cast<Millis>(deadline_ - SteadyClock::now());
        if (left <= Millis(0)) {
          ++stats_.dropped;
          return;
        }
        timeout = std::min(timeout, left);
      }
    }
    Attempt a = post(d, timeout);
    if (a.status >= 200 && a.status < 300) {
      std::lock_guard lock(mu_);
      ++stats_.delivered;
      return;
    }
    const std::string why = a.status != 0 ? "answered HTTP " + std::to_string(a.status) : a.error;
    if (attempt >= options_.max_retries) {
      {
        std::lock_guard lock(mu_);
        ++stats_.failed;
      }
      log::warn("audit.webhook.failed", {{"url", options_.url_text},
                                         {"event", d.event},
                                         {"delivery", d.id},
                                         {"attempts", attempt + 1},
                                         {"error", why}});
      return;
    }
    double jitter;
    {
      std::lock_guard lock(mu_);
      ++stats_.retries;
      jitter = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
    }
    const bool honour = a.status == 429 || a.status == 503;
    const Millis delay = webhookBackoff(attempt + 1, options_.backoff_base, options_.backoff_cap,
                                        jitter, honour ? a.retry_after : std::nullopt);
    if (!waitFor(delay)) {
      std::lock_guard lock(mu_);
      ++stats_.dropped;
      return;
    }
  }
}

WebhookSink::Attempt WebhookSink::post(const Delivery& d, Millis timeout) {
  Attempt out;
  asio::io_context ioc;
  Exchange x(ioc);
  const auto& url = options_.url;
  x.request = {http::verb::post, url.target, 11};
  x.request.set(http::field::host, url.host + ":" + std::to_string(url.port));
  x.request.set(http::field::user_agent, "airlock-audit");
  x.request.set(http::field::content_type, "application/json");
  x.request.set("X-Airlock-Event", d.event);
  x.request.set("X-Airlock-Delivery", d.id);
  if (!options_.secret.empty())
    x.request.set("X-Airlock-Signature", webhookSignature(options_.secret, d.body));
  x.request.keep_alive(false);
  x.request.body() = d.body;
  x.request.prepare_payload();
  x.parser.body_limit(64 << 10);
  x.stream.expires_after(timeout);
  x.start(url);
  ioc.run_for(timeout);
  if (!x.done || x.error == beast::error::timeout) {
    out.error = "no answer within " + std::to_string(timeout.count()) + " ms";
    return out;
  }
  if (x.error) {
    out.error = x.error.message();
    return out;
  }
  const auto& response = x.parser.get();
  out.status = static_cast<int>(response.result_int());
  if (auto it = response.find(http::field::retry_after); it != response.end())
    out.retry_after = parseRetryAfter(std::string_view(it->value().data(), it->value().size()));
  return out;
}

}  // namespace airlock::audit
