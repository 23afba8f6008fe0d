// openBeneath (plugins/isolation/namespaces/beneath.h): how the namespaces backend looks up a
// mount point inside the sandbox's new root. It must never leave the root, by `..`, an absolute
// path or a symlink, whatever the symlink points at.
#include "beneath.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <airlock/unique_fd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "test_support.h"

namespace {

using airlock::UniqueFd;
using airlock::isolation::openBeneath;
using airlock::isolation::procSelfFd;
using airlock::testing::TempDir;

struct Inode {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const Inode&) const = default;
};
Inode inodeOf(int fd) {
  struct stat st {};
  EXPECT_EQ(::fstat(fd, &st), 0);
  return {st.st_dev, st.st_ino};
}
Inode inodeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return {st.st_dev, st.st_ino};
}

// A root with a/b inside it, a host directory outside it, and symlinks that lead out.
class OpenBeneath : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::mkdir(root_.file("a").c_str(), 0755), 0);
    ASSERT_EQ(::mkdir(root_.file("a/b").c_str(), 0755), 0);
    ASSERT_EQ(::symlink(outside_.path().c_str(), root_.file("abs").c_str()), 0);
    ASSERT_EQ(::symlink("../..", root_.file("a/up").c_str()), 0);
    ASSERT_EQ(::symlink("b", root_.file("a/in").c_str()), 0);  // stays inside, still refused
    root_fd_ = UniqueFd(::open(root_.path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    ASSERT_TRUE(root_fd_);
  }
  // errno of a refused lookup, or 0 when it was allowed.
  int refusal(const char* rel) {
    UniqueFd fd(openBeneath(root_fd_.get(), rel));
    return fd ? 0 : errno;
  }

  TempDir root_, outside_;
  UniqueFd root_fd_;
};

TEST_F(OpenBeneath, FindsPathsInsideTheRootAndTheRootItself) {
  UniqueFd b(openBeneath(root_fd_.get(), "a/b"));
  ASSERT_TRUE(b) << std::strerror(errno);
  EXPECT_EQ(inodeOf(b.get()), inodeOf(root_.file("a/b")));
  UniqueFd self(openBeneath(root_fd_.get(), ""));
  ASSERT_TRUE(self);
  EXPECT_EQ(inodeOf(self.get()), inodeOf(root_.path()));
  EXPECT_EQ(refusal("a/./b"), 0);
  EXPECT_EQ(refusal("a/b/../b"), 0) << "'..' that stays inside is fine";
}

TEST_F(OpenBeneath, RefusesDotDotAndAbsolutePathsOutOfTheRoot) {
  EXPECT_EQ(refusal(".."), EXDEV);
  EXPECT_EQ(refusal("a/../../x"), EXDEV);
  EXPECT_EQ(refusal("a/b/../../.."), EXDEV);
  EXPECT_EQ(refusal("/etc"), EXDEV);
}

TEST_F(OpenBeneath, RefusesEverySymlinkLastComponentIncluded) {
  // Controls: followed as a path lookup follows them, these lead out of the root (or within
  // it), so a refusal below is the resolver's doing, not a dangling link.
  EXPECT_EQ(inodeOf(root_.file("abs")), inodeOf(outside_.path()));
  EXPECT_EQ(inodeOf(root_.file("a/up")), inodeOf(root_.path() + "/.."));
  EXPECT_EQ(inodeOf(root_.file("a/in")), inodeOf(root_.file("a/b")));
  UniqueFd followed(::openat(root_fd_.get(), "abs", O_PATH | O_CLOEXEC));
  ASSERT_TRUE(followed);
  EXPECT_EQ(inodeOf(followed.get()), inodeOf(outside_.path()));

  EXPECT_EQ(refusal("abs"), ELOOP);
  EXPECT_EQ(refusal("abs/x"), ELOOP);
  EXPECT_EQ(refusal("a/up"), ELOOP);
  EXPECT_EQ(refusal("a/up/tmp"), ELOOP);
  EXPECT_EQ(refusal("a/in"), ELOOP);
}

TEST_F(OpenBeneath, RefusesMagicLinks) {
  // /proc/self/cwd is a magic link: a root that holds a procfs (the new /proc) must not hand
  // one out. Here the root is the real "/" and the magic link points back inside it.
  UniqueFd slash(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(slash);
  UniqueFd fd(openBeneath(slash.get(), "proc/self/cwd"));
  EXPECT_FALSE(fd);
  EXPECT_EQ(errno, ELOOP);
}

TEST(ProcSelfFd, NamesTheDescriptorsLink) {
  char buf[32];
  EXPECT_STREQ(procSelfFd(0, buf), "/proc/self/fd/0");
  EXPECT_STREQ(procSelfFd(7, buf), "/proc/self/fd/7");
  EXPECT_STREQ(procSelfFd(1234567, buf), "/proc/self/fd/1234567");
  EXPECT_STREQ(procSelfFd(2147483647, buf), "/proc/self/fd/2147483647");
  TempDir dir;
  UniqueFd fd(::open(dir.path().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(fd);
  EXPECT_EQ(inodeOf(procSelfFd(fd.get(), buf)), inodeOf(dir.path()));
}

}  // namespace
