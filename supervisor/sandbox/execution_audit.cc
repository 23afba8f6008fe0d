#include "supervisor/sandbox/execution_audit.h"

#include "supervisor/sandbox/live_sandbox.h"

namespace airlock::sandbox {

std::unique_ptr<ExecutionAudit> ExecutionAudit::begin(const std::shared_ptr<LiveSandbox>& sb,
                                                      const std::string& execution_id) {
  if (!sb->box) return nullptr;
  auto handle = sb->box->auditHandle();
  if (handle == nullptr) return nullptr;
  bool expected = false;
  const bool owner = sb->audit_claimed.compare_exchange_strong(expected, true);
  if (owner) handle->beginExecution(execution_id);
  return std::unique_ptr<ExecutionAudit>(new ExecutionAudit(sb, handle, execution_id, owner));
}

ExecutionAudit::ExecutionAudit(std::shared_ptr<LiveSandbox> sb,
                               std::weak_ptr<audit::SandboxAudit> handle, std::string execution_id,
                               bool owner)
    : sb_(std::move(sb)),
      handle_(std::move(handle)),
      execution_id_(std::move(execution_id)),
      owner_(owner) {}

ExecutionAudit::~ExecutionAudit() { (void)end(); }

ExecutionAudit::Outcome ExecutionAudit::end() {
  if (ended_) return outcome_;
  ended_ = true;
  outcome_.audit = {{"execution", execution_id_}};
  if (!owner_) {
    outcome_.audit["skipped"] =
        "another execution of this sandbox was being audited; this one's processes and "
        "connections are in that execution's record";
    return outcome_;
  }
  auto handle = handle_.lock();
  if (handle == nullptr) {
    outcome_.audit["error"] = "the sandbox was destroyed before the execution ended";
  } else if (auto summary = handle->endExecution(); !summary) {
    outcome_.audit["error"] = summary.error().message();
  } else {
    outcome_.audit = summary->toJson();
    outcome_.audit["execution"] = execution_id_;
    outcome_.dropped = summary->events_dropped;
    if (summary->failed()) {
      outcome_.failure = "the audit lost " + std::to_string(summary->events_dropped) +
                         " events (ring buffer full) and the profile fails closed "
                         "(audit.fail_closed): the execution's record is incomplete";
    }
  }
  sb_->audit_claimed = false;
  return outcome_;
}

}  // namespace airlock::sandbox
