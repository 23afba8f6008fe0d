// `airlock policy explain`: the effective values of one profile, the server and the tenants, as
// an operator reads them (units spelled out, relaxations named).
#include <algorithm>
#include <sstream>

#include "airlock/policy/keys.h"
#include "airlock/policy/policy.h"
#include "check.h"

namespace airlock::policy {
namespace {

std::string listOr(const std::vector<std::string>& names, std::string_view none) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? std::string(none) : out;
}

void explainProfile(std::ostream& out, const Profile& p) {
  const Limits& l = p.limits;
  const Lifetime& t = p.lifetime;
  out << "profile '" << p.name << "'" << (p.description.empty() ? "" : ": " + p.description) << "\n"
      << "  isolation " << p.isolation << ", user " << p.user << ", network " << p.network.mode
      << ", landlock " << (p.landlock ? "on" : "off") << "\n"
      << "  limits: timeout " << l.timeout_s << " s, memory " << l.memory_mb << " MiB, pids "
      << l.pids << ", cpu " << l.cpu_percent << " %, file size " << l.file_size_mb
      << " MiB, open files " << l.open_files << ", output " << l.output_bytes
      << " bytes/stream, workspace " << l.workspace_mb << " MiB, /tmp " << l.tmp_mb << " MiB\n"
      << "  lifetime: keep-alive " << t.keep_alive_s << " s (requests up to " << t.max_keep_alive_s
      << " s), lifetime " << t.lifetime_s << " s (requests up to " << t.max_lifetime_s
      << " s), warm pool " << t.pool_size << "\n";
  const Audit& a = p.audit;
  out << "  network rules: " << listOr(p.network.rules, "none") << "\n"
      << "  audit: exec " << (a.exec ? "on" : "off") << ", network " << (a.network ? "on" : "off")
      << ", syscall counts " << (a.syscalls ? "on" : "off") << ", drops "
      << (a.fail_closed ? "fail the execution" : "are counted") << "\n";
  const Transfer& x = p.transfer;
  auto caps = [](const TransferLimits& l) {
    return std::to_string(l.max_mb) + " MiB per transfer, " + std::to_string(l.sandbox_max_mb) +
           " MiB per sandbox, " + std::to_string(l.max_files) + " files, depth " +
           std::to_string(l.max_depth) + ", ratio " + std::to_string(l.max_ratio);
  };
  out << "  transfers: plugins " << listOr(x.plugins, "none") << "\n"
      << "    archive: " << caps(x.archive) << "\n"
      << "    http: " << caps(x.http.limits) << "; URLs " << listOr(x.http.allow, "none")
      << "; redirects " << x.http.redirects << "; timeouts connect " << x.http.connect_timeout_s
      << " s, idle " << x.http.idle_timeout_s << " s, total " << x.http.timeout_s
      << " s; protected ranges blocked"
      << (x.http.allow_private.empty() ? "" : " except " + listOr(x.http.allow_private, ""))
      << "; CAs "
      << (x.http.ca_file.empty() ? "the system's" : "the system's and " + x.http.ca_file) << "\n"
      << "    hostdir: " << caps(x.hostdir.limits) << "; roots "
      << (x.hostdir.roots == std::vector<std::string>{"*"} ? "all declared"
                                                           : listOr(x.hostdir.roots, "none"))
      << "\n";
  out << "  languages:";
  for (const auto& lang : p.languages) out << " " << lang;
  out << "\n";
  auto rel = relaxations(p);
  if (rel.empty()) out << "  relaxations: none\n";
  for (const auto& r : rel) out << "  relaxation: " << r << "\n";
}

void explainServer(std::ostream& out, const Policy& policy) {
  const Server& s = policy.server;
  uint64_t pooled = 0;
  for (const auto& [name, p] : policy.profiles) pooled += p.lifetime.pool_size;
  out << "server\n"
      << "  socket " << s.socket << ", mode " << s.socket_mode << ", group "
      << (s.socket_group.empty() ? "root's" : s.socket_group) << "\n"
      << "  tcp "
      << (s.tcp.empty() ? "off"
                        : s.tcp + (s.tls_cert.empty() ? "" : " with TLS") +
                              (s.tls_client_ca.empty() ? "" : " and client certificates") +
                              " (bearer tokens only)")
      << "\n"
      << "  connections " << s.max_connections << " (" << s.max_connections_per_client
      << " a client), requests " << s.max_requests << " (" << s.max_requests_per_client
      << " a client), timeouts idle " << s.idle_timeout_s << " s, header " << s.header_timeout_s
      << " s, io " << s.io_timeout_s << " s\n"
      << "  JSON body " << s.max_json_body_kb << " KiB, upload " << s.max_upload_mb
      << " MiB, sandboxes " << s.max_sandboxes << " (warm pools " << pooled << "), drain "
      << s.drain_timeout_s << " s, reattach grace " << s.reattach_grace_s << " s\n"
      << "  state dir " << s.state_dir << "\n";
  auto rel = detail::serverRelaxations(s);
  if (rel.empty()) out << "  relaxations: none\n";
  for (const auto& r : rel) out << "  relaxation: " << r << "\n";
  const AuditSettings& a = policy.audit;
  out << "audit\n"
      << "  log "
      << (a.log.empty() ? "off"
                        : a.log + " (rotated at " + std::to_string(a.max_mb) + " MiB, " +
                              std::to_string(a.keep) + " kept)")
      << ", ring buffer " << a.ring_kb << " KiB (serve), " << a.run_ring_kb << " KiB (run)\n"
      << "  execution records: " << (a.record_code ? "sha256 and the code itself" : "sha256 only")
      << "\n";
  if (!a.webhook_url.empty()) {
    out << "  webhook " << a.webhook_url << " (";
    for (size_t i = 0; i < a.webhook_events.size(); ++i)
      out << (i ? ", " : "") << a.webhook_events[i];
    out << "; " << (a.webhook_secret_file.empty() ? "unsigned" : "signed") << ")\n";
  }
  const TransferSettings& t = policy.transfer;
  out << "transfer\n  roots:";
  if (t.roots.empty()) out << " none";
  for (const auto& [name, path] : t.roots) {
    const bool writable =
        std::find(t.writable_roots.begin(), t.writable_roots.end(), name) != t.writable_roots.end();
    out << " " << name << " = " << path << (writable ? " (writable)" : " (read-only)") << ";";
  }
  out << "\n  uploads spooled in " << t.spool_dir << "\n";
}

void explainTenant(std::ostream& out, const Tenant& t) {
  out << "  tenant '" << t.name << "': sandboxes " << t.max_sandboxes
      << (t.max_sandboxes == 0 ? " (disabled)" : "") << ", memory " << t.max_memory_mb
      << " MiB, profiles " << listOr(t.profiles, "all") << ", token ";
  if (t.token_sha256.empty()) {
    out << "none (Unix socket only)\n";
  } else {
    out << "sha256 " << t.token_sha256.substr(0, 12) << "...\n";
  }
}

}  // namespace

std::string explainText(const Policy& policy, const Profile& profile, const Tenant* tenant) {
  std::ostringstream out;
  out << "policy " << policy.source << " (sha256 " << policy.hash << ")\n";
  explainProfile(out, profile);
  explainServer(out, policy);
  out << "tenants\n";
  if (tenant != nullptr) {
    explainTenant(out, *tenant);
  } else {
    for (const auto& [name, t] : policy.tenants) explainTenant(out, t);
  }
  return out.str();
}

}  // namespace airlock::policy
