#include "supervisor/api/http_metrics.h"

#include <cstdio>

namespace airlock::api {
namespace {

const char* rejectionReason(int status) {
  switch (status) {
    case 401:
      return "unauthorized";
    case 413:
      return "payload_too_large";
    case 429:
      return "too_many_requests";
    case 503:
      return "unavailable";
    default:
      return nullptr;
  }
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

void HttpMetrics::observe(const std::string& route, int status, double seconds) {
  std::lock_guard lock(mu_);
  ++requests_[{route, status}];
  Histogram& h = latency_[route];
  size_t i = 0;
  while (i < kBuckets.size() && seconds > kBuckets[i]) ++i;
  if (i < kBuckets.size()) ++h.buckets[i];
  ++h.count;
  h.sum += seconds;
  if (const char* reason = rejectionReason(status)) ++rejections_[reason];
}

void HttpMetrics::reject(int status) {
  std::lock_guard lock(mu_);
  if (const char* reason = rejectionReason(status)) ++rejections_[reason];
}

std::string HttpMetrics::render(std::string service_text) const {
  std::string ours = text();
  constexpr std::string_view kFamily = "# TYPE airlock_rejections_total ";
  const size_t family = service_text.find(kFamily);
  if (family == std::string::npos) {
    if (!service_text.empty() && service_text.back() != '\n') service_text += '\n';
    return service_text + ours;
  }
  // Move our rejection samples (not their HELP/TYPE lines) to the end of the service's family.
  size_t our_help = ours.find("# HELP airlock_rejections_total");
  size_t our_samples = ours.find("airlock_rejections_total{", our_help);
  std::string samples = ours.substr(our_samples);
  ours.erase(our_help);
  size_t at = service_text.find('\n', family);
  at = at == std::string::npos ? service_text.size() : at + 1;
  while (service_text.compare(at, 25, "airlock_rejections_total{") == 0 ||
         service_text.compare(at, 25, "airlock_rejections_total ") == 0) {
    size_t nl = service_text.find('\n', at);
    at = nl == std::string::npos ? service_text.size() : nl + 1;
  }
  if (at == service_text.size() && !service_text.empty() && service_text.back() != '\n') {
    service_text += '\n';
    at = service_text.size();
  }
  service_text.insert(at, samples);
  return service_text + ours;
}

std::string HttpMetrics::text() const {
  std::lock_guard lock(mu_);
  std::string out;
  out += "# HELP airlock_http_requests_total HTTP requests answered, by route and status.\n";
  out += "# TYPE airlock_http_requests_total counter\n";
  for (const auto& [key, n] : requests_) {
    out += "airlock_http_requests_total{route=\"" + key.first + "\",code=\"" +
           std::to_string(key.second) + "\"} " + std::to_string(n) + "\n";
  }
  out += "# HELP airlock_http_request_seconds Time from request header to the end of the answer.\n";
  out += "# TYPE airlock_http_request_seconds histogram\n";
  for (const auto& [route, h] : latency_) {
    uint64_t cumulative = 0;
    for (size_t i = 0; i < kBuckets.size(); ++i) {
      cumulative += h.buckets[i];
      out += "airlock_http_request_seconds_bucket{route=\"" + route + "\",le=\"" +
             number(kBuckets[i]) + "\"} " + std::to_string(cumulative) + "\n";
    }
    out += "airlock_http_request_seconds_bucket{route=\"" + route + "\",le=\"+Inf\"} " +
           std::to_string(h.count) + "\n";
    out += "airlock_http_request_seconds_sum{route=\"" + route + "\"} " + number(h.sum) + "\n";
    out += "airlock_http_request_seconds_count{route=\"" + route + "\"} " +
           std::to_string(h.count) + "\n";
  }
  out += "# HELP airlock_http_connections Open HTTP connections.\n";
  out += "# TYPE airlock_http_connections gauge\n";
  out += "airlock_http_connections " + std::to_string(connections_.load()) + "\n";
  out +=
      "# HELP airlock_http_evictions_total Connections waiting for a request, closed to make "
      "room for a new one.\n";
  out += "# TYPE airlock_http_evictions_total counter\n";
  out += "airlock_http_evictions_total " + std::to_string(evictions_.load()) + "\n";
  out +=
      "# HELP airlock_rejections_total Requests refused: unauthorized, too large, too many, "
      "unavailable.\n";
  out += "# TYPE airlock_rejections_total counter\n";
  for (const char* reason :
       {"unauthorized", "payload_too_large", "too_many_requests", "unavailable"}) {
    auto it = rejections_.find(reason);
    out += std::string("airlock_rejections_total{reason=\"") + reason + "\"} " +
           std::to_string(it == rejections_.end() ? 0 : it->second) + "\n";
  }
  return out;
}

}  // namespace airlock::api
