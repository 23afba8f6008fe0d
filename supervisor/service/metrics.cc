#include "supervisor/service/metrics.h"

#include <cstdio>

namespace airlock::service {

void Histogram::observe(double seconds) {
  size_t i = 0;
  while (i < kBounds.size() && seconds > kBounds[i]) ++i;
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_us_.fetch_add(static_cast<uint64_t>(seconds * 1e6), std::memory_order_relaxed);
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  uint64_t cumulative = 0;
  char buf[64];
  std::string sep = labels.empty() ? "" : ",";
  for (size_t i = 0; i <= kBounds.size(); ++i) {
    cumulative += counts_[i].load(std::memory_order_relaxed);
    if (i < kBounds.size())
      std::snprintf(buf, sizeof buf, "%g", kBounds[i]);
    else
      std::snprintf(buf, sizeof buf, "+Inf");
    out += name + "_bucket{" + labels + sep + "le=\"" + buf + "\"} " + std::to_string(cumulative) +
           "\n";
  }
  std::snprintf(buf, sizeof buf, "%.6f", static_cast<double>(sum_us_.load()) / 1e6);
  std::string l = labels.empty() ? "" : "{" + labels + "}";
  out += name + "_sum" + l + " " + buf + "\n";
  out += name + "_count" + l + " " + std::to_string(cumulative) + "\n";
}

void Metrics::reject(const std::string& reason) {
  std::lock_guard lock(mu);
  ++rejections[reason];
}

void Metrics::reap(const std::string& reason) {
  std::lock_guard lock(mu);
  ++reaped[reason];
}

}  // namespace airlock::service
