// The execution's audit summary (docs/audit.md, docs/api.md "Audit"): what the kernel saw the
// run do. Carried by the last event of code runs and commands when the profile audits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace airlock::sdk {

struct AuditProcess {
  uint32_t ns_pid = 0;  // pid inside the sandbox
  std::string path;
  std::vector<std::string> argv;
};

// One distinct connection attempt, with the rule that decided it.
struct AuditConnection {
  bool allowed = false;
  std::string protocol;  // "tcp", "udp", ...
  std::string address;
  uint16_t port = 0;
  std::string rule;       // "rule:2", "loopback", "protected:10.0.0.0/8", "mode:none", ...
  std::string rule_text;  // the rule spelled out
  uint64_t count = 0;
};

struct AuditSummary {
  std::string execution;  // its id in the audit log (`airlock audit query --execution`)
  uint64_t processes_started = 0;
  std::vector<AuditProcess> processes;
  uint64_t connections_allowed = 0;
  uint64_t connections_denied = 0;
  std::vector<AuditConnection> connections;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t events_dropped = 0;
  bool failed = false;       // events were dropped and the profile fails closed
  std::string first_denial;  // the rule that refused the first refused connection; "" if none
  std::string skipped;       // why this execution has no summary of its own; "" normally
};

}  // namespace airlock::sdk
