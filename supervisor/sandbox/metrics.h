// The service's own Prometheus metrics: counters, gauges and fixed-bucket histograms, rendered in
// the text exposition format (docs/api.md, "Metrics" lists every family).
//
// Labels are only ever values the policy bounds (tenant, profile, backend, reviewer) or small
// fixed sets (kind, verdict, start): never a sandbox id, so a busy host cannot grow the output
// without bound.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace airlock::sandbox {

class Histogram {
 public:
  // Seconds: sub-millisecond API work up to executions of several minutes.
  static constexpr std::array<double, 17> kBounds = {
      0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
  void observe(double seconds);
  void render(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::array<std::atomic<uint64_t>, kBounds.size() + 1> counts_{};
  std::atomic<uint64_t> sum_us_{0};
};

// One counter family with labels: label values, in the order of the family's label names, to
// the count. The mutex is taken once per event, off the execution's own path.
class LabeledCounter {
 public:
  void add(const std::vector<std::string>& values, uint64_t n = 1);
  // HELP, TYPE and one sample per label set seen (none yet: only HELP and TYPE).
  void render(std::string& out, const char* name, const char* help,
              std::initializer_list<const char*> label_names) const;

 private:
  mutable std::mutex mu_;
  std::map<std::vector<std::string>, uint64_t> samples_;
};

class LabeledHistogram {
 public:
  void observe(const std::vector<std::string>& values, double seconds);
  void render(std::string& out, const char* name, const char* help,
              std::initializer_list<const char*> label_names) const;

 private:
  mutable std::mutex mu_;
  std::map<std::vector<std::string>, Histogram> series_;
};

// `# HELP` and `# TYPE` lines of one family.
void metricFamily(std::string& out, const char* name, const char* type, const char* help);
// `a="x",b="y"`, values escaped as the exposition format wants (\\, \", \n).
std::string metricLabels(std::initializer_list<const char*> names,
                         const std::vector<std::string>& values);

struct Metrics {
  std::atomic<uint64_t> sandboxes_destroyed{0};
  std::atomic<uint64_t> sandboxes_adopted{0};  // taken over after a supervisor died
  std::atomic<uint64_t> reviews_held{0};       // executions parked for an operator
  std::atomic<uint64_t> create_failures{0};
  std::atomic<uint64_t> warm_creates{0};
  std::atomic<uint64_t> cold_creates{0};
  std::atomic<uint64_t> commands{0};
  std::atomic<uint64_t> code_runs{0};
  std::atomic<uint64_t> audit_drops{0};  // audit events lost in executions (ring buffer full)
  std::atomic<uint64_t> file_ops{0};
  std::atomic<uint64_t> transfers_started{0};  // API transfers (POST .../transfers)
  std::atomic<uint64_t> transfers_ok{0};       // every transfer that ended, run's and API's
  std::atomic<uint64_t> transfers_failed{0};
  std::atomic<uint64_t> runs{0};  // one-shot programs of the API (POST /v1/runs) started
  int64_t runs_running = 0;       // ... in progress; under the manager's mu_ (with reserved_)

  LabeledCounter created;              // tenant, profile, backend, start (warm|cold)
  LabeledHistogram create_seconds;     // profile, backend
  LabeledHistogram execution_seconds;  // kind (code|command|run), profile
  LabeledHistogram review_seconds;     // verdict (allow|deny|hold)
  LabeledCounter oom_kills;            // profile
  LabeledCounter timeouts;             // profile
  LabeledCounter review_denials;       // profile, reviewer
  LabeledCounter network_denials;      // profile

  mutable std::mutex mu;
  std::map<std::string, uint64_t> rejections;   // by reason
  std::map<std::string, uint64_t> reaped;       // by reason: idle, lifetime
  std::map<std::string, uint64_t> run_results;  // one-shot programs ended, by record status

  void reject(const std::string& reason);
  void reap(const std::string& reason);
  void runEnded(const std::string& status);
  // One finished execution: its time, and whether it timed out or lost processes to the OOM
  // killer (`oom_kills`: the cgroup's count that rose while it ran).
  void executionEnded(const char* kind, const std::string& profile, double seconds, bool timed_out,
                      uint64_t oom_kills, uint64_t network_denied);
};

// What the manager counts from its live tables when /metrics is read (gauges).
struct LiveCounts {
  std::map<std::string, int> by_state;                // starting, running, stopping
  std::map<std::vector<std::string>, int> sandboxes;  // tenant, profile, backend
  // profile, language, kind (plain, preloaded, checker) → interpreters waiting
  std::map<std::vector<std::string>, size_t> prestarted;
  size_t warm = 0, contexts = 0, commands_running = 0;
};

// The service's part of GET /metrics: every family with HELP and TYPE, airlock_rejections_total
// last (the HTTP layer adds its reasons to it, HttpMetrics::render).
std::string renderMetrics(const Metrics& metrics, const LiveCounts& live);

}  // namespace airlock::sandbox
