// The conformance suite's list of cases a backend cannot support (tests/conformance/*-gaps.txt,
// cmake/AirlockConformance.cmake) stays true: every entry names a test that exists and says why.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "test_support.h"

namespace airlock::testing {
namespace {

// "Suite.Case" of every TEST and TEST_F under tests/.
std::set<std::string> definedTests() {
  std::set<std::string> out;
  static const std::regex test(R"(TEST(?:_F)?\(\s*(\w+)\s*,\s*(\w+)\s*\))");
  for (const auto& e : std::filesystem::recursive_directory_iterator(sourceDir() + "/tests")) {
    if (e.path().extension() != ".cc") continue;
    std::string text = readFile(e.path().string());
    for (std::sregex_iterator it(text.begin(), text.end(), test), end; it != end; ++it)
      out.insert((*it)[1].str() + "." + (*it)[2].str());
  }
  return out;
}

TEST(ConformanceGaps, EveryListedCaseExistsAndHasAReason) {
  const auto defined = definedTests();
  ASSERT_GT(defined.size(), 100u) << "control: the scan finds the test suite";
  int listed = 0;
  for (const auto& e : std::filesystem::directory_iterator(sourceDir() + "/tests/conformance")) {
    if (!e.path().string().ends_with("-gaps.txt")) continue;
    std::ifstream f(e.path());
    std::string line;
    int n = 0;
    while (std::getline(f, line)) {
      ++n;
      if (line.empty() || line[0] == '#') continue;
      std::istringstream in(line);
      std::string name, reason;
      in >> name;
      std::getline(in, reason);
      SCOPED_TRACE(e.path().filename().string() + ":" + std::to_string(n));
      EXPECT_TRUE(defined.contains(name)) << "'" << name << "' is not a test (renamed or gone?)";
      EXPECT_GT(reason.find_first_not_of(" \t"), 0u) << "no reason given for " << name;
      EXPECT_GT(reason.size(), 20u) << "the reason for " << name << " says too little";
      ++listed;
    }
  }
  std::cout << "[ info ] " << listed << " conformance gaps listed\n";
}

// The suite's injection: under another backend every profile of a written policy uses it,
// except one that chose its own; a policy without [profiles.default] gets one.
TEST(ConformanceGaps, PoliciesWrittenByTestsUseTheBackendUnderTest) {
  const char* old = std::getenv("AIRLOCK_TEST_ISOLATION");
  const std::string saved = old != nullptr ? old : "";
  const std::string toml =
      "schema = 1\n[profiles.default]\ndescription = \"d\"\n[profiles.default.limits]\npids = 9\n"
      "[profiles.own]\nisolation = \"namespaces\"\n[profiles.other] # comment\n";
  unsetenv("AIRLOCK_TEST_ISOLATION");
  EXPECT_EQ(withTestIsolation(toml), toml) << "unchanged under namespaces";
  setenv("AIRLOCK_TEST_ISOLATION", "gvisor", 1);
  EXPECT_EQ(withTestIsolation(toml),
            "schema = 1\n[profiles.default]\ndescription = \"d\"\nisolation = \"gvisor\"\n"
            "[profiles.default.limits]\npids = 9\n[profiles.own]\nisolation = \"namespaces\"\n"
            "[profiles.other] # comment\nisolation = \"gvisor\"\n");
  EXPECT_EQ(
      withTestIsolation("schema = 1\n[server]\nsocket = \"/x\"\n"),
      "schema = 1\n[server]\nsocket = \"/x\"\n\n[profiles.default]\nisolation = \"gvisor\"\n");
  if (saved.empty())
    unsetenv("AIRLOCK_TEST_ISOLATION");
  else
    setenv("AIRLOCK_TEST_ISOLATION", saved.c_str(), 1);
}

}  // namespace
}  // namespace airlock::testing
