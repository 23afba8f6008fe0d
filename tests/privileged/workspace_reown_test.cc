// sandbox/host/workspace_mount.h: a persistent workspace's files, written by sandboxed code, are
// re-owned to the next sandbox's id range by fd, as root: never through a symlink, never off
// the tree, even when a name is swapped while the walk runs.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "airlock/unique_fd.h"
#include "supervisor/sandbox/host/id_range.h"
#include "supervisor/sandbox/host/workspace_mount.h"
#include "test_support.h"

namespace airlock::sandbox {
namespace {

constexpr uint32_t kOld = kIdRangeBase + 3 * kIdRangeSize;  // the last sandbox's range
constexpr uint32_t kNew = kIdRangeBase + 7 * kIdRangeSize;  // this one's

uid_t ownerOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_uid;
}

TEST(WorkspaceReown, MovesEveryRangeIdAndLeavesTheRest) {
  AIRLOCK_REQUIRE_ROOT();
  testing::TempDir dir;
  std::filesystem::create_directories(dir.file("a/b"));
  dir.write("a/b/f", "x");
  dir.write("host-owned", "x");
  std::filesystem::create_symlink("/etc/passwd", dir.file("a/link"));
  for (const char* p : {"a", "a/b", "a/b/f"})
    ASSERT_EQ(::lchown(dir.file(p).c_str(), kOld + 1000, kOld + 1000), 0);
  ASSERT_EQ(::lchown(dir.file("a/link").c_str(), kOld + 5, kOld + 5), 0);
  const uid_t passwd_owner = ownerOf("/etc/passwd");

  UniqueFd root(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  auto r = reownTree(root.get(), kNew);
  ASSERT_TRUE(r) << r.error().message();
  for (const char* p : {"a", "a/b", "a/b/f"}) EXPECT_EQ(ownerOf(dir.file(p)), kNew + 1000) << p;
  EXPECT_EQ(ownerOf(dir.file("a/link")), kNew + 5);  // the link itself
  EXPECT_EQ(ownerOf("/etc/passwd"), passwd_owner);   // not what it points to
  EXPECT_EQ(ownerOf(dir.file("host-owned")), 0u);    // root's stays root's
}

// The hostile case: once the walk has opened a directory, the sandbox's tree is changed under
// it: that directory's name becomes a symlink to a host directory holding a file owned by a
// range id. A walk by path would re-own the host file through the new symlink; this one goes on
// in the directory it opened. The control shows the swap happened: the name now leads to the
// host directory.
TEST(WorkspaceReown, ANameSwappedForASymlinkMidWalkNeverLeadsOffTheTree) {
  AIRLOCK_REQUIRE_ROOT();
  testing::TempDir dir, host;
  std::filesystem::create_directories(dir.file("sub"));
  dir.write("sub/f", "x");
  ASSERT_EQ(::lchown(dir.file("sub/f").c_str(), kOld + 1000, kOld + 1000), 0);
  host.write("f", "host file");
  ASSERT_EQ(::lchown(host.file("f").c_str(), kOld + 1000, kOld + 1000), 0);

  UniqueFd root(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  bool swapped = false;
  auto r = reownTree(root.get(), kNew, [&](const std::string& path) {
    if (path != "./sub") return;
    std::filesystem::rename(dir.file("sub"), dir.file("moved"));
    std::filesystem::create_directory_symlink(host.path(), dir.file("sub"));
    swapped = true;
  });
  ASSERT_TRUE(r) << r.error().message();
  ASSERT_TRUE(swapped);
  EXPECT_EQ(ownerOf(dir.file("sub/f")), kOld + 1000);  // the host's file, through the link
  EXPECT_EQ(airlock::testing::readFile(dir.file("sub/f")), "host file");
  EXPECT_EQ(ownerOf(dir.file("moved/f")), kNew + 1000);  // the tree's own file
}

TEST(WorkspaceReown, ATreeDeeperThanTheBoundIsRefusedNotWalked) {
  AIRLOCK_REQUIRE_ROOT();
  testing::TempDir dir;
  std::string deep = dir.path();
  UniqueFd at(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  for (int i = 0; i < 520; ++i) {  // by fd: the path would pass PATH_MAX
    ASSERT_EQ(::mkdirat(at.get(), "d", 0755), 0);
    at.reset(::openat(at.get(), "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(at);
  }
  UniqueFd root(::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  auto r = reownTree(root.get(), kNew);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("deeper than 512 directories"), std::string::npos)
      << r.error().message();
}

}  // namespace
}  // namespace airlock::sandbox
