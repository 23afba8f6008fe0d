// airlock.transfer.hostdir through the real loader: real directories in a temp dir as the
// operator's roots, the IN stream read to its end and decoded with libarchive, the OUT file
// checked on disk. Every path trick a location could try must stay inside its root.
#include <archive.h>
#include <archive_entry.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <thread>

#include "supervisor/plugin/registry.h"
#include "test_support.h"

namespace airlock::plugin {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

struct Entry {
  mode_t type = 0;
  mode_t perm = 0;
  int64_t uid = -1, gid = -1;
  std::string data;  // a file's contents
  std::string link;  // a symlink's target
};

// The tar's entries by name (a directory's trailing '/' dropped), in archive order as well.
struct Tar {
  std::map<std::string, Entry> entries;
  std::vector<std::string> order;
  bool complete = false;  // reached the end marker without an error
  std::string error;
};

Tar untar(const std::string& bytes) {
  Tar tar;
  std::unique_ptr<archive, decltype(&archive_read_free)> a(archive_read_new(), &archive_read_free);
  archive_read_support_format_tar(a.get());  // plain tar: no other format or filter accepted
  if (archive_read_open_memory(a.get(), bytes.data(), bytes.size()) != ARCHIVE_OK) {
    tar.error = archive_error_string(a.get());
    return tar;
  }
  archive_entry* e = nullptr;
  int rc;
  while ((rc = archive_read_next_header(a.get(), &e)) == ARCHIVE_OK) {
    std::string name = archive_entry_pathname(e);
    if (name.size() > 1 && name.ends_with('/')) name.pop_back();
    Entry& out = tar.entries[name];
    tar.order.push_back(name);
    out.type = archive_entry_filetype(e);
    out.perm = archive_entry_perm(e);
    out.uid = archive_entry_uid(e);
    out.gid = archive_entry_gid(e);
    if (archive_entry_symlink(e) != nullptr) out.link = archive_entry_symlink(e);
    char buf[8192];
    la_ssize_t n;
    while ((n = archive_read_data(a.get(), buf, sizeof buf)) > 0) out.data.append(buf, n);
    if (n < 0) {
      tar.error = archive_error_string(a.get());
      return tar;
    }
  }
  tar.complete = rc == ARCHIVE_EOF;
  if (!tar.complete) tar.error = archive_error_string(a.get());
  return tar;
}

// Reads fd to EOF; a read that waits longer than 5 s fails the test rather than hanging it.
std::string readAll(int fd) {
  std::string out;
  char buf[65536];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) != 1) {
      ADD_FAILURE() << "the transfer's fd gave nothing for 5 s";
      return out;
    }
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

void writeFile(const std::string& path, const std::string& content, mode_t mode = 0644) {
  std::ofstream(path, std::ios::binary) << content;
  ASSERT_EQ(::chmod(path.c_str(), mode), 0) << path;
}

// Runs fn on a thread and waits at most `limit` for it: a finish() that hangs fails the test
// instead of the whole run (the stuck thread is left behind, the test already failed).
bool returnsWithin(std::chrono::milliseconds limit, std::function<void()> fn) {
  auto done = std::make_shared<std::promise<void>>();
  auto ready = done->get_future();
  std::thread([fn = std::move(fn), done] {
    fn();
    done->set_value();
  }).detach();
  return ready.wait_for(limit) == std::future_status::ready;
}

