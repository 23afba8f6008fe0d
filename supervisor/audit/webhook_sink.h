// Lifecycle webhooks (docs/audit.md, "Webhooks"): audit records of the chosen types POSTed as
// JSON to an operator's http:// URL, signed with HMAC-SHA256, retried with exponential backoff
// and jitter. Records wait in a bounded queue for one background thread: offering a record never
// blocks and never fails the request that made it; when the queue is full the record is dropped
// and counted.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>

#include <nlohmann/json.hpp>

#include "airlock/policy/policy.h"
#include "airlock/result.h"

namespace airlock::audit {

using Millis = std::chrono::milliseconds;

// "sha256=" + the lowercase hex HMAC-SHA256 of body under secret: the X-Airlock-Signature header.
std::string webhookSignature(std::string_view secret, std::string_view body);

// The wait before retry number `retry` (1 for the first): base * 2^(retry-1), at most cap, then
// scaled by jitter01 ∈ [0, 1] into [half, all] of it ("equal jitter": retries of many
// supervisors spread out, yet none comes back at once). A Retry-After the receiver sent (429,
// 503) replaces it, capped at kMaxRetryAfter.
Millis webhookBackoff(uint32_t retry, Millis base, Millis cap, double jitter01,
                      std::optional<Millis> retry_after = std::nullopt);
inline constexpr Millis kMaxRetryAfter{300000};

// A Retry-After header's delay: delta-seconds only ("120"); an HTTP date or garbage → nullopt.
std::optional<Millis> parseRetryAfter(std::string_view value);

struct WebhookOptions {
  policy::WebhookUrl url;
  std::string url_text;  // as configured, for messages
  std::string secret;    // "": unsigned
  std::set<std::string> events;
  Millis timeout{5000};
  uint32_t max_retries = 5;
  size_t queue_limit = 1000;
  Millis backoff_base{500};
  Millis backoff_cap{30000};
};

// The options of the [audit] webhook_* keys (secret file read now), or what is wrong with them.
Result<WebhookOptions> webhookOptionsFrom(const policy::AuditSettings& settings);

class WebhookSink {
 public:
  static std::unique_ptr<WebhookSink> start(WebhookOptions options);
  // Flushes with kShutdownDeadline if shutdown() was not called.
  ~WebhookSink();
  WebhookSink(const WebhookSink&) = delete;
  WebhookSink& operator=(const WebhookSink&) = delete;

  // Queues the record when its type is one of the events; false when it is not wanted or the
  // queue was full (dropped, counted).
  bool offer(std::string_view type, const nlohmann::json& record);

  // Stops taking records, delivers what waits until `deadline` from now (retries included),
  // counts what is left as dropped, and joins the thread. Idempotent.
  void shutdown(Millis deadline);
  static constexpr Millis kShutdownDeadline{5000};

  struct Stats {
    uint64_t delivered = 0;  // answered 2xx
    uint64_t failed = 0;     // given up after max_retries
    uint64_t dropped = 0;    // queue full, or still queued at shutdown's deadline
    uint64_t retries = 0;
  };
  Stats stats() const;

 private:
  struct Delivery {
    std::string id;  // X-Airlock-Delivery: the same on every retry of one record
    std::string event;
    std::string body;
  };
  struct Attempt {
    int status = 0;  // HTTP status; 0: no answer
    std::optional<Millis> retry_after;
    std::string error;
  };

  explicit WebhookSink(WebhookOptions options);
  void loop();
  void deliver(Delivery d);
  Attempt post(const Delivery& d, Millis timeout);
  // Waits `delay`, or less when shutting down past the deadline; false: no time left.
  bool waitFor(Millis delay);
  std::string newDeliveryId();

  WebhookOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Delivery> queue_;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point deadline_;
  Stats stats_;
  std::mt19937_64 rng_;
  std::thread thread_;
};

}  // namespace airlock::audit
