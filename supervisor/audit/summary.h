// What one execution did, as the eBPF programs saw it: the audit summary every execution result
// carries and the "execution" record of the audit log (docs/audit.md).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "supervisor/audit/events.h"
#include "supervisor/audit/net_rules.h"

namespace airlock::audit {

// Lists in a summary are capped so a busy execution cannot grow its result without bound; the
// counters stay exact and `*_truncated` says that entries were left out.
inline constexpr size_t kSummaryListCap = 64;

struct ProcessEntry {
  uint32_t ns_pid = 0;
  std::string path;
  std::vector<std::string> argv;
};

// One distinct (verdict, destination, rule) with how often it was seen.
struct ConnectionEntry {
  bool allowed = false;
  std::string protocol;  // "tcp", "udp", ...
  std::string address;
  uint16_t port = 0;
  uint32_t rule = 0;
  std::string rule_id;    // ruleId(rule): "rule:2", "protected:169.254.169.254/32", "mode:none"
  std::string rule_text;  // describeRule(rule, policy)
  uint64_t count = 0;
};

struct AuditSummary {
  uint64_t processes_started = 0;
  std::vector<ProcessEntry> processes;
  bool processes_truncated = false;
  uint64_t connections_allowed = 0;
  uint64_t connections_denied = 0;
  std::vector<ConnectionEntry> connections;
  bool connections_truncated = false;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t packets_sent = 0;
  uint64_t packets_received = 0;
  bool syscalls_counted = false;
  std::map<std::string, uint64_t> syscalls;  // name (or "nr:<n>") -> calls
  uint64_t events_dropped = 0;
  bool fail_closed = false;  // policy: drops fail the execution
  // Drops happened under fail_closed: the record is incomplete and the caller must mark the
  // execution failed.
  bool failed() const { return fail_closed && events_dropped > 0; }

  void add(const ExecEvent& e);
  void add(const NetEvent& e, const NetPolicy& policy);
  // The first denied connection, as a sentence for the execution result ("connect to
  // 10.0.0.1:443/tcp refused by protected range 10.0.0.0/8 (...)"), or "" when none was refused.
  std::string firstDenial() const;
  nlohmann::json toJson() const;
};

}  // namespace airlock::audit
