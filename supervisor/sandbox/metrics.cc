#include "supervisor/sandbox/metrics.h"

#include "supervisor/sandbox/live_sandbox.h"
#include "supervisor/sandbox/manager.h"
#include "supervisor/sandbox/sandbox_usage.h"

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

void LabeledCounter::add(const std::vector<std::string>& values, uint64_t n) {
  std::lock_guard lock(mu_);
  samples_[values] += n;
}

void LabeledCounter::render(std::string& out, const char* name, const char* help,
                            std::initializer_list<const char*> label_names) const {
  metricFamily(out, name, "counter", help);
  std::lock_guard lock(mu_);
  for (const auto& [values, n] : samples_)
    out += std::string(name) + "{" + metricLabels(label_names, values) + "} " + std::to_string(n) +
           "\n";
}

void LabeledHistogram::observe(const std::vector<std::string>& values, double seconds) {
  std::lock_guard lock(mu_);
  series_[values].observe(seconds);
}

void LabeledHistogram::render(std::string& out, const char* name, const char* help,
                              std::initializer_list<const char*> label_names) const {
  metricFamily(out, name, "histogram", help);
  std::lock_guard lock(mu_);
  for (const auto& [values, h] : series_) h.render(out, name, metricLabels(label_names, values));
}

void metricFamily(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

std::string metricLabels(std::initializer_list<const char*> names,
                         const std::vector<std::string>& values) {
  std::string out;
  size_t i = 0;
  for (const char* name : names) {
    if (i != 0) out += ',';
    out += std::string(name) + "=\"";
    for (char c : i < values.size() ? values[i] : std::string()) {
      if (c == '\\' || c == '"')
        out += '\\', out += c;
      else if (c == '\n')
        out += "\\n";
      else
        out += c;
    }
    out += '"';
    ++i;
  }
  return out;
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

void Metrics::executionEnded(const char* kind, const std::string& profile, double seconds,
                             bool timed_out, uint64_t oom, uint64_t network_denied) {
  execution_seconds.observe({kind, profile}, seconds);
  if (timed_out) timeouts.add({profile});
  if (oom != 0) oom_kills.add({profile}, oom);
  if (network_denied != 0) network_denials.add({profile}, network_denied);
}

SResult<Json> Manager::sandboxMetrics(const Caller& caller, const std::string& sb) {
  auto s = findRunning(caller, sb);
  if (!s) return std::unexpected(s.error());
  const LiveSandbox& box = **s;
  return usageJson(box, readSandboxUsage(box.id, box.box ? box.box->pid() : 0),
                   box.executions.load());
}

std::string Manager::metricsText() {
  LiveCounts live;
  {
    std::lock_guard lock(mu_);
    for (const auto& [p, q] : pool_) live.warm += q.size();
    for (const auto& [key, q] : prestarted_) {
      const auto& [profile, language, kind] = key;
      const char* kind_name = kind == PrestartKind::kPlain       ? "plain"
                              : kind == PrestartKind::kPreloaded ? "preloaded"
                                                                 : "checker";
      live.prestarted[{profile, language, kind_name}] = q.size();
    }
    // A one-shot run holds a reservation for as long as its sandbox lives (run_service.cc).
    live.by_state["starting"] = reserved_ - static_cast<int>(metrics_.runs_running);
    live.by_state["running"] = static_cast<int>(metrics_.runs_running);
    for (const auto& [id, s] : sandboxes_) {
      std::lock_guard slock(s->mu);
      ++live.by_state[s->state];
      ++live.sandboxes[{s->tenant, s->profile_name, s->profile.isolation}];
      live.contexts += s->contexts.size();
      for (const auto& [cid, c] : s->commands) live.commands_running += c->running() ? 1 : 0;
    }
  }
  return renderMetrics(metrics_, live);
}

std::string renderMetrics(const Metrics& metrics, const LiveCounts& live) {
  auto sample = [](std::string& out, const std::string& name, uint64_t v) {
    out += name + " " + std::to_string(v) + "\n";
  };
  std::string out;
  metricFamily(out, "airlock_sandboxes", "gauge",
               "Sandboxes by state, one-shot runs' included (starting, running, stopping).");
  for (const char* st : {"starting", "running", "stopping"}) {
    auto it = live.by_state.find(st);
    sample(out, std::string("airlock_sandboxes{state=\"") + st + "\"}",
           it == live.by_state.end() ? 0 : static_cast<uint64_t>(it->second));
  }
  metricFamily(out, "airlock_sandboxes_live", "gauge",
               "Sandboxes of the API alive now, by tenant, profile and isolation backend.");
  for (const auto& [labels, n] : live.sandboxes)
    sample(out,
           "airlock_sandboxes_live{" + metricLabels({"tenant", "profile", "backend"}, labels) + "}",
           n);
  metricFamily(out, "airlock_warm_sandboxes", "gauge",
               "Pre-created sandboxes waiting in the profiles' pools (lifetime.pool_size).");
  sample(out, "airlock_warm_sandboxes", live.warm);
  metricFamily(out, "airlock_prestarted_interpreters", "gauge",
               "Single-use sandboxes whose interpreter waits for its one-shot program, by "
               "profile, language and kind (plain, preloaded, checker).");
  for (const auto& [labels, n] : live.prestarted)
    sample(out,
           "airlock_prestarted_interpreters{" +
               metricLabels({"profile", "language", "kind"}, labels) + "}",
           n);
  metrics.created.render(out, "airlock_sandboxes_created_total",
                         "Sandboxes created, by tenant, profile, backend and start (warm: taken "
                         "from a pool, cold: started for the request).",
                         {"tenant", "profile", "backend", "start"});
  metricFamily(out, "airlock_sandbox_creates_total", "counter",
               "Sandboxes created, by path (warm or cold); airlock_sandboxes_created_total has "
               "the same with tenant, profile and backend.");
  sample(out, "airlock_sandbox_creates_total{path=\"warm\"}", metrics.warm_creates.load());
  sample(out, "airlock_sandbox_creates_total{path=\"cold\"}", metrics.cold_creates.load());
  metricFamily(out, "airlock_code_contexts", "gauge", "Code contexts (interpreters) alive.");
  sample(out, "airlock_code_contexts", live.contexts);
  metricFamily(out, "airlock_commands_running", "gauge",
               "Commands running in sandboxes, foreground and background.");
  sample(out, "airlock_commands_running", live.commands_running);
  metricFamily(out, "airlock_sandboxes_destroyed_total", "counter",
               "Sandboxes destroyed, for any reason.");
  sample(out, "airlock_sandboxes_destroyed_total", metrics.sandboxes_destroyed.load());
  metricFamily(out, "airlock_sandboxes_adopted_total", "counter",
               "Sandboxes taken over from a supervisor that died.");
  sample(out, "airlock_sandboxes_adopted_total", metrics.sandboxes_adopted.load());
  metricFamily(out, "airlock_reviews_held_total", "counter",
               "Executions a reviewer held for an operator's decision.");
  sample(out, "airlock_reviews_held_total", metrics.reviews_held.load());
  metricFamily(out, "airlock_sandbox_create_failures_total", "counter",
               "Sandbox creations that failed after admission.");
  sample(out, "airlock_sandbox_create_failures_total", metrics.create_failures.load());
  metricFamily(out, "airlock_executions_total", "counter",
               "Executions started, by kind (command, code, file, run).");
  sample(out, "airlock_executions_total{kind=\"command\"}", metrics.commands.load());
  sample(out, "airlock_executions_total{kind=\"code\"}", metrics.code_runs.load());
  sample(out, "airlock_executions_total{kind=\"file\"}", metrics.file_ops.load());
  sample(out, "airlock_executions_total{kind=\"run\"}", metrics.runs.load());
  metricFamily(out, "airlock_transfers_total", "counter",
               "Transfers ended, by result (ok, failed).");
  sample(out, "airlock_transfers_total{result=\"ok\"}", metrics.transfers_ok.load());
  sample(out, "airlock_transfers_total{result=\"failed\"}", metrics.transfers_failed.load());
  metrics.create_seconds.render(out, "airlock_sandbox_create_seconds",
                                "Time to create a sandbox until it is ready, by profile and "
                                "backend.",
                                {"profile", "backend"});
  metrics.execution_seconds.render(
      out, "airlock_execution_seconds",
      "Time of one execution from its start to its last event, by kind (code, command: "
      "foreground ones; run: one-shot programs) and profile.",
      {"kind", "profile"});
  metrics.review_seconds.render(out, "airlock_review_seconds",
                                "Time the review chain took for one execution, by verdict "
                                "(allow, deny, hold; a held one's wait for the operator not "
                                "included).",
                                {"verdict"});
  metrics.oom_kills.render(out, "airlock_oom_kills_total",
                           "Processes the kernel's OOM killer ended in executions, by profile.",
                           {"profile"});
  metrics.timeouts.render(out, "airlock_execution_timeouts_total",
                          "Executions ended by their time limit, by profile.", {"profile"});
  metrics.review_denials.render(out, "airlock_review_denials_total",
                                "Executions the review chain or an operator refused, by "
                                "profile and the reviewer that refused.",
                                {"profile", "reviewer"});
  metrics.network_denials.render(out, "airlock_network_denials_total",
                                 "Connections the network policy refused in audited "
                                 "executions, by profile.",
                                 {"profile"});
  metricFamily(out, "airlock_audit_drops_total", "counter",
               "Audit events lost in executions (ring buffer full; docs/audit.md).");
  sample(out, "airlock_audit_drops_total", metrics.audit_drops.load());
  std::lock_guard lock(metrics.mu);
  metricFamily(out, "airlock_runs_total", "counter",
               "One-shot runs (POST /v1/runs) ended, by their record's status.");
  for (const auto& [status, n] : metrics.run_results)
    sample(out, "airlock_runs_total{status=\"" + status + "\"}", n);
  metricFamily(out, "airlock_sandboxes_reaped_total", "counter",
               "Sandboxes ended by the reaper, by reason (idle, lifetime).");
  for (const auto& [reason, n] : metrics.reaped)
    sample(out, "airlock_sandboxes_reaped_total{reason=\"" + reason + "\"}", n);
  // Last: the HTTP layer appends its own reasons to this family (HttpMetrics::render).
  metricFamily(out, "airlock_rejections_total", "counter",
               "Requests refused, by reason: the service's (policy and quota refusals, review "
               "denials) and the HTTP layer's (unauthorized, too large, too many, unavailable).");
  for (const auto& [reason, n] : metrics.rejections)
    sample(out, "airlock_rejections_total{reason=\"" + reason + "\"}", n);
  return out;
}

}  // namespace airlock::sandbox
