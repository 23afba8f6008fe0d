// The one rule for sandbox paths (supervisor/sandbox/paths.h), as every front end applies it.
#include "supervisor/sandbox/paths.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace airlock::sandbox {
namespace {

using ::testing::HasSubstr;

TEST(SandboxPaths, RelativePathsLandInTheWorkspaceWhereAllowed) {
  EXPECT_EQ(*normalizePath("data.csv", "--file", Relative::kInWorkspace), "/home/user/data.csv");
  EXPECT_EQ(*normalizePath("in/../data.csv", "--file", Relative::kInWorkspace),
            "/home/user/data.csv");
  EXPECT_EQ(*normalizePath("/tmp/x", "--file", Relative::kInWorkspace), "/tmp/x");
}

TEST(SandboxPaths, TheApiRefusesRelativePathsNamingTheField) {
  auto r = normalizePath("data.csv", "cwd");
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("cwd 'data.csv' must be absolute"));
}

TEST(SandboxPaths, FoldsSlashesDotsAndParentsLexically) {
  EXPECT_EQ(*normalizePath("//home///user/./a/"), "/home/user/a");
  EXPECT_EQ(*normalizePath("/home/user/a/../b"), "/home/user/b");
  EXPECT_EQ(*normalizePath("/"), "/");
  EXPECT_EQ(*normalizePath("/.."), "/");
  // ".." never climbs above the root, relative or not.
  EXPECT_EQ(*normalizePath("/home/user/../../../../etc/shadow"), "/etc/shadow");
  EXPECT_EQ(*normalizePath("../../../x", "path", Relative::kInWorkspace), "/x");
}

TEST(SandboxPaths, RefusesEmptyNulAndOverlongPaths) {
  EXPECT_THAT(normalizePath("", "path").error().message(), HasSubstr("path is empty"));
  EXPECT_THAT(normalizePath(std::string("/a\0b", 4)).error().message(), HasSubstr("NUL"));
  EXPECT_THAT(normalizePath("/" + std::string(5000, 'a')).error().message(),
              HasSubstr("longer than 4096"));
}

}  // namespace
}  // namespace airlock::sandbox
