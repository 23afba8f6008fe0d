// Cross-field checks shared by validate() and the parser, which maps the failing key back to
// its file:line:col.
#pragma once

#include <optional>
#include <string>

#include "airlock/policy/policy.h"

namespace airlock::policy::detail {

struct Problem {
  std::string key;      // dotted key that is wrong: "limits.memory_mb", "env.LD_PRELOAD"
  std::string message;  // "limits.memory_mb = 0: must be at least 16"
};

// The first problem of the profile, in a fixed key order, or nothing.
std::optional<Problem> check(const Profile& profile);

// "profile 'name': " or "" for an unnamed profile.
std::string profilePrefix(const Profile& profile);

}  // namespace airlock::policy::detail
