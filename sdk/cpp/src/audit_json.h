// AuditSummary from the "audit" object of an exit/end event (lenient, like json_fields.h).
#pragma once

#include <nlohmann/json.hpp>

#include "airlock/client/audit.h"
#include "json_fields.h"

namespace airlock::sdk {

inline AuditSummary auditFromJson(const nlohmann::json& a) {
  AuditSummary s;
  s.execution = fields::str(a, "execution");
  s.processes_started = static_cast<uint64_t>(fields::integer(a, "processes_started"));
  if (auto it = a.find("processes"); it != a.end() && it->is_array()) {
    for (const auto& p : *it) {
      AuditProcess process;
      process.ns_pid = static_cast<uint32_t>(fields::integer(p, "ns_pid"));
      process.path = fields::str(p, "path");
      if (auto argv = p.find("argv"); p.is_object() && argv != p.end() && argv->is_array())
        for (const auto& arg : *argv)
          if (arg.is_string()) process.argv.push_back(arg.get<std::string>());
      s.processes.push_back(std::move(process));
    }
  }
  s.connections_allowed = static_cast<uint64_t>(fields::integer(a, "connections_allowed"));
  s.connections_denied = static_cast<uint64_t>(fields::integer(a, "connections_denied"));
  if (auto it = a.find("connections"); it != a.end() && it->is_array()) {
    for (const auto& c : *it) {
      AuditConnection connection;
      connection.allowed = fields::str(c, "verdict") == "allow";
      connection.protocol = fields::str(c, "protocol");
      connection.address = fields::str(c, "address");
      connection.port = static_cast<uint16_t>(fields::integer(c, "port"));
      connection.rule = fields::str(c, "rule");
      connection.rule_text = fields::str(c, "rule_text");
      connection.count = static_cast<uint64_t>(fields::integer(c, "count"));
      s.connections.push_back(std::move(connection));
    }
  }
  s.bytes_sent = static_cast<uint64_t>(fields::integer(a, "bytes_sent"));
  s.bytes_received = static_cast<uint64_t>(fields::integer(a, "bytes_received"));
  s.events_dropped = static_cast<uint64_t>(fields::integer(a, "events_dropped"));
  s.failed = fields::boolean(a, "failed");
  s.first_denial = fields::str(a, "first_denial");
  s.skipped = fields::str(a, "skipped");
  return s;
}

}  // namespace airlock::sdk
