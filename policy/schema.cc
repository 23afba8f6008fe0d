#include "schema.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace airlock::policy::detail {
namespace {

// Captureless lambdas decay to the function pointer whose return type picks the key's type.
#define AIRLOCK_FIELD(table, key, member)             \
  Field {                                             \
    table, key, +[](Profile& p) { return &p.member; } \
  }
#define AIRLOCK_SERVER_FIELD(key, member)         \
  ServerField {                                   \
    "", key, +[](Server& s) { return &s.member; } \
  }
#define AIRLOCK_TENANT_FIELD(key, member)         \
  TenantField {                                   \
    "", key, +[](Tenant& t) { return &t.member; } \
  }
#define AIRLOCK_AUDIT_FIELD(key, member)                 \
  AuditField {                                           \
    "", key, +[](AuditSettings& a) { return &a.member; } \
  }

const std::array kFields = {
    AIRLOCK_FIELD("", "description", description),
    AIRLOCK_FIELD("", "isolation", isolation),
    AIRLOCK_FIELD("", "isolation_choices", isolation_choices),
    AIRLOCK_FIELD("", "user", user),
    AIRLOCK_FIELD("", "capabilities", capabilities),
    AIRLOCK_FIELD("", "hostname", hostname),
    AIRLOCK_FIELD("", "languages", languages),
    AIRLOCK_FIELD("", "landlock", landlock),
    AIRLOCK_FIELD("", "ports", ports),
    AIRLOCK_FIELD("", "env", env),
    AIRLOCK_FIELD("limits", "timeout_s", limits.timeout_s),
    AIRLOCK_FIELD("limits", "memory_mb", limits.memory_mb),
    AIRLOCK_FIELD("limits", "pids", limits.pids),
    AIRLOCK_FIELD("limits", "cpu_percent", limits.cpu_percent),
    AIRLOCK_FIELD("limits", "file_size_mb", limits.file_size_mb),
    AIRLOCK_FIELD("limits", "open_files", limits.open_files),
    AIRLOCK_FIELD("limits", "output_bytes", limits.output_bytes),
    AIRLOCK_FIELD("limits", "workspace_mb", limits.workspace_mb),
    AIRLOCK_FIELD("limits", "tmp_mb", limits.tmp_mb),
    AIRLOCK_FIELD("lifetime", "keep_alive_s", lifetime.keep_alive_s),
    AIRLOCK_FIELD("lifetime", "max_keep_alive_s", lifetime.max_keep_alive_s),
    AIRLOCK_FIELD("lifetime", "lifetime_s", lifetime.lifetime_s),
    AIRLOCK_FIELD("lifetime", "max_lifetime_s", lifetime.max_lifetime_s),
    AIRLOCK_FIELD("lifetime", "pool_size", lifetime.pool_size),
    AIRLOCK_FIELD("lifetime", "prestart", lifetime.prestart),
    AIRLOCK_FIELD("lifetime", "preload", lifetime.preload),
    AIRLOCK_FIELD("lifetime", "fast_exit", lifetime.fast_exit),
    AIRLOCK_FIELD("filesystem", "image", filesystem.image),
    AIRLOCK_FIELD("filesystem", "readonly_paths", filesystem.readonly_paths),
    AIRLOCK_FIELD("network", "mode", network.mode),
    AIRLOCK_FIELD("network", "rules", network.rules),
    AIRLOCK_FIELD("seccomp", "allow", seccomp.allow),
    AIRLOCK_FIELD("seccomp", "deny", seccomp.deny),
    AIRLOCK_FIELD("gvisor", "runsc", gvisor.runsc),
    AIRLOCK_FIELD("gvisor", "platform", gvisor.platform),
    AIRLOCK_FIELD("gvisor", "overlay", gvisor.overlay),
    AIRLOCK_FIELD("gvisor", "flags", gvisor.flags),
    AIRLOCK_FIELD("microvm", "qemu", microvm.qemu),
    AIRLOCK_FIELD("microvm", "accel", microvm.accel),
    AIRLOCK_FIELD("microvm", "vcpus", microvm.vcpus),
    AIRLOCK_FIELD("microvm", "memory_mb", microvm.memory_mb),
    AIRLOCK_FIELD("microvm", "kernel", microvm.kernel),
    AIRLOCK_FIELD("microvm", "cache_dir", microvm.cache_dir),
    AIRLOCK_FIELD("microvm", "boot_timeout_s", microvm.boot_timeout_s),
    AIRLOCK_FIELD("microvm", "snapshots", microvm.snapshots),
    AIRLOCK_FIELD("audit", "exec", audit.exec),
    AIRLOCK_FIELD("audit", "network", audit.network),
    AIRLOCK_FIELD("audit", "syscalls", audit.syscalls),
    AIRLOCK_FIELD("audit", "fail_closed", audit.fail_closed),
    AIRLOCK_FIELD("review", "chain", review.chain),
    AIRLOCK_FIELD("review", "fail_open", review.fail_open),
    AIRLOCK_FIELD("review", "cache_entries", review.cache_entries),
    AIRLOCK_FIELD("review", "hold_deadline_s", review.hold_deadline_s),
    AIRLOCK_FIELD("review", "plugins", review.plugins),
    AIRLOCK_FIELD("review.limits", "max_bytes", review.limits.max_bytes),
    AIRLOCK_FIELD("review.limits", "max_lines", review.limits.max_lines),
    AIRLOCK_FIELD("review.limits", "allow_binary", review.limits.allow_binary),
    AIRLOCK_FIELD("review.patterns", "max_scan_bytes", review.patterns.max_scan_bytes),
    AIRLOCK_FIELD("review.patterns", "rules", review.patterns.rules),
    AIRLOCK_FIELD("review.python_ast", "deny_imports", review.python_ast.deny_imports),
    AIRLOCK_FIELD("review.python_ast", "deny_calls", review.python_ast.deny_calls),
    AIRLOCK_FIELD("review.python_ast", "deny_attributes", review.python_ast.deny_attributes),
    AIRLOCK_FIELD("review.python_ast", "max_bytes", review.python_ast.max_bytes),
    AIRLOCK_FIELD("review.python_ast", "timeout_ms", review.python_ast.timeout_ms),
    AIRLOCK_FIELD("review.python_ast", "pool_size", review.python_ast.pool_size),
    AIRLOCK_FIELD("review.shell", "mode", review.shell.mode),
    AIRLOCK_FIELD("review.shell", "allow", review.shell.allow),
    AIRLOCK_FIELD("review.command", "argv", review.command.argv),
    AIRLOCK_FIELD("review.command", "timeout_ms", review.command.timeout_ms),
    AIRLOCK_FIELD("review.webhook", "url", review.webhook.url),
    AIRLOCK_FIELD("review.webhook", "timeout_ms", review.webhook.timeout_ms),
    AIRLOCK_FIELD("review.webhook", "token_file", review.webhook.token_file),
    AIRLOCK_FIELD("transfer", "plugins", transfer.plugins),
#define AIRLOCK_TRANSFER_LIMITS(table, member)                       \
  AIRLOCK_FIELD(table, "max_mb", member.max_mb),                     \
      AIRLOCK_FIELD(table, "sandbox_max_mb", member.sandbox_max_mb), \
      AIRLOCK_FIELD(table, "max_files", member.max_files),           \
      AIRLOCK_FIELD(table, "max_depth", member.max_depth),           \
      AIRLOCK_FIELD(table, "max_ratio", member.max_ratio)
    AIRLOCK_TRANSFER_LIMITS("transfer.archive", transfer.archive),
    AIRLOCK_TRANSFER_LIMITS("transfer.http", transfer.http.limits),
    AIRLOCK_FIELD("transfer.http", "allow", transfer.http.allow),
    AIRLOCK_FIELD("transfer.http", "redirects", transfer.http.redirects),
    AIRLOCK_FIELD("transfer.http", "connect_timeout_s", transfer.http.connect_timeout_s),
    AIRLOCK_FIELD("transfer.http", "idle_timeout_s", transfer.http.idle_timeout_s),
    AIRLOCK_FIELD("transfer.http", "timeout_s", transfer.http.timeout_s),
    AIRLOCK_FIELD("transfer.http", "allow_private", transfer.http.allow_private),
    AIRLOCK_FIELD("transfer.http", "ca_file", transfer.http.ca_file),
    AIRLOCK_TRANSFER_LIMITS("transfer.hostdir", transfer.hostdir.limits),
    AIRLOCK_FIELD("transfer.hostdir", "roots", transfer.hostdir.roots),
#undef AIRLOCK_TRANSFER_LIMITS
    AIRLOCK_FIELD("packages", "allow", packages.allow),
    AIRLOCK_FIELD("packages", "deny", packages.deny),
    AIRLOCK_FIELD("packages", "max_file_mb", packages.max_file_mb),
    AIRLOCK_FIELD("packages", "max_sandbox_mb", packages.max_sandbox_mb),
    AIRLOCK_FIELD("packages", "sdists", packages.sdists),
    AIRLOCK_FIELD("packages", "pins", packages.pins),
};

const std::array kServerFields = {
    AIRLOCK_SERVER_FIELD("socket", socket),
    AIRLOCK_SERVER_FIELD("socket_mode", socket_mode),
    AIRLOCK_SERVER_FIELD("socket_group", socket_group),
    AIRLOCK_SERVER_FIELD("tcp", tcp),
    AIRLOCK_SERVER_FIELD("tls_cert", tls_cert),
    AIRLOCK_SERVER_FIELD("tls_key", tls_key),
    AIRLOCK_SERVER_FIELD("tls_client_ca", tls_client_ca),
    AIRLOCK_SERVER_FIELD("node", node),
    AIRLOCK_SERVER_FIELD("agent_check", agent_check),
    AIRLOCK_SERVER_FIELD("mcp_max_sessions_per_tenant", mcp_max_sessions_per_tenant),
    AIRLOCK_SERVER_FIELD("mcp_idle_timeout_s", mcp_idle_timeout_s),
    AIRLOCK_SERVER_FIELD("max_connections", max_connections),
    AIRLOCK_SERVER_FIELD("max_connections_per_client", max_connections_per_client),
    AIRLOCK_SERVER_FIELD("max_requests", max_requests),
    AIRLOCK_SERVER_FIELD("max_requests_per_client", max_requests_per_client),
    AIRLOCK_SERVER_FIELD("idle_timeout_s", idle_timeout_s),
    AIRLOCK_SERVER_FIELD("header_timeout_s", header_timeout_s),
    AIRLOCK_SERVER_FIELD("io_timeout_s", io_timeout_s),
    AIRLOCK_SERVER_FIELD("max_json_body_kb", max_json_body_kb),
    AIRLOCK_SERVER_FIELD("max_upload_mb", max_upload_mb),
    AIRLOCK_SERVER_FIELD("max_sandboxes", max_sandboxes),
    AIRLOCK_SERVER_FIELD("state_dir", state_dir),
    AIRLOCK_SERVER_FIELD("drain_timeout_s", drain_timeout_s),
    AIRLOCK_SERVER_FIELD("reattach_grace_s", reattach_grace_s),
    AIRLOCK_SERVER_FIELD("log_level", log_level),
    AIRLOCK_SERVER_FIELD("log_format", log_format),
};

const std::array kTenantFields = {
    AIRLOCK_TENANT_FIELD("max_sandboxes", max_sandboxes),
    AIRLOCK_TENANT_FIELD("max_memory_mb", max_memory_mb),
    AIRLOCK_TENANT_FIELD("profiles", profiles),
    AIRLOCK_TENANT_FIELD("token_sha256", token_sha256),
};

#undef AIRLOCK_FIELD
#undef AIRLOCK_SERVER_FIELD
const std::array kAuditFields = {
    AIRLOCK_AUDIT_FIELD("log", log),
    AIRLOCK_AUDIT_FIELD("max_mb", max_mb),
    AIRLOCK_AUDIT_FIELD("keep", keep),
    AIRLOCK_AUDIT_FIELD("ring_kb", ring_kb),
    AIRLOCK_AUDIT_FIELD("run_ring_kb", run_ring_kb),
    AIRLOCK_AUDIT_FIELD("record_code", record_code),
    AIRLOCK_AUDIT_FIELD("webhook_url", webhook_url),
    AIRLOCK_AUDIT_FIELD("webhook_secret_file", webhook_secret_file),
    AIRLOCK_AUDIT_FIELD("webhook_events", webhook_events),
    AIRLOCK_AUDIT_FIELD("webhook_timeout_ms", webhook_timeout_ms),
    AIRLOCK_AUDIT_FIELD("webhook_max_retries", webhook_max_retries),
    AIRLOCK_AUDIT_FIELD("webhook_queue", webhook_queue),
};

#define AIRLOCK_EGRESS_FIELD(key, member)                 \
  EgressField {                                           \
    "", key, +[](EgressSettings& e) { return &e.member; } \
  }
const std::array kEgressFields = {
    AIRLOCK_EGRESS_FIELD("ipv4_range", ipv4_range),
    AIRLOCK_EGRESS_FIELD("ipv6_range", ipv6_range),
    AIRLOCK_EGRESS_FIELD("nameservers", nameservers),
    AIRLOCK_EGRESS_FIELD("mtu", mtu),
};

#define AIRLOCK_TRANSFER_FIELD(key, member)                 \
  TransferField {                                           \
    "", key, +[](TransferSettings& t) { return &t.member; } \
  }
const std::array kTransferFields = {
    AIRLOCK_TRANSFER_FIELD("roots", roots),
    AIRLOCK_TRANSFER_FIELD("writable_roots", writable_roots),
    AIRLOCK_TRANSFER_FIELD("spool_dir", spool_dir),
};

#define AIRLOCK_PACKAGES_FIELD(key, member)                \
  PackagesField {                                          \
    "", key, +[](PackageSettings& p) { return &p.member; } \
  }
const std::array kPackagesFields = {
    AIRLOCK_PACKAGES_FIELD("pypi_index", pypi_index),
    AIRLOCK_PACKAGES_FIELD("npm_registry", npm_registry),
    AIRLOCK_PACKAGES_FIELD("cache_dir", cache_dir),
    AIRLOCK_PACKAGES_FIELD("ca_file", ca_file),
    AIRLOCK_PACKAGES_FIELD("timeout_s", timeout_s),
    AIRLOCK_PACKAGES_FIELD("port", port),
};

#undef AIRLOCK_PACKAGES_FIELD
#undef AIRLOCK_TENANT_FIELD
#undef AIRLOCK_AUDIT_FIELD
#undef AIRLOCK_EGRESS_FIELD
#undef AIRLOCK_TRANSFER_FIELD

constexpr std::array<std::string_view, 9> kSubTables = {"limits",  "lifetime", "filesystem",
                                                        "network", "seccomp",  "audit",
                                                        "gvisor",  "microvm",  "packages"};

constexpr std::array<std::string_view, 7> kReviewTables = {
    "review",       "review.limits",  "review.patterns", "review.python_ast",
    "review.shell", "review.command", "review.webhook"};

constexpr std::array<std::string_view, 4> kTransferTables = {"transfer", "transfer.archive",
                                                             "transfer.http", "transfer.hostdir"};

}  // namespace

