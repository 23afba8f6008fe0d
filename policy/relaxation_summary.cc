// relaxationSummary(): each relaxation line reduced to its key.
#include "airlock/policy/relaxation_summary.h"

namespace airlock::policy {

namespace {

// "profile 'ds': limits.pids = 512: above the default 256" → "limits.pids".
std::string keyOf(std::string line) {
  if (line.starts_with("profile '")) {
    if (size_t end = line.find("': "); end != std::string::npos) line.erase(0, end + 3);
  }
  for (const char* sep : {" = ", ": ", " "})
    if (size_t at = line.find(sep); at != std::string::npos) line.resize(at);
  return line;
}

}  // namespace

std::string relaxationSummary(const std::vector<std::string>& relaxations) {
  if (relaxations.empty()) return "";
  // At most this many keys: the line stays one terminal line for the usual profiles.
  constexpr size_t kMaxKeys = 4;
  std::string keys;
  for (size_t i = 0; i < relaxations.size() && i < kMaxKeys; ++i)
    keys += (keys.empty() ? "" : ", ") + keyOf(relaxations[i]);
  if (relaxations.size() > kMaxKeys) keys += ", …";
  return "policy relaxations: " + std::to_string(relaxations.size()) + " (" + keys + ")";
}

}  // namespace airlock::policy
