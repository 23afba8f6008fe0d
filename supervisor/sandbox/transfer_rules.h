// What a profile lets one transfer plugin do: whether it may be used at all, its limits, and
// the rules JSON the plugin checks a location against (docs/transfer.md). Pure: the policy in,
// decisions out, so every rule is testable without a sandbox.
#pragma once

#include <string>

#include "airlock/policy/policy.h"
#include "airlock/result.h"
#include "supervisor/sandbox/transfer.h"

namespace airlock::sandbox {

struct TransferPolicy {
  const policy::TransferLimits* limits = nullptr;  // the plugin's table in the profile
  std::string rules_json = "{}";
};

// The policy for plugin `short_name` (`full_name` its dotted name) under `profile`: an error
// naming the key when the profile's transfer.plugins does not list it.
Result<TransferPolicy> transferPolicyFor(const policy::Profile& profile,
                                         const policy::TransferSettings& host,
                                         const std::string& short_name,
                                         const std::string& full_name);

// The helper's caps for one transfer of `limits`, given what the sandbox moved so far.
TransferLimits helperLimits(const policy::TransferLimits& limits, uint64_t sandbox_moved_bytes);

}  // namespace airlock::sandbox
