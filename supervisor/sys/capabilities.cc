#include "supervisor/sys/capabilities.h"

#include <sys/capability.h>

#include <algorithm>
#include <cctype>

namespace airlock::sys {

Result<int> capabilityNumber(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  cap_value_t cap = 0;
  if (cap_from_name(lower.c_str(), &cap) != 0 || cap < 0 || cap > 63)
    return fail("unknown capability", name);
  return static_cast<int>(cap);
}

}  // namespace airlock::sys
