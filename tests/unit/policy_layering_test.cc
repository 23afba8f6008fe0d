// The policy library is pure and stands alone: it must not reach into the supervisor (or the
// kernel programs' headers), which depend on it, not the other way round. Its CMake target has no
// include path that would let such an #include compile; this test names the offending line when
// someone adds one anyway, or compiles supervisor sources into the library.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "test_support.h"

namespace airlock::policy {
namespace {

namespace fs = std::filesystem;

// Every line of the files under policy/ whose name passes `wanted`, as "path:line: text".
std::vector<std::string> offendingLines(bool (*wanted)(const fs::path&), const std::regex& bad,
                                        bool strip_cmake_comments, size_t* files_read) {
  std::vector<std::string> out;
  const fs::path root = fs::path(airlock::testing::sourceDir()) / "policy";
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file() || !wanted(entry.path())) continue;
    ++*files_read;
    std::ifstream in(entry.path());
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      std::string code = line;
      // A comment may well explain how the supervisor uses the policy; only code counts.
      if (strip_cmake_comments) code = code.substr(0, code.find('#'));
      if (std::regex_search(code, bad))
        out.push_back(fs::relative(entry.path(), airlock::testing::sourceDir()).string() + ":" +
                      std::to_string(n) + ": " + line);
    }
  }
  return out;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += "\n  " + l;
  return s;
}

TEST(PolicyLayering, SourcesIncludeNothingFromTheSupervisor) {
  size_t files = 0;
  auto bad = offendingLines(
      [](const fs::path& p) {
        auto ext = p.extension();
        return ext == ".cc" || ext == ".h";
      },
      std::regex(R"(^\s*#\s*include\s*[<"](supervisor/|airlock_wire\.h))"), false, &files);
  // An empty scan would pass vacuously: policy/ has a dozen sources.
  EXPECT_GE(files, 10u) << "read too few sources under " << airlock::testing::sourceDir()
                        << "/policy";
  EXPECT_TRUE(bad.empty()) << "policy/ must not include supervisor or eBPF headers; move what it "
                              "needs into the policy library:"
                           << joined(bad);
}

TEST(PolicyLayering, CMakeBuildsNothingOfTheSupervisor) {
  size_t files = 0;
  auto bad = offendingLines(
      [](const fs::path& p) {
        return p.filename() == "CMakeLists.txt" || p.extension() == ".cmake";
      },
      std::regex(R"(supervisor|airlock_core|\$\{CMAKE_SOURCE_DIR\}(/bpf)?/?(\s|\)|$))"), true,
      &files);
  EXPECT_GE(files, 1u) << "read no CMake file under " << airlock::testing::sourceDir() << "/policy";
  EXPECT_TRUE(bad.empty()) << "policy/ CMake must not compile, link or include the supervisor "
                              "(or the repository root, which would let it include anything):"
                           << joined(bad);
}

}  // namespace
}  // namespace airlock::policy
