#include "policy_test_util.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace airlock::policy::test {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::vector<std::string> filesIn(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.ends_with(suffix)) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string dataDir() { return AIRLOCK_POLICY_TEST_DATA; }
std::string examplesDir() { return AIRLOCK_POLICY_EXAMPLES; }

}  // namespace airlock::policy::test
