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

// Where a key's value lives in a Profile; the variant alternative is the key's TOML type.
using FieldRef =
    std::variant<std::string* (*)(Profile&), std::vector<std::string>* (*)(Profile&),
                 std::map<std::string, std::string>* (*)(Profile&), bool* (*)(Profile&),
                 uint32_t* (*)(Profile&), uint64_t* (*)(Profile&)>;

struct Field {
  std::string_view table;  // "" for keys directly in [profiles.<name>], else "limits", ...
  std::string_view key;
  FieldRef ref;

  std::string path() const;  // "limits.memory_mb", "hostname"
};

// Every field of Profile except `name`, in reference.toml order.
std::span<const Field> fields();
// Sub-tables of a profile in order: "limits", "filesystem", "network", "seccomp".
std::span<const std::string_view> subTables();
const Field* findField(std::string_view table, std::string_view key);

inline constexpr std::string_view kExtendsKey = "extends";

// Top-level keys of a policy file.
inline constexpr std::string_view kTopLevelKeys[] = {"schema", "default_profile", "profiles"};

// Optimal-string-alignment distance (Levenshtein plus adjacent transposition), for "did you mean".
size_t editDistance(std::string_view a, std::string_view b);
// The closest candidate within a small distance, or "".
std::string_view closest(std::string_view word, std::span<const std::string_view> candidates);

}  // namespace airlock::policy::detail
