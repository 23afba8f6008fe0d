// The microVM backend's settings: the profile's [profiles.<name>.microvm] table
// (policy/microvm.h), which the supervisor hands over as the plugin's JSON config with vcpus
// and memory_mb already resolved from the profile's limits.
#pragma once

#include <string_view>

#include <airlock/policy/microvm.h>
#include <airlock/result.h>

namespace airlock::isolation::microvm {

using Config = policy::Microvm;

// Parses and checks the plugin config JSON ("{}" gives the defaults); errors name the key.
Result<Config> parseConfig(std::string_view json);

}  // namespace airlock::isolation::microvm
