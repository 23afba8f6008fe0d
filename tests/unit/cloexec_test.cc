// Every fd the supervisor opens is close-on-exec: it starts sandboxes, QEMU, runsc and helpers
// from many threads, and an fd open elsewhere at that moment would be inherited by the child.
// A source rule, because such a leak lasts microseconds and no run-time probe catches it
// reliably: the supervisor's code (and the plugins it loads) never uses the standard streams
// or calls that cannot set O_CLOEXEC; airlock/whole_file.h reads and writes whole files instead.
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "airlock/whole_file.h"
#include "test_support.h"

namespace {

namespace fs = std::filesystem;

// Code as the compiler sees it, line by line, without // comments.
std::vector<std::pair<int, std::string>> codeLines(const fs::path& file) {
  std::ifstream in(file);  // the test itself spawns nothing
  std::vector<std::pair<int, std::string>> out;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (auto c = line.find("//"); c != std::string::npos) line.erase(c);
    out.emplace_back(n, line);
  }
  return out;
}

// Offending lines of the supervisor's sources: file:line: text.
std::vector<std::string> offenders(const std::regex& rule) {
  std::vector<std::string> found;
  const fs::path root = airlock::testing::sourceDir();
  for (const char* dir : {"supervisor", "policy", "plugins", "common", "protocol"}) {
    for (const auto& e : fs::recursive_directory_iterator(root / dir)) {
      const std::string path = e.path().string();
      // The microVM's /init runs in the guest, not in the supervisor.
      if (path.find("/microvm/guest/") != std::string::npos) continue;
      if (!e.is_regular_file() || (e.path().extension() != ".cc" && e.path().extension() != ".h"))
        continue;
      for (const auto& [n, text] : codeLines(e.path()))
        if (std::regex_search(text, rule))
          found.push_back(fs::relative(e.path(), root).string() + ":" + std::to_string(n) + ": " +
                          text);
    }
  }
  return found;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += "\n  " + l;
  return out;
}

TEST(CloseOnExec, TheSupervisorNeverOpensAStandardStream) {
  auto found = offenders(std::regex(R"(std::(i|o)?fstream\b)"));
  EXPECT_TRUE(found.empty()) << "opened without O_CLOEXEC (use airlock/whole_file.h):"
                             << joined(found);
}

TEST(CloseOnExec, EveryFopenModeHasE) {
  auto found = offenders(std::regex(R"(fopen\s*\([^,]*,\s*"[^"e]*")"));
  EXPECT_TRUE(found.empty()) << "fopen without \"e\" (O_CLOEXEC):" << joined(found);
}

TEST(CloseOnExec, NoCallThatCannotSetTheFlag) {
  // pipe2, accept4, dup3 / F_DUPFD_CLOEXEC, epoll_create1 and inotify_init1 take the flag. (The
  // code calls the system's functions as ::name.)
  auto found =
      offenders(std::regex(R"((^|[^\w])::(pipe|accept|dup|epoll_create|inotify_init)\s*\()"));
  EXPECT_TRUE(found.empty()) << "calls that cannot set O_CLOEXEC:" << joined(found);
}

// The probes above catch what they look for (positive control, on text written here).
TEST(CloseOnExec, TheRulesMatchWhatTheyForbid) {
  EXPECT_TRUE(std::regex_search("  std::ifstream f(path);", std::regex(R"(std::(i|o)?fstream\b)")));
  EXPECT_TRUE(std::regex_search(R"(FILE* f = std::fopen(p, "w");)",
                                std::regex(R"(fopen\s*\([^,]*,\s*"[^"e]*")")));
  EXPECT_FALSE(std::regex_search(R"(FILE* f = std::fopen(p, "we");)",
                                 std::regex(R"(fopen\s*\([^,]*,\s*"[^"e]*")")));
  const std::regex calls(R"((^|[^\w])::(pipe|accept|dup|epoll_create|inotify_init)\s*\()");
  EXPECT_TRUE(std::regex_search("  if (::pipe(fds) != 0)", calls));
  EXPECT_FALSE(std::regex_search("  if (::pipe2(fds, O_CLOEXEC) != 0)", calls));
  EXPECT_FALSE(std::regex_search("Result<> MonitorSink::accept(Clock::time_point d) {", calls));
}

TEST(WholeFile, ReadsWritesAndSaysWhatFailed) {
  airlock::testing::TempDir dir;
  const std::string path = dir.file("f");
  ASSERT_TRUE(airlock::writeWholeFile(path, std::string("a\0b", 3), 0600));
  auto r = airlock::readWholeFile(path);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(*r, std::string("a\0b", 3));
  auto big = airlock::readWholeFile(path, 2);
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message().find("larger than 2 bytes"), std::string::npos);
  auto missing = airlock::readWholeFile(dir.file("nope"));
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message().find(dir.file("nope")), std::string::npos);
}

}  // namespace
