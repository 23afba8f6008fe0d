// The gVisor backend's settings: the profile's [profiles.<name>.gvisor] table (policy/gvisor.h),
// which the supervisor hands over as the plugin's JSON config.
#pragma once

#include <string_view>

#include <airlock/policy/gvisor.h>
#include <airlock/result.h>

namespace airlock::isolation::gvisor {

using Config = policy::Gvisor;

// Parses and checks the plugin config JSON ("{}" gives the defaults); errors name the key.
Result<Config> parseConfig(std::string_view json);

}  // namespace airlock::isolation::gvisor
