// The audit trail's own records: sandboxes begin and end (`sandbox`), and what each execution
// ran and what came of it (`execution`), written to the [audit] log, whose observer hands them
// to the lifecycle webhooks (docs/audit.md).

#include "airlock/whole_file.h"
#include "supervisor/audit/lifecycle_records.h"
#include "supervisor/log/log.h"
#include "supervisor/sandbox/live_sandbox.h"
#include "supervisor/sandbox/manager.h"

namespace airlock::sandbox {

void Manager::recordSandbox(const LiveSandbox& s, std::string_view event, std::string_view reason) {
  recordSandbox({s.id, s.tenant, ""}, s.profile_name, s.profile.isolation, event, reason);
}

void Manager::recordSandbox(const audit::RecordIds& ids, std::string_view profile,
                            std::string_view backend, std::string_view event,
                            std::string_view reason) {
  if (audit_log_ == nullptr) return;
  auto fields = audit::sandboxFields(event, reason, profile, backend);
  if (auto w = audit_log_->write("sandbox", ids, audit::wallNowNs(), fields); !w)
    log::error("audit.write", {{"error", w.error().message()}});
}

void Manager::recordExecution(const audit::RecordIds& ids, nlohmann::json fields) {
  if (audit_log_ == nullptr) return;
  if (auto w = audit_log_->write("execution", ids, audit::wallNowNs(), fields); !w)
    log::error("audit.write", {{"error", w.error().message()}});
}

void Manager::recordRun(const RunRequest& req, const RunResult& r,
                        const std::string& execution_id) {
  // The reviewers' own checker programs are the supervisor's, not a tenant's execution.
  if (audit_log_ == nullptr || req.checker || !req.argv.empty()) return;
  audit::ExecutionText what{.kind = "run", .language = r.language, .text = req.code};
  if (!req.inline_code) {
    // The script as the sandbox got it; unreadable now, it is hashed as empty text.
    what.text = readWholeFile(req.script).value_or("");
  }
  auto fields = audit::executionFields(what, options_.policy.audit.record_code);
  if (r.status == Status::kRefused && r.review && !r.review->allowed()) {
    audit::addExecutionRefusal(fields, true, r.message);
  } else {
    fields["status"] = statusName(r.status);
    fields["exit_code"] = r.exit_code;
    fields["signal"] = r.signal;
    fields["timed_out"] = r.status == Status::kTimeout;
    fields["oom"] = r.status == Status::kMemoryLimit || r.oom_kills > 0;
    fields["denied"] = false;
    fields["duration_ms"] = r.exec_ms;
  }
  fields["profile"] = r.profile;
  recordExecution({r.sandbox_id, req.tenant, execution_id}, std::move(fields));
}

void Manager::recordFileTransfer(const Caller& caller, const std::string& sb,
                                 std::string_view direction, const std::string& path,
                                 uint64_t bytes, std::string sha256, const std::string& error,
                                 Clock::time_point t0) {
  if (audit_log_ == nullptr) return;
  auto s = find(caller, sb);
  if (!s) return;
  TransferOutcome t;
  t.direction = std::string(direction);
  t.plugin = "files";
  t.location = "api";
  t.sandbox_path = path;
  t.files = error.empty() ? 1 : 0;
  t.bytes = bytes;
  t.sha256 = error.empty() ? std::move(sha256) : "";
  t.ms = secondsSince(t0) * 1000;
  t.error = error;
  t.status = error.empty() ? "ok" : "error";
  if (auto w = audit_log_->write("transfer", {(*s)->id, (*s)->tenant, ""}, audit::wallNowNs(),
                                 transferJson(t));
      !w)
    log::error("audit.write", {{"error", w.error().message()}});
}

void Manager::stopWebhooks() {
  if (webhooks_ == nullptr) return;
  // An `airlock run` ends with its run: a receiver that is down delays its exit by 1 s at most.
  const bool serve = options_.mode == ManagerOptions::Mode::kServe;
  webhooks_->shutdown(serve ? audit::WebhookSink::kShutdownDeadline : audit::Millis(1000));
  auto st = webhooks_->stats();
  if (st.dropped > 0 || st.failed > 0)
    log::warn("audit.webhook",
              {{"delivered", st.delivered}, {"failed", st.failed}, {"dropped", st.dropped}});
}

}  // namespace airlock::sandbox
