// One execution's eBPF audit (docs/audit.md): begun before the request reaches the agent, ended
// when its last event ("exit" or "end") passes. The summary goes into that event as "audit".
//
// A sandbox's audit follows one execution at a time (its processes share one cgroup, so events
// cannot be told apart by execution): while one runs, another execution of the same sandbox
// gets "audit": {"execution": ..., "skipped": "..."} and its events count in the first one's.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "supervisor/audit/engine.h"

namespace airlock::sandbox {

struct LiveSandbox;

class ExecutionAudit {
 public:
  // Null when the sandbox is not audited.
  static std::unique_ptr<ExecutionAudit> begin(const std::shared_ptr<LiveSandbox>& sb,
                                               const std::string& execution_id);
  // An execution abandoned before its end (client gone) is still closed, so its record is logged.
  ~ExecutionAudit();
  ExecutionAudit(const ExecutionAudit&) = delete;
  ExecutionAudit& operator=(const ExecutionAudit&) = delete;

  struct Outcome {
    nlohmann::json audit;  // the summary plus "execution" (docs/api.md)
    // Non-empty when events were dropped under audit.fail_closed: the execution must be
    // reported failed, with this reason.
    std::string failure;
    uint64_t dropped = 0;
  };
  // Closes the execution (once; later calls return the same outcome).
  Outcome end();

 private:
  ExecutionAudit(std::shared_ptr<LiveSandbox> sb, std::weak_ptr<audit::SandboxAudit> handle,
                 std::string execution_id, bool owner);

  std::shared_ptr<LiveSandbox> sb_;
  std::weak_ptr<audit::SandboxAudit> handle_;
  std::string execution_id_;
  bool owner_;  // false: another execution holds the sandbox's audit
  bool ended_ = false;
  Outcome outcome_;
};

}  // namespace airlock::sandbox