class TransferHostdir : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_ = Registry::loadDirectory(AIRLOCK_PLUGIN_BUILD_DIR, LoadOptions{::geteuid()});
    auto p = registry_.transfer("hostdir");
    ASSERT_TRUE(p) << p.error().message();
    plugin_ = *p;
    EXPECT_EQ(plugin_->fullName(), "airlock.transfer.hostdir");
    EXPECT_THAT(plugin_->prefixes(), ElementsAre("hostdir:"));

    data_ = tmp_.path() + "/data";
    results_ = tmp_.path() + "/results";
    outside_ = tmp_.path() + "/outside";
    for (const auto& d : {data_, results_, outside_, data_ + "/iris", data_ + "/iris/nested",
                          data_ + "/iris/nested/deep", data_ + "/etc", results_ + "/run1"})
      ASSERT_EQ(::mkdir(d.c_str(), 0755), 0) << d;
    ASSERT_EQ(::chmod((data_ + "/iris/nested").c_str(), 0750), 0);
    writeFile(data_ + "/iris/iris.csv", "5.1,3.5,1.4,0.2,setosa\n", 0640);
    writeFile(data_ + "/iris/run.sh", "#!/bin/sh\necho hi\n", 0755);
    writeFile(data_ + "/iris/nested/deep/notes.txt", "deep notes\n", 0600);
    writeFile(data_ + "/etc/passwd", "not the host's\n");
    writeFile(outside_ + "/secret", "outside the root\n");
  }

  std::string rules() const {
    return R"({"roots": {"datasets": {"path": ")" + data_ + R"("}, "results": {"path": ")" +
           results_ + R"(", "writable": true}}})";
  }

  Result<std::unique_ptr<OpenTransfer>> open(bool in, const std::string& location,
                                             uint64_t max_bytes = 0) {
    TransferRequest r;
    r.in = in;
    r.location = location;
    r.rules_json = rules();
    r.max_bytes = max_bytes;
    r.tenant = "test";
    r.sandbox_id = "sb-hostdir";
    return plugin_->open(r);
  }

  // The error open() gives for `location` (empty when it opened).
  std::string refusal(bool in, const std::string& location) {
    auto t = open(in, location);
    if (t) return "";
    return t.error().op();
  }

  // The errno open() gives for `location` (0 when it opened).
  int refusalCode(bool in, const std::string& location) {
    auto t = open(in, location);
    return t ? 0 : t.error().errnum();
  }

  // Everything of `location` IN, finished successfully.
  Tar pull(const std::string& location, uint64_t* size = nullptr) {
    auto t = open(true, location);
    EXPECT_TRUE(t) << t.error().message();
    if (!t) return {};
    EXPECT_EQ((*t)->display(), location);
    if (size != nullptr) *size = (*t)->size();
    const std::string bytes = readAll((*t)->fd());
    auto done = (*t)->finish(true);
    EXPECT_TRUE(done) << done.error().message();
    return untar(bytes);
  }

  std::vector<std::string> list(const std::string& dir) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }

  testing::TempDir tmp_;
  Registry registry_;
  std::shared_ptr<TransferPlugin> plugin_;
  std::string data_, results_, outside_;
};

TEST_F(TransferHostdir, ADirectoryComesInAsATarOfItsContents) {
  ASSERT_EQ(::symlink("iris.csv", (data_ + "/iris/latest").c_str()), 0);
  // A link out of the root travels as a link (the sandbox side refuses it); never followed.
  ASSERT_EQ(::symlink((outside_ + "/secret").c_str(), (data_ + "/iris/away").c_str()), 0);
  ASSERT_EQ(::mkfifo((data_ + "/iris/pipe").c_str(), 0644), 0);

  ::testing::internal::CaptureStderr();
  uint64_t size = 0;
  const Tar tar = pull("hostdir:datasets/iris", &size);
  const std::string log = ::testing::internal::GetCapturedStderr();

  ASSERT_TRUE(tar.complete) << tar.error;
  EXPECT_EQ(size, 23u + 18u + 11u);  // the regular files' bytes, known before streaming
  EXPECT_THAT(tar.order, ElementsAre("away", "iris.csv", "latest", "nested", "nested/deep",
                                     "nested/deep/notes.txt", "run.sh"));
  const auto& e = tar.entries;
  EXPECT_EQ(e.at("iris.csv").type, AE_IFREG);
  EXPECT_EQ(e.at("iris.csv").data, "5.1,3.5,1.4,0.2,setosa\n");
  EXPECT_EQ(e.at("iris.csv").perm, 0640u);
  EXPECT_EQ(e.at("run.sh").data, "#!/bin/sh\necho hi\n");
  EXPECT_EQ(e.at("run.sh").perm, 0755u);
  EXPECT_EQ(e.at("nested").type, AE_IFDIR);
  EXPECT_EQ(e.at("nested").perm, 0750u);
  EXPECT_EQ(e.at("nested/deep/notes.txt").data, "deep notes\n");
  EXPECT_EQ(e.at("nested/deep/notes.txt").perm, 0600u);
  EXPECT_EQ(e.at("latest").type, AE_IFLNK);
  EXPECT_EQ(e.at("latest").link, "iris.csv");
  EXPECT_EQ(e.at("away").type, AE_IFLNK);
  EXPECT_EQ(e.at("away").link, outside_ + "/secret");
  EXPECT_EQ(e.at("away").data, "");
  for (const auto& [name, entry] : e) {
    EXPECT_EQ(entry.uid, 0) << name;
    EXPECT_EQ(entry.gid, 0) << name;
  }
  EXPECT_EQ(e.count("pipe"), 0u);
  EXPECT_THAT(log, HasSubstr("'hostdir:datasets/iris': skipped 'pipe', a FIFO"));
}

