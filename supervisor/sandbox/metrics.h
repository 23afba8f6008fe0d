// The service's own Prometheus metrics: counters and fixed-bucket histograms, rendered in the
// text exposition format. Lock-free on the hot path.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace airlock::sandbox {

class Histogram {
 public:
  static constexpr std::array<double, 12> kBounds = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.025,
                                                     0.05,   0.1,   0.25,  0.5,   1,    5};
  void observe(double seconds);
  void render(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::array<std::atomic<uint64_t>, kBounds.size() + 1> counts_{};
  std::atomic<uint64_t> sum_us_{0};
};

struct Metrics {
  std::atomic<uint64_t> sandboxes_created{0};
  std::atomic<uint64_t> sandboxes_destroyed{0};
  std::atomic<uint64_t> sandboxes_adopted{0};  // taken over after a supervisor died
  std::atomic<uint64_t> reviews_held{0};       // executions parked for an operator
  std::atomic<uint64_t> create_failures{0};
  std::atomic<uint64_t> warm_creates{0};
  std::atomic<uint64_t> cold_creates{0};
  Histogram create_seconds;
  Histogram command_seconds;
  Histogram code_seconds;
  std::atomic<uint64_t> commands{0};
  std::atomic<uint64_t> code_runs{0};
  std::atomic<uint64_t> audit_drops{0};  // audit events lost in executions (ring buffer full)
  std::atomic<uint64_t> file_ops{0};
  std::atomic<uint64_t> transfers_started{0};  // API transfers (POST .../transfers)
  std::atomic<uint64_t> transfers_ok{0};       // every transfer that ended, run's and API's
  std::atomic<uint64_t> transfers_failed{0};
  std::atomic<uint64_t> runs{0};  // one-shot programs of the API (POST /v1/runs) started
  int64_t runs_running = 0;       // ... in progress; under the manager's mu_ (with reserved_)
  std::mutex mu;
  std::map<std::string, uint64_t> rejections;   // by reason
  std::map<std::string, uint64_t> reaped;       // by reason: idle, lifetime
  std::map<std::string, uint64_t> run_results;  // one-shot programs ended, by record status

  void reject(const std::string& reason);
  void reap(const std::string& reason);
  void runEnded(const std::string& status);
};

}  // namespace airlock::sandbox
