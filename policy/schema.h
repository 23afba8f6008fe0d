// The one table of keys a profile accepts. The parser, the TOML writer, overrides and the
// reference test all walk it, so a key added here is known everywhere at once.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "airlock/policy/policy.h"

namespace airlock::policy::detail {

// Where a key's value lives in a struct S (Profile, Server, Tenant); the variant alternative is
// the key's TOML type.
template <typename S>
using FieldRefOf =
    std::variant<std::string* (*)(S&), std::vector<std::string>* (*)(S&),
                 std::map<std::string, std::string>* (*)(S&), bool* (*)(S&), uint32_t* (*)(S&),
                 uint64_t* (*)(S&), std::vector<ReviewRule>* (*)(S&),
                 std::vector<ReviewPlugin>* (*)(S&)>;

template <typename S>
struct FieldOf {
  // "" for keys directly in the struct's table, else "limits", ..., "review", "review.limits"
  std::string_view table;
  std::string_view key;
  FieldRefOf<S> ref;

  // "limits.memory_mb", "hostname"
  std::string path() const {
    if (table.empty()) return std::string(key);
    return std::string(table) + "." + std::string(key);
  }
};

using Field = FieldOf<Profile>;
using FieldRef = FieldRefOf<Profile>;
using ServerField = FieldOf<Server>;
using TenantField = FieldOf<Tenant>;
using AuditField = FieldOf<AuditSettings>;
using EgressField = FieldOf<EgressSettings>;
using TransferField = FieldOf<TransferSettings>;
using PackagesField = FieldOf<PackageSettings>;

// Every field of Profile except `name`, in reference.toml order.
std::span<const Field> fields();
// Sub-tables of a profile in order: "limits", "lifetime", "filesystem", "network", "seccomp",
// "audit", "gvisor", "microvm", "packages".
std::span<const std::string_view> subTables();
// The review table and the reviewers' tables nested in it: "review", "review.limits", ...
inline constexpr std::string_view kReviewTable = "review";
std::span<const std::string_view> reviewTables();
// The transfer table and its plugins' tables: "transfer", "transfer.archive", ...
inline constexpr std::string_view kTransferTable = "transfer";
std::span<const std::string_view> transferTables();
const Field* findField(std::string_view table, std::string_view key);

// Every field of Server, and of Tenant except `name`, in reference.toml order.
std::span<const ServerField> serverFields();
std::span<const TenantField> tenantFields();
// Every key of the top-level [audit] table, in reference.toml order.
std::span<const AuditField> auditFields();
// Every key of the top-level [egress] table, in reference.toml order.
std::span<const EgressField> egressFields();
// Every key of the top-level [transfer] table, in reference.toml order.
std::span<const TransferField> transferFields();
// Every key of the top-level [packages] table, in reference.toml order.
std::span<const PackagesField> packagesFields();

template <typename S>
const FieldOf<S>* findIn(std::span<const FieldOf<S>> fields, std::string_view key) {
  for (const FieldOf<S>& f : fields) {
    if (f.table.empty() && f.key == key) return &f;
  }
  return nullptr;
}

inline constexpr std::string_view kExtendsKey = "extends";

// Top-level keys of a policy file.
inline constexpr std::string_view kTopLevelKeys[] = {"schema",   "default_profile", "profiles",
                                                     "server",   "audit",           "egress",
                                                     "transfer", "packages",        "tenants"};

// Optimal-string-alignment distance (Levenshtein plus adjacent transposition), for "did you mean".
size_t editDistance(std::string_view a, std::string_view b);
// The closest candidate within a small distance, or "".
std::string_view closest(std::string_view word, std::span<const std::string_view> candidates);

}  // namespace airlock::policy::detail