// Mounts inside a root are never crossed, neither by a location (RESOLVE_NO_XDEV) nor by the
// walk (st_dev, and STATX_ATTR_MOUNT_ROOT for a bind mount of the same file system). The mounts
// are made in a child process's own user and mount namespaces, so no root is needed and
// nothing outlives the child.
TEST_F(TransferHostdir, MountPointsInsideTheRootAreNeverCrossed) {
  const std::string iris = data_ + "/iris";
  ASSERT_EQ(::mkdir((iris + "/mnt").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((iris + "/bound").c_str(), 0755), 0);
  int report[2];
  ASSERT_EQ(::pipe2(report, O_CLOEXEC), 0);
  const uid_t uid = ::geteuid();
  const gid_t gid = ::getegid();
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child: single-threaded after fork(), as unshare(CLONE_NEWUSER) requires. It reports
    // "" (passed), "SKIP ..." or what failed.
    ::close(report[0]);
    auto run = [&]() -> std::string {
      if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0)
        return std::string("SKIP user namespaces are not available: ") + std::strerror(errno);
      auto put = [](const std::string& file, const std::string& text) {
        std::ofstream(file) << text;
      };
      put("/proc/self/setgroups", "deny");
      put("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1");
      put("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1");
      if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
        return std::string("SKIP cannot make mounts private: ") + std::strerror(errno);
      if (::mount("tmpfs", (iris + "/mnt").c_str(), "tmpfs", 0, "size=1m") != 0)
        return std::string("SKIP cannot mount a tmpfs: ") + std::strerror(errno);
      std::ofstream(iris + "/mnt/inside.txt") << "on another file system\n";
      if (::mount((iris + "/nested").c_str(), (iris + "/bound").c_str(), nullptr, MS_BIND,
                  nullptr) != 0)
        return std::string("SKIP cannot bind mount: ") + std::strerror(errno);
      std::string failed;
      for (const char* through :
           {"hostdir:datasets/iris/mnt", "hostdir:datasets/iris/mnt/inside.txt",
            "hostdir:datasets/iris/bound/deep/notes.txt"}) {
        auto t = open(true, through);
        if (t || t.error().errnum() != EXDEV)
          failed += std::string(through) + ": not refused with EXDEV; ";
      }
      auto t = open(true, "hostdir:datasets/iris");
      if (!t) return failed + "open: " + t.error().message();
      const std::string bytes = readAll((*t)->fd());
      if (auto done = (*t)->finish(true); !done)
        return failed + "finish: " + done.error().message();
      const Tar tar = untar(bytes);
      if (!tar.complete) failed += "the tar is incomplete: " + tar.error + "; ";
      for (const char* name : {"mnt", "mnt/inside.txt", "bound", "bound/deep/notes.txt"})
        if (tar.entries.count(name) != 0) failed += std::string("crossed into ") + name + "; ";
      if (tar.entries.count("nested/deep/notes.txt") == 0) failed += "lost nested/deep/notes.txt; ";
      return failed;
    };
    const std::string result = run();
    (void)!::write(report[1], result.data(), result.size());
    ::_exit(0);
  }
  ::close(report[1]);
  std::string result;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(report[0], buf, sizeof buf)) > 0) result.append(buf, static_cast<size_t>(n));
  ::close(report[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child died: " << status;
  if (result.starts_with("SKIP ")) GTEST_SKIP() << result.substr(5);
  EXPECT_EQ(result, "");
}

TEST_F(TransferHostdir, TheWholeRootComesInWithoutASubPath) {
  const Tar tar = pull("hostdir:datasets");
  ASSERT_TRUE(tar.complete) << tar.error;
  EXPECT_EQ(tar.entries.at("iris/iris.csv").data, "5.1,3.5,1.4,0.2,setosa\n");
  EXPECT_EQ(tar.entries.at("etc/passwd").data, "not the host's\n");
}

TEST_F(TransferHostdir, ASingleFileComesInAsOneEntryNamedByItsBaseName) {
  uint64_t size = 0;
  const Tar tar = pull("hostdir:datasets/iris/run.sh", &size);
  ASSERT_TRUE(tar.complete) << tar.error;
  EXPECT_EQ(size, 18u);
  ASSERT_THAT(tar.order, ElementsAre("run.sh"));
  EXPECT_EQ(tar.entries.at("run.sh").type, AE_IFREG);
  EXPECT_EQ(tar.entries.at("run.sh").data, "#!/bin/sh\necho hi\n");
  EXPECT_EQ(tar.entries.at("run.sh").perm, 0755u);
}

TEST_F(TransferHostdir, AnUnknownRootNamesTheDeclaredOnes) {
  EXPECT_EQ(refusal(true, "hostdir:x/y"),
            "'hostdir:x/y': no root 'x' (declared: datasets, results)");
  EXPECT_EQ(refusal(false, "hostdir:x/y.tar"),
            "'hostdir:x/y.tar': no root 'x' (declared: datasets, results)");
  TransferRequest r;
  r.location = "hostdir:datasets/iris";
  r.rules_json = "{}";  // the default: no roots at all
  auto t = plugin_->open(r);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().op(), "'hostdir:datasets/iris': no root 'datasets' (none declared)");
}

