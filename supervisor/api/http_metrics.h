// The HTTP layer's own Prometheus metrics, appended to Service::metricsText() on GET /metrics.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace airlock::api {

class HttpMetrics {
 public:
  // One finished request: its route pattern ("/v1/sandboxes/{sb}", or "unknown"), status and
  // duration. 401, 413 and 429 also count as rejections.
  void observe(const std::string& route, int status, double seconds);
  // A connection or request refused by the server's limits before any handler ran (429, 503).
  void reject(int status);
  // A connection waiting for a request closed to make room for a new one (admission.h).
  void evicted() { evictions_.fetch_add(1); }
  void connectionOpened() { connections_.fetch_add(1); }
  void connectionClosed() { connections_.fetch_sub(1); }
  int64_t connections() const { return connections_.load(); }

  // airlock_http_requests_total{route,code}, airlock_http_request_seconds{route} (histogram),
  // airlock_http_connections, airlock_http_evictions_total, airlock_rejections_total{reason}.
  std::string text() const;
  // `service_text` (Service::metricsText) followed by text(). When the service already has an
  // airlock_rejections_total family, our samples join it there: the exposition format allows
  // each family's TYPE line once, with its samples together.
  std::string render(std::string service_text) const;

 private:
  static constexpr std::array<double, 16> kBuckets = {
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
  struct Histogram {
    std::array<uint64_t, kBuckets.size()> buckets{};  // non-cumulative; summed on output
    uint64_t count = 0;
    double sum = 0;
  };

  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::map<std::string, Histogram> latency_;
  std::map<std::string, uint64_t> rejections_;
  std::atomic<int64_t> connections_{0};
  std::atomic<uint64_t> evictions_{0};
};

}  // namespace airlock::api
