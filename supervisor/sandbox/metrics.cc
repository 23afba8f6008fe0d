#include "supervisor/sandbox/metrics.h"

#include "supervisor/sandbox/live_sandbox.h"
#include "supervisor/sandbox/manager.h"

#include <cstdio>

namespace airlock::sandbox {

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

void Metrics::runEnded(const std::string& status) {
  std::lock_guard lock(mu);
  ++run_results[status];
}

std::string Manager::metricsText() {
  std::map<std::string, int> by_state;
  size_t contexts = 0, commands_running = 0, warm = 0;
  std::string prestarted;
  {
    std::lock_guard lock(mu_);
    for (const auto& [p, q] : pool_) warm += q.size();
    for (const auto& [key, q] : prestarted_) {
      const auto& [profile, language, kind] = key;
      const char* kind_name = kind == PrestartKind::kPlain       ? "plain"
                              : kind == PrestartKind::kPreloaded ? "preloaded"
                                                                 : "checker";
      prestarted += "airlock_prestarted_interpreters{profile=\"" + profile + "\",language=\"" +
                    language + "\",kind=\"" + kind_name + "\"} " + std::to_string(q.size()) + "\n";
    }
    // A one-shot run holds a reservation for as long as its sandbox lives (run_service.cc).
    by_state["starting"] = reserved_ - static_cast<int>(metrics_.runs_running);
    by_state["running"] = static_cast<int>(metrics_.runs_running);
    for (const auto& [id, s] : sandboxes_) {
      std::lock_guard slock(s->mu);
      ++by_state[s->state];
      contexts += s->contexts.size();
      for (const auto& [cid, c] : s->commands) commands_running += c->running() ? 1 : 0;
    }
  }
  std::string out;
  out += "# HELP airlock_sandboxes Live sandboxes by state.\n# TYPE airlock_sandboxes gauge\n";
  for (const char* st : {"starting", "running", "stopping"})
    out += std::string("airlock_sandboxes{state=\"") + st + "\"} " + std::to_string(by_state[st]) +
           "\n";
  out +=
      "# TYPE airlock_warm_sandboxes gauge\nairlock_warm_sandboxes " + std::to_string(warm) + "\n";
  out +=
      "# HELP airlock_prestarted_interpreters Single-use sandboxes whose interpreter waits for "
      "its one-shot program, by profile, language and kind (plain, preloaded, checker).\n"
      "# TYPE airlock_prestarted_interpreters gauge\n" +
      prestarted;
  out += "# TYPE airlock_sandbox_creates_total counter\n";
  out += "airlock_sandbox_creates_total{path=\"warm\"} " +
         std::to_string(metrics_.warm_creates.load()) + "\n";
  out += "airlock_sandbox_creates_total{path=\"cold\"} " +
         std::to_string(metrics_.cold_creates.load()) + "\n";
  out += "# TYPE airlock_code_contexts gauge\nairlock_code_contexts " + std::to_string(contexts) +
         "\n";
  out += "# TYPE airlock_commands_running gauge\nairlock_commands_running " +
         std::to_string(commands_running) + "\n";
  out += "# TYPE airlock_sandboxes_created_total counter\nairlock_sandboxes_created_total " +
         std::to_string(metrics_.sandboxes_created.load()) + "\n";
  out += "# TYPE airlock_sandboxes_destroyed_total counter\nairlock_sandboxes_destroyed_total " +
         std::to_string(metrics_.sandboxes_destroyed.load()) + "\n";
  out += "# TYPE airlock_sandboxes_adopted_total counter\nairlock_sandboxes_adopted_total " +
         std::to_string(metrics_.sandboxes_adopted.load()) + "\n";
  out += "# TYPE airlock_reviews_held_total counter\nairlock_reviews_held_total " +
         std::to_string(metrics_.reviews_held.load()) + "\n";
  out +=
      "# TYPE airlock_sandbox_create_failures_total "
      "counter\nairlock_sandbox_create_failures_total " +
      std::to_string(metrics_.create_failures.load()) + "\n";
  out += "# TYPE airlock_executions_total counter\n";
  out += "airlock_executions_total{kind=\"command\"} " + std::to_string(metrics_.commands.load()) +
         "\n";
  out +=
      "airlock_executions_total{kind=\"code\"} " + std::to_string(metrics_.code_runs.load()) + "\n";
  out +=
      "airlock_executions_total{kind=\"file\"} " + std::to_string(metrics_.file_ops.load()) + "\n";
  out += "airlock_executions_total{kind=\"run\"} " + std::to_string(metrics_.runs.load()) + "\n";
  out += "# TYPE airlock_transfers_total counter\n";
  out += "airlock_transfers_total{result=\"ok\"} " + std::to_string(metrics_.transfers_ok.load()) +
         "\n";
  out += "airlock_transfers_total{result=\"failed\"} " +
         std::to_string(metrics_.transfers_failed.load()) + "\n";
  out +=
      "# HELP airlock_create_seconds Time to create a sandbox until it is ready.\n"
      "# TYPE airlock_create_seconds histogram\n";
  metrics_.create_seconds.render(out, "airlock_create_seconds", "");
  std::lock_guard lock(metrics_.mu);
  out += "# TYPE airlock_rejections_total counter\n";
  for (const auto& [reason, n] : metrics_.rejections)
    out += "airlock_rejections_total{reason=\"" + reason + "\"} " + std::to_string(n) + "\n";
  out += "# TYPE airlock_runs_total counter\n";
  for (const auto& [status, n] : metrics_.run_results)
    out += "airlock_runs_total{status=\"" + status + "\"} " + std::to_string(n) + "\n";
  out += "# TYPE airlock_sandboxes_reaped_total counter\n";
  for (const auto& [reason, n] : metrics_.reaped)
    out += "airlock_sandboxes_reaped_total{reason=\"" + reason + "\"} " + std::to_string(n) + "\n";
  out += "# TYPE airlock_audit_drops_total counter\nairlock_audit_drops_total " +
         std::to_string(metrics_.audit_drops.load()) + "\n";
  return out;
}

}  // namespace airlock::sandbox
