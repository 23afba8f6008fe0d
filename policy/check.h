// Cross-field checks shared by validate() and the parser, which maps the failing key back to
// its file:line:col.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/policy/policy.h"

namespace airlock::policy {
struct Installed;  // installed.h
}

namespace airlock::policy::detail {

struct Problem {
  std::string key;      // dotted key that is wrong: "limits.memory_mb", "env.LD_PRELOAD"
  std::string message;  // "limits.memory_mb = 0: must be at least 16"
  // The other key of a cross-field rule ("lifetime.max_keep_alive_s" for keep_alive_s above it):
  // the error points there when the file set only that one.
  std::string other_key = {};
};

// What every check writes: a value quoted for a message ('value'), and "key = value: must be at
// least MIN[ unit]" / "at most MAX[ unit]" when value is outside [min, max].
std::string q(std::string_view s);
std::optional<Problem> range(std::string_view key, uint64_t value, uint64_t min, uint64_t max,
                             std::string_view unit = "");

// The first problem of the profile, in a fixed key order, or nothing.
std::optional<Problem> check(const Profile& profile);

// The first problem of a profile's [review] table (review_check.cc); keys are "review.…".
std::optional<Problem> checkReview(const Review& review);

// The first problem of a profile's [transfer] table (transfer_check.cc); keys "transfer.…".
std::optional<Problem> checkTransfer(const Transfer& transfer);
// The first problem of the top-level [transfer] table and of the profiles' references to it.
std::optional<Problem> checkTransferSettings(const Policy& policy);
// relaxations() of a profile's [transfer] table.
std::vector<std::string> transferRelaxations(const Transfer& transfer);

// The first problem of a profile's [packages] table (packages_check.cc); keys "packages.…".
std::optional<Problem> checkPackages(const Packages& packages);
// The first problem of the top-level [packages] table.
std::optional<Problem> checkPackageSettings(const PackageSettings& settings);
// relaxations() of a profile's [packages] table.
std::vector<std::string> packagesRelaxations(const Packages& packages);

// Problems of [server], of each tenant and of the rules across sections (the first of each), in
// a fixed order. Keys are dotted from the top of the file: "server.tcp",
// "tenants.ci.token_sha256", "profiles.data-science.lifetime.pool_size".
std::vector<Problem> checkPolicy(const Policy& policy);

// relaxations() of the [server] table.
std::vector<std::string> serverRelaxations(const Server& server);

// The first name of the profile the host has not installed (installed_check.cc): keys
// "isolation", "languages[1]", "review.chain[0]", "filesystem.image".
std::optional<Problem> checkInstalled(const Profile& profile, const Installed& installed);

// "profile 'name': " or "" for an unnamed profile.
std::string profilePrefix(const Profile& profile);

}  // namespace airlock::policy::detail