TEST_F(TransferHostdir, DotDotNeverLeavesTheRoot) {
  EXPECT_THAT(refusal(true, "hostdir:datasets/../../etc"),
              StartsWith("'hostdir:datasets/../../etc': escapes its root"));
  EXPECT_THAT(refusal(true, "hostdir:datasets/../outside/secret"),
              StartsWith("'hostdir:datasets/../outside/secret': escapes its root"));
  // Refused even where it would land inside the root again: no location needs one.
  EXPECT_THAT(refusal(true, "hostdir:datasets/iris/../etc"),
              StartsWith("'hostdir:datasets/iris/../etc': escapes its root"));
  EXPECT_THAT(refusal(false, "hostdir:results/../x.tar"),
              StartsWith("'hostdir:results/../x.tar': escapes its root"));
}

TEST_F(TransferHostdir, AnAbsoluteLookingPathIsNotTheHostsRoot) {
  // openat2's RESOLVE_BENEATH refuses the absolute "/etc" (EXDEV): neither the host's /etc
  // nor the root's own etc/.
  EXPECT_EQ(refusal(true, "hostdir:datasets//etc"),
            "'hostdir:datasets//etc': escapes its root (or crosses a mount point)");
  EXPECT_EQ(refusal(true, "hostdir:datasets//etc/passwd"),
            "'hostdir:datasets//etc/passwd': escapes its root (or crosses a mount point)");
  EXPECT_EQ(refusalCode(true, "hostdir:datasets//etc"), EXDEV);
}

TEST_F(TransferHostdir, ASymlinkOutOfTheRootIsNeverFollowed) {
  ASSERT_EQ(::symlink(outside_.c_str(), (data_ + "/escape").c_str()), 0);
  ASSERT_EQ(::symlink("../outside", (data_ + "/up").c_str()), 0);
  EXPECT_EQ(refusal(true, "hostdir:datasets/escape/secret"),
            "'hostdir:datasets/escape/secret': a symlink on the way (symlinks are never "
            "followed)");
  EXPECT_EQ(refusal(true, "hostdir:datasets/up/secret"),
            "'hostdir:datasets/up/secret': a symlink on the way (symlinks are never followed)");
  EXPECT_EQ(refusal(true, "hostdir:datasets/escape"),
            "'hostdir:datasets/escape': a symlink on the way (symlinks are never followed)");
  EXPECT_EQ(refusalCode(true, "hostdir:datasets/escape/secret"), ELOOP);
  // Nor for the way out: the archive would land outside.
  ASSERT_EQ(::symlink(outside_.c_str(), (results_ + "/escape").c_str()), 0);
  EXPECT_THAT(refusal(false, "hostdir:results/escape/x.tar"), HasSubstr("a symlink on the way"));
  EXPECT_FALSE(fs::exists(outside_ + "/x.tar"));
}

TEST_F(TransferHostdir, ASymlinkedDirectoryInsideTheRootIsRefusedToo) {
  ASSERT_EQ(::symlink("iris", (data_ + "/alias").c_str()), 0);
  EXPECT_THAT(refusal(true, "hostdir:datasets/alias/iris.csv"), HasSubstr("a symlink on the way"));
  EXPECT_THAT(refusal(true, "hostdir:datasets/alias"), HasSubstr("a symlink on the way"));
  ASSERT_EQ(::symlink("iris.csv", (data_ + "/iris/latest").c_str()), 0);
  EXPECT_THAT(refusal(true, "hostdir:datasets/iris/latest"), HasSubstr("a symlink on the way"));
}

