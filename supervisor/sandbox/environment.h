// The environment of a sandboxed program: built from scratch, never inherited from the host.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace airlock::sandbox {

// Base variables (PATH, HOME, LANG, ...), then the language runtime's, then the profile's, then
// the request's; later layers override earlier ones by name. Output is "K=V", sorted by name.
std::vector<std::string> executionEnvironment(
    const std::vector<std::string>& language_env,
    const std::map<std::string, std::string>& profile_env,
    const std::map<std::string, std::string>& request_env);

}  // namespace airlock::sandbox
