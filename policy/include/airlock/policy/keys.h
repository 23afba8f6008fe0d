// Introspection of the policy schema, for the CLI (`airlock policy explain`, `--set KEY=VALUE`)
// and for tests that keep policy/examples/reference.toml in step with policy.h.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "airlock/policy/policy.h"
#include "airlock/result.h"

namespace airlock::policy {

// Every key a [profiles.<name>] table accepts, dotted relative to the profile, in reference.toml
// order: "description", ..., "env", "extends", "limits.timeout_s", ..., "seccomp.deny".
std::vector<std::string> profileKeys();

// Every key of [server] and of a [tenants.<name>] table, in reference.toml order.
std::vector<std::string> serverKeys();
std::vector<std::string> tenantKeys();
// Every key of the top-level [audit] table, in reference.toml order.
std::vector<std::string> auditKeys();
// Every key of the top-level [egress] table, in reference.toml order.
std::vector<std::string> egressKeys();
// Every key of the top-level [packages] table, in reference.toml order.
std::vector<std::string> packageSettingsKeys();
// Every key of the top-level [transfer] table, in reference.toml order.
std::vector<std::string> transferKeys();

// The profile as a complete `[profiles.<name>]` TOML table (every key, sub-tables included),
// which parse() reads back into an equal profile.
std::string profileToToml(const Profile& profile);
// The same for `[server]` and `[tenants.<name>]`.
std::string serverToToml(const Server& server);
std::string tenantToToml(const Tenant& tenant);
std::string auditSettingsToToml(const AuditSettings& audit);
std::string egressSettingsToToml(const EgressSettings& egress);
std::string packageSettingsToToml(const PackageSettings& packages);
std::string transferSettingsToToml(const TransferSettings& transfer);

// What `airlock policy explain` prints: the policy's source and hash, the profile's effective
// values and relaxations, then [server] and the tenants (only `tenant` when it is not null).
std::string explainText(const Policy& policy, const Profile& profile,
                        const Tenant* tenant = nullptr);

// One `KEY=VALUE` override onto a profile, with KEY a dotted profile key ("limits.memory_mb=1024",
// "languages=[\"python\"]", "hostname=box"). VALUE is TOML; a bare word is taken as a string for
// string keys. Same type and range checks as the file; run validate() afterwards.
Result<> applyOverride(Profile& profile, std::string_view assignment);

// The number of a capability name ("CAP_CHOWN" → 0), or -1 when it names no Linux capability.
int capabilityNumber(std::string_view name);

// sha256 of bytes as 64 lowercase hex digits (the policy hash).
std::string sha256Hex(std::string_view bytes);

}  // namespace airlock::policy