TEST_F(TransferHostdir, OtherRefusalsNameTheLocation) {
  EXPECT_EQ(refusal(true, "hostdir:datasets/nope"),
            "'hostdir:datasets/nope': 'nope' does not exist in root 'datasets'");
  ASSERT_EQ(::mkfifo((data_ + "/pipe").c_str(), 0644), 0);
  EXPECT_EQ(refusal(true, "hostdir:datasets/pipe"),
            "'hostdir:datasets/pipe': not a directory or a regular file");
  EXPECT_EQ(refusal(true, "hostdir:/iris"), "'hostdir:/iris': names no root (hostdir:NAME/path)");
  TransferRequest r;
  r.location = "hostdir:datasets/iris";
  r.rules_json = R"({"roots": {"datasets": {"path": "data"}}})";
  auto t = plugin_->open(r);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().op(),
            "'hostdir:datasets/iris': transfer.hostdir.roots.datasets.path is not an absolute "
            "path: 'data'");
}

TEST_F(TransferHostdir, MoreThanMaxBytesIsRefusedAtOpen) {
  auto t = open(true, "hostdir:datasets/iris", 50);  // the files hold 52 bytes
  ASSERT_FALSE(t);
  EXPECT_THAT(t.error().op(),
              StartsWith("'hostdir:datasets/iris': more than the transfer limit of 50 bytes"));
  EXPECT_TRUE(open(true, "hostdir:datasets/iris", 52));
}

TEST_F(TransferHostdir, AFileGrowingPastMaxBytesWhileStreamingFailsAtFinish) {
  ASSERT_EQ(::mkdir((data_ + "/grow").c_str(), 0755), 0);
  const std::string big(4 << 20, 'a');
  writeFile(data_ + "/grow/a.bin", big);
  writeFile(data_ + "/grow/b.bin", "0123456789");
  auto t = open(true, "hostdir:datasets/grow", big.size() + 100);
  ASSERT_TRUE(t) << t.error().message();
  EXPECT_EQ((*t)->size(), big.size() + 10);
  // Nothing read yet: the packing thread waits on the full socket inside a.bin, before b.bin.
  std::ofstream(data_ + "/grow/b.bin", std::ios::app) << std::string(1000, 'b');
  const std::string bytes = readAll((*t)->fd());
  auto done = (*t)->finish(true);
  ASSERT_FALSE(done);
  EXPECT_EQ(done.error().op(),
            "'hostdir:datasets/grow': more than the transfer limit of 4194404 bytes (at "
            "'b.bin')");
  const Tar tar = untar(bytes);
  EXPECT_FALSE(tar.complete);  // cut before tar's end marker: never mistaken for a whole tree
  EXPECT_EQ(tar.entries.count("b.bin"), 0u);
}

TEST_F(TransferHostdir, FinishFalseMidwayStopsTheThreadPromptly) {
  writeFile(data_ + "/big.bin", std::string(16 << 20, 'x'));
  auto t = open(true, "hostdir:datasets/big.bin");
  ASSERT_TRUE(t) << t.error().message();
  char buf[4096];
  ASSERT_GT(::read((*t)->fd(), buf, sizeof buf), 0);
  OpenTransfer* transfer = t->get();
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(returnsWithin(2s, [transfer] { EXPECT_TRUE(transfer->finish(false)); }))
      << "finish(false) did not return within 2 s";
  EXPECT_LT(std::chrono::steady_clock::now() - start, 500ms);
}

TEST_F(TransferHostdir, FinishFalseWithoutAReadStopsTheThreadToo) {
  writeFile(data_ + "/big.bin", std::string(16 << 20, 'x'));
  auto t = open(true, "hostdir:datasets/big.bin");
  ASSERT_TRUE(t) << t.error().message();
  ASSERT_TRUE(returnsWithin(2s, [&t] { t->reset(); }))  // the destructor: finish(false)
      << "discarding the transfer did not return within 2 s";
}

TEST_F(TransferHostdir, TheHostClosingEarlyFailsFinishTrueWithoutAHang) {
  writeFile(data_ + "/big.bin", std::string(16 << 20, 'x'));
  auto t = open(true, "hostdir:datasets/big.bin");
  ASSERT_TRUE(t) << t.error().message();
  char buf[4096];
  ASSERT_GT(::read((*t)->fd(), buf, sizeof buf), 0);
  OpenTransfer* transfer = t->get();
  Result<> done;
  ASSERT_TRUE(returnsWithin(2s, [transfer, &done] { done = transfer->finish(true); }))
      << "finish(true) after an early close did not return within 2 s";
  ASSERT_FALSE(done);
  EXPECT_THAT(done.error().op(), StartsWith("'hostdir:datasets/big.bin': "));
  EXPECT_THAT(done.error().op(), HasSubstr("the host stopped reading"));
}

