// Capability names as operators write them in policies ("CAP_CHOWN", "chown").
#pragma once

#include <string>

#include "airlock/result.h"

namespace airlock::sys {

// The capability number for a name, via libcap; errors name the unknown capability.
Result<int> capabilityNumber(const std::string& name);

}  // namespace airlock::sys
