// AuditSummary: folding events into per-execution totals.
#include "supervisor/audit/summary.h"

namespace airlock::audit {

void AuditSummary::add(const ExecEvent& e) {
  ++processes_started;
  if (processes.size() >= kSummaryListCap) {
    processes_truncated = true;
    return;
  }
  processes.push_back({e.origin.ns_pid, e.path, e.argv});
}

void AuditSummary::add(const NetEvent& e, const NetPolicy& policy) {
  (e.allowed ? connections_allowed : connections_denied) += 1;
  std::string protocol = protocolName(e.protocol);
  for (auto& c : connections) {
    if (c.allowed == e.allowed && c.port == e.port && c.rule == e.rule && c.address == e.address &&
        c.protocol == protocol) {
      ++c.count;
      return;
    }
  }
  if (connections.size() >= kSummaryListCap) {
    connections_truncated = true;
    return;
  }
  connections.push_back({.allowed = e.allowed,
                         .protocol = protocol,
                         .address = e.address,
                         .port = e.port,
                         .rule = e.rule,
                         .rule_id = ruleId(e.rule),
                         .rule_text = describeRule(e.rule, policy),
                         .count = 1});
}

std::string AuditSummary::firstDenial() const {
  for (const auto& c : connections) {
    if (c.allowed) continue;
    std::string host = c.address.find(':') != std::string::npos ? "[" + c.address + "]" : c.address;
    return "connection to " + host + ":" + std::to_string(c.port) + "/" + c.protocol +
           " refused by " + c.rule_text;
  }
  return {};
}

nlohmann::json AuditSummary::toJson() const {
  nlohmann::json procs = nlohmann::json::array();
  for (const auto& p : processes) {
    procs.push_back({{"ns_pid", p.ns_pid}, {"path", p.path}, {"argv", p.argv}});
  }
  nlohmann::json conns = nlohmann::json::array();
  for (const auto& c : connections) {
    conns.push_back({{"verdict", c.allowed ? "allow" : "deny"},
                     {"protocol", c.protocol},
                     {"address", c.address},
                     {"port", c.port},
                     {"rule", c.rule_id},
                     {"rule_text", c.rule_text},
                     {"count", c.count}});
  }
  nlohmann::json j = {
      {"processes_started", processes_started},
      {"processes", procs},
      {"processes_truncated", processes_truncated},
      {"connections_allowed", connections_allowed},
      {"connections_denied", connections_denied},
      {"connections", conns},
      {"connections_truncated", connections_truncated},
      {"bytes_sent", bytes_sent},
      {"bytes_received", bytes_received},
      {"packets_sent", packets_sent},
      {"packets_received", packets_received},
      {"events_dropped", events_dropped},
      {"fail_closed", fail_closed},
      {"failed", failed()},
  };
  if (syscalls_counted) j["syscalls"] = syscalls;
  if (std::string denial = firstDenial(); !denial.empty()) j["first_denial"] = denial;
  return j;
}

}  // namespace airlock::audit