TEST_F(TransferHostdir, OutIntoAReadOnlyRootIsRefused) {
  EXPECT_EQ(refusal(false, "hostdir:datasets/x.tar.gz"),
            "'hostdir:datasets/x.tar.gz': root 'datasets' is read-only");
  EXPECT_EQ(refusalCode(false, "hostdir:datasets/x.tar.gz"), EROFS);
  EXPECT_THAT(list(data_), ElementsAre("etc", "iris"));
}

TEST_F(TransferHostdir, OutWritesTheArchiveOnlyOnFinishTrueAndReplacesAnOldOne) {
  const std::string dest = results_ + "/run1/out.tar.zst";
  for (const std::string content : {"first archive bytes", "the second, replacing it"}) {
    auto t = open(false, "hostdir:results/run1/out.tar.zst");
    ASSERT_TRUE(t) << t.error().message();
    EXPECT_EQ((*t)->format(), "tar.zst");
    EXPECT_EQ((*t)->display(), "hostdir:results/run1/out.tar.zst");
    ASSERT_EQ(::write((*t)->fd(), content.data(), content.size()),
              static_cast<ssize_t>(content.size()));
    // Unnamed until it is complete: an old archive stays whole meanwhile, a new one unseen.
    if (content == "first archive bytes")
      EXPECT_THAT(list(results_ + "/run1"), ElementsAre());
    else
      EXPECT_EQ(testing::readFile(dest), "first archive bytes");
    auto done = (*t)->finish(true);
    ASSERT_TRUE(done) << done.error().message();
    EXPECT_EQ(testing::readFile(dest), content);
    EXPECT_THAT(list(results_ + "/run1"), ElementsAre("out.tar.zst"));  // no temporary left
  }
  struct stat st {};
  ASSERT_EQ(::stat(dest.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

TEST_F(TransferHostdir, OutFormatsFollowTheName) {
  const std::pair<const char*, const char*> cases[] = {{"a.tar", "tar"},
                                                       {"a.tar.gz", "tar.gz"},
                                                       {"a.TGZ", "tar.gz"},
                                                       {"a.tzst", "tar.zst"},
                                                       {"a.zip", "zip"}};
  for (const auto& [name, format] : cases) {
    auto t = open(false, std::string("hostdir:results/") + name);
    ASSERT_TRUE(t) << t.error().message();
    EXPECT_EQ((*t)->format(), format) << name;
  }
  EXPECT_THAT(list(results_), ElementsAre("run1"));  // none finished: nothing written
}

TEST_F(TransferHostdir, OutFinishFalseLeavesNothing) {
  auto t = open(false, "hostdir:results/run1/out.tar");
  ASSERT_TRUE(t) << t.error().message();
  ASSERT_EQ(::write((*t)->fd(), "partial", 7), 7);
  EXPECT_TRUE((*t)->finish(false));
  EXPECT_THAT(list(results_ + "/run1"), ElementsAre());
}

TEST_F(TransferHostdir, OutNeedsAnArchiveName) {
  EXPECT_EQ(refusal(false, "hostdir:results/run1/out.txt"),
            "'hostdir:results/run1/out.txt': not an archive file name (.tar, .tar.gz, .tgz, "
            ".tar.zst, .tzst, .zip)");
  EXPECT_THAT(refusal(false, "hostdir:results/run1"), HasSubstr("not an archive file name"));
  EXPECT_THAT(refusal(false, "hostdir:results"), HasSubstr("not an archive file name"));
  ASSERT_EQ(::mkdir((results_ + "/d.tar").c_str(), 0755), 0);
  EXPECT_EQ(refusal(false, "hostdir:results/d.tar"),
            "'hostdir:results/d.tar': exists and is not a regular file");
}

TEST_F(TransferHostdir, OutNeedsAnExistingParent) {
  EXPECT_EQ(refusal(false, "hostdir:results/nope/out.tar"),
            "'hostdir:results/nope/out.tar': 'nope' does not exist in root 'results'");
  EXPECT_FALSE(fs::exists(results_ + "/nope"));
}

}  // namespace
}  // namespace airlock::plugin
