// Helpers shared by the policy test files.
#pragma once

#include <string>
#include <vector>

namespace airlock::policy::test {

std::string slurp(const std::string& path);
// Sorted file names (not paths) in dir ending in suffix.
std::vector<std::string> filesIn(const std::string& dir, const std::string& suffix);
std::string dataDir();      // tests/data/policy
std::string examplesDir();  // policy/examples

}  // namespace airlock::policy::test