std::span<const Field> fields() { return kFields; }

std::span<const std::string_view> reviewTables() { return kReviewTables; }

std::span<const std::string_view> transferTables() { return kTransferTables; }

std::span<const TransferField> transferFields() { return kTransferFields; }

std::span<const ServerField> serverFields() { return kServerFields; }

std::span<const TenantField> tenantFields() { return kTenantFields; }

std::span<const AuditField> auditFields() { return kAuditFields; }

std::span<const EgressField> egressFields() { return kEgressFields; }

std::span<const PackagesField> packagesFields() { return kPackagesFields; }

std::span<const std::string_view> subTables() { return kSubTables; }

const Field* findField(std::string_view table, std::string_view key) {
  for (const Field& f : kFields) {
    if (f.table == table && f.key == key) return &f;
  }
  return nullptr;
}

size_t editDistance(std::string_view a, std::string_view b) {
  const size_t n = a.size(), m = b.size();
  std::vector<size_t> prev2(m + 1), prev(m + 1), cur(m + 1);
  for (size_t j = 0; j <= m; ++j) prev[j] = j;
  for (size_t i = 1; i <= n; ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= m; ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        cur[j] = std::min(cur[j], prev2[j - 2] + 1);
      }
    }
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return prev[m];
}

std::string_view closest(std::string_view word, std::span<const std::string_view> candidates) {
  std::string lower(word);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string_view best;
  size_t best_distance = SIZE_MAX;
  for (std::string_view c : candidates) {
    size_t d = editDistance(lower, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  // Two edits at most, and never more than a third of the word: "cpu" is not a typo of "pids".
  if (best.empty() || best_distance > 2 || best_distance * 3 > std::max<size_t>(word.size(), 3)) {
    return {};
  }
  return best;
}

}  // namespace airlock::policy::detail
