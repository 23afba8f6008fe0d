// airlock-agent directory operations: list, stat, mkdir, remove, rename. Symlinks planted in the
// sandbox are acted on as links, never followed (outside directories stay intact), and errors
// carry the errno the service maps to HTTP statuses, naming the path.
#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>

#include "agent_harness.h"
#include "supervisor/sandbox/agent/connection.h"
#include "supervisor/sandbox/agent/file_ops.h"
#include "supervisor/sandbox/agent/program.h"
#include "test_support.h"

namespace airlock::agent::testing {
namespace {

namespace proto = airlock::protocol;
using ::airlock::testing::TempDir;
using ::testing::HasSubstr;

bool exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

class AgentFileOps : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ok = agent_.configure(AgentProcess::defaultConfigure());
    ASSERT_EQ(ok.first.type, proto::MsgType::kOk);
  }

  struct Listing {
    std::vector<proto::FileEntry> entries;
    int frames = 0;
    std::optional<proto::ErrorMsg> error;
    std::map<std::string, proto::FileEntry> byName() const {
      std::map<std::string, proto::FileEntry> m;
      for (const auto& e : entries) m[e.name] = e;
      return m;
    }
  };
  template <typename M>
  Listing entries(uint32_t id, const M& m) {
    agent_.send(id, m);
    Listing l;
    for (;;) {
      auto f = agent_.nextFor(id);
      if (!f) break;
      if (f->first.type == proto::MsgType::kError) {
        l.error = *proto::decodeError(f->second);
        break;
      }
      EXPECT_EQ(f->first.type, proto::MsgType::kFileEntries);
      EXPECT_LE(f->second.size(), proto::kMaxPayload);
      auto d = proto::decodeFileEntries(f->second);
      EXPECT_TRUE(d) << d.error().message();
      if (!d) break;
      ++l.frames;
      for (auto& e : d->entries) l.entries.push_back(std::move(e));
      if (d->last) break;
    }
    return l;
  }
  // Ok → nullopt; Error → the error.
  template <typename M>
  std::optional<proto::ErrorMsg> okOrError(uint32_t id, const M& m) {
    agent_.send(id, m);
    auto f = agent_.nextFor(id);
    if (f && f->first.type == proto::MsgType::kError) return *proto::decodeError(f->second);
    EXPECT_TRUE(f && f->first.type == proto::MsgType::kOk);
    return std::nullopt;
  }

  AgentProcess agent_;
};

TEST_F(AgentFileOps, ListGivesTypesSizesModesAndTimes) {
  TempDir dir, outside;
  outside.write("secret", "outside data");
  dir.write("a.txt", "hello", 0640);
  ASSERT_EQ(mkdir(dir.file("sub").c_str(), 0750), 0);
  ASSERT_EQ(symlink(outside.path().c_str(), dir.file("link").c_str()), 0);
  ASSERT_EQ(mkfifo(dir.file("fifo").c_str(), 0600), 0);
  auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();

  auto l = entries(300, proto::FileList{dir.path()});
  ASSERT_FALSE(l.error) << l.error->message;
  EXPECT_EQ(l.frames, 1);
  auto m = l.byName();
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m.count("."), 0u);
  EXPECT_EQ(m["a.txt"].type, proto::FileType::kFile);
  EXPECT_EQ(m["a.txt"].size, 5u);
  EXPECT_EQ(m["a.txt"].mode, 0640u);
  EXPECT_NEAR(static_cast<double>(m["a.txt"].mtime_ms), static_cast<double>(now_ms), 60000);
  EXPECT_EQ(m["sub"].type, proto::FileType::kDir);
  EXPECT_EQ(m["sub"].mode, 0750u);
  // The link itself: its size is the target's length, not the directory it points to.
  EXPECT_EQ(m["link"].type, proto::FileType::kSymlink);
  EXPECT_EQ(m["link"].size, outside.path().size());
  EXPECT_EQ(m["fifo"].type, proto::FileType::kOther);

  // Listing through the link is refused: the outside directory is not revealed.
  auto through = entries(301, proto::FileList{dir.file("link")});
  ASSERT_TRUE(through.error);
  EXPECT_EQ(through.error->stage, "file_list");
  EXPECT_TRUE(through.error->errnum == ELOOP || through.error->errnum == ENOTDIR)
      << through.error->errnum;
  EXPECT_THAT(through.error->message, HasSubstr("'" + dir.file("link") + "'"));
  EXPECT_TRUE(through.entries.empty());

  auto missing = entries(302, proto::FileList{dir.file("nope")});
  ASSERT_TRUE(missing.error);
  EXPECT_EQ(missing.error->errnum, ENOENT);
  EXPECT_THAT(missing.error->message, HasSubstr("'" + dir.file("nope") + "'"));
  auto file = entries(303, proto::FileList{dir.file("a.txt")});
  ASSERT_TRUE(file.error);
  EXPECT_EQ(file.error->errnum, ENOTDIR);
}

TEST_F(AgentFileOps, LargeDirectoriesComeInSeveralFrames) {
  TempDir dir;
  // 5000 names of 200 bytes: over kMaxListItems and over one frame's byte budget.
  std::set<std::string> names;
  for (int i = 0; i < 5000; ++i) {
    std::string name = std::to_string(i) + "_" + std::string(200, 'x');
    names.insert(name);
    dir.write(name, "");
  }
  auto l = entries(310, proto::FileList{dir.path()});
  ASSERT_FALSE(l.error) << l.error->message;
  EXPECT_GE(l.frames, 3);
  std::set<std::string> got;
  for (const auto& e : l.entries) got.insert(e.name);
  EXPECT_EQ(got, names);
  EXPECT_EQ(l.entries.size(), 5000u);
}

TEST_F(AgentFileOps, StatNeverFollowsTheLastComponent) {
  TempDir dir, outside;
  outside.write("target", "0123456789");
  ASSERT_EQ(symlink(outside.file("target").c_str(), dir.file("link").c_str()), 0);
  dir.write("f", "abc", 0600);

  auto s = entries(320, proto::FileStat{dir.file("link")});
  ASSERT_FALSE(s.error) << s.error->message;
  ASSERT_EQ(s.entries.size(), 1u);
  EXPECT_EQ(s.entries[0].name, dir.file("link"));
  EXPECT_EQ(s.entries[0].type, proto::FileType::kSymlink);
  EXPECT_EQ(s.entries[0].size, outside.file("target").size());

  auto f = entries(321, proto::FileStat{dir.file("f")});
  ASSERT_FALSE(f.error);
  EXPECT_EQ(f.entries[0].type, proto::FileType::kFile);
  EXPECT_EQ(f.entries[0].size, 3u);
  EXPECT_EQ(f.entries[0].mode, 0600u);
  auto d = entries(322, proto::FileStat{dir.path() + "/"});
  ASSERT_FALSE(d.error);
  EXPECT_EQ(d.entries[0].type, proto::FileType::kDir);

  auto missing = entries(323, proto::FileStat{dir.file("none")});
  ASSERT_TRUE(missing.error);
  EXPECT_EQ(missing.error->stage, "file_stat");
  EXPECT_EQ(missing.error->errnum, ENOENT);
  EXPECT_THAT(missing.error->message, HasSubstr("'" + dir.file("none") + "'"));
}

TEST_F(AgentFileOps, MkdirWithAndWithoutParents) {
  TempDir dir;
  ASSERT_FALSE(okOrError(330, proto::FileMkdir{dir.file("one"), false, 0700}));
  struct stat st {};
  ASSERT_EQ(stat(dir.file("one").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0700u) << "the mode is applied without umask";

  auto again = okOrError(331, proto::FileMkdir{dir.file("one"), false, 0755});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->stage, "file_mkdir");
  EXPECT_EQ(again->errnum, EEXIST);
  EXPECT_THAT(again->message, HasSubstr("'" + dir.file("one") + "'"));

  auto no_parent = okOrError(332, proto::FileMkdir{dir.file("a/b/c"), false, 0755});
  ASSERT_TRUE(no_parent);
  EXPECT_EQ(no_parent->errnum, ENOENT);

  ASSERT_FALSE(okOrError(333, proto::FileMkdir{dir.file("a/b/c/"), true, 0750}));
  ASSERT_EQ(stat(dir.file("a/b/c").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
  EXPECT_FALSE(okOrError(334, proto::FileMkdir{dir.file("a/b"), true, 0755}))
      << "mkdir -p of an existing directory succeeds";

  dir.write("file", "x");
  auto over_file = okOrError(335, proto::FileMkdir{dir.file("file/sub"), true, 0755});
  ASSERT_TRUE(over_file);
  EXPECT_EQ(over_file->errnum, EEXIST);
  EXPECT_THAT(over_file->message, HasSubstr("'" + dir.file("file") + "'"));
}

TEST_F(AgentFileOps, RemoveActsOnTheLinkNotItsTarget) {
  TempDir dir, outside;
  outside.write("keep", "precious");
  ASSERT_EQ(symlink(outside.file("keep").c_str(), dir.file("file-link").c_str()), 0);
  ASSERT_EQ(symlink(outside.path().c_str(), dir.file("dir-link").c_str()), 0);

  ASSERT_FALSE(okOrError(340, proto::FileRemove{dir.file("file-link"), false}));
  EXPECT_FALSE(exists(dir.file("file-link")));
  EXPECT_EQ(outside.read("keep"), "precious");
  // Even recursive removal of a link to a directory removes only the link; a trailing slash
  // does not make it follow.
  ASSERT_FALSE(okOrError(341, proto::FileRemove{dir.file("dir-link") + "/", true}));
  EXPECT_FALSE(exists(dir.file("dir-link")));
  EXPECT_EQ(outside.read("keep"), "precious");
}

TEST_F(AgentFileOps, RecursiveRemoveNeverEntersSymlinkedDirectories) {
  TempDir dir, outside;
  outside.write("keep", "precious");
  ASSERT_EQ(mkdir(outside.file("inner").c_str(), 0755), 0);
  outside.write("inner/deep", "also precious");
  std::string tree = dir.file("tree");
  ASSERT_EQ(mkdir(tree.c_str(), 0755), 0);
  ASSERT_EQ(mkdir((tree + "/a").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((tree + "/a/b").c_str(), 0700), 0);
  dir.write("tree/a/b/f", "x");
  dir.write("tree/top", "y");
  ASSERT_EQ(symlink(outside.path().c_str(), (tree + "/a/escape").c_str()), 0);
  ASSERT_EQ(symlink(outside.file("keep").c_str(), (tree + "/a/b/file-escape").c_str()), 0);
  // Positive control: the outside tree is reachable through the planted links.
  ASSERT_EQ(::airlock::testing::readFile(tree + "/a/escape/inner/deep"), "also precious");

  auto not_recursive = okOrError(350, proto::FileRemove{tree, false});
  ASSERT_TRUE(not_recursive);
  EXPECT_EQ(not_recursive->errnum, ENOTEMPTY);
  EXPECT_TRUE(exists(tree + "/top"));

  ASSERT_FALSE(okOrError(351, proto::FileRemove{tree, true}));
  EXPECT_FALSE(exists(tree));
  EXPECT_EQ(outside.read("keep"), "precious");
  EXPECT_EQ(outside.read("inner/deep"), "also precious");
}

TEST_F(AgentFileOps, RemoveFilesEmptyDirectoriesAndRefusals) {
  TempDir dir;
  dir.write("f", "x");
  ASSERT_EQ(mkdir(dir.file("empty").c_str(), 0755), 0);
  ASSERT_FALSE(okOrError(360, proto::FileRemove{dir.file("f"), false}));
  EXPECT_FALSE(exists(dir.file("f")));
  ASSERT_FALSE(okOrError(361, proto::FileRemove{dir.file("empty"), false}));
  EXPECT_FALSE(exists(dir.file("empty")));

  auto missing = okOrError(362, proto::FileRemove{dir.file("f"), false});
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->stage, "file_remove");
  EXPECT_EQ(missing->errnum, ENOENT);
  EXPECT_THAT(missing->message, HasSubstr("'" + dir.file("f") + "'"));
  auto root = okOrError(363, proto::FileRemove{"/", true});
  ASSERT_TRUE(root);
  EXPECT_EQ(root->errnum, EBUSY);
  auto dotdot = okOrError(364, proto::FileRemove{dir.path() + "/..", true});
  ASSERT_TRUE(dotdot);
  EXPECT_EQ(dotdot->errnum, EINVAL);
  EXPECT_TRUE(exists(dir.path()));
}

TEST_F(AgentFileOps, RenameFilesLinksAndErrors) {
  TempDir dir, outside;
  outside.write("target", "outside");
  dir.write("a", "A");
  dir.write("b", "B");
  ASSERT_FALSE(okOrError(370, proto::FileRename{dir.file("a"), dir.file("c")}));
  EXPECT_FALSE(exists(dir.file("a")));
  EXPECT_EQ(dir.read("c"), "A");
  ASSERT_FALSE(okOrError(371, proto::FileRename{dir.file("c"), dir.file("b")}));
  EXPECT_EQ(dir.read("b"), "A") << "rename replaces an existing file";

  ASSERT_EQ(symlink(outside.file("target").c_str(), dir.file("link").c_str()), 0);
  ASSERT_FALSE(okOrError(372, proto::FileRename{dir.file("link"), dir.file("moved")}));
  char buf[256] = {};
  ASSERT_GT(readlink(dir.file("moved").c_str(), buf, sizeof(buf) - 1), 0);
  EXPECT_EQ(std::string(buf), outside.file("target"));
  EXPECT_EQ(outside.read("target"), "outside");

  auto missing = okOrError(373, proto::FileRename{dir.file("none"), dir.file("x")});
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->stage, "file_rename");
  EXPECT_EQ(missing->errnum, ENOENT);
  EXPECT_THAT(missing->message, HasSubstr("'" + dir.file("none") + "'"));
  ASSERT_EQ(mkdir(dir.file("d1").c_str(), 0755), 0);
  ASSERT_EQ(mkdir(dir.file("d2").c_str(), 0755), 0);
  dir.write("d2/x", "");
  auto onto_full = okOrError(374, proto::FileRename{dir.file("d1"), dir.file("d2")});
  ASSERT_TRUE(onto_full);
  EXPECT_TRUE(onto_full->errnum == ENOTEMPTY || onto_full->errnum == EEXIST);
}

TEST_F(AgentFileOps, BadRequestsAreProtocolErrors) {
  agent_.send(380, proto::FileRename{"/a", "relative"});
  auto f = agent_.nextFor(380);
  ASSERT_TRUE(f);
  ASSERT_EQ(f->first.type, proto::MsgType::kError);
  auto e = proto::decodeError(f->second);
  EXPECT_EQ(e->stage, "protocol");
  EXPECT_EQ(e->message, "FileRename: field 'to' (tag 2): 'relative' is not an absolute path");
}

TEST(AgentFileOpsRoot, RunAsTheSandboxUser) {
  AIRLOCK_REQUIRE_ROOT();
  TempDir closed;
  chmod(closed.path().c_str(), 0755);
  closed.write("f", "x");
  ASSERT_EQ(mkdir(closed.file("private").c_str(), 0700), 0);
  AgentProcess agent;
  auto c = AgentProcess::defaultConfigure();
  c.uid = 1000;
  c.gid = 1000;
  ASSERT_EQ(agent.configure(c).first.type, proto::MsgType::kOk);
  auto expectErrno = [&](uint32_t id, auto msg, int err) {
    agent.send(id, msg);
    auto f = agent.nextFor(id);
    ASSERT_TRUE(f);
    ASSERT_EQ(f->first.type, proto::MsgType::kError) << id;
    EXPECT_EQ(proto::decodeError(f->second)->errnum, err) << id;
  };
  expectErrno(5, proto::FileRemove{closed.file("f"), false}, EACCES);
  expectErrno(6, proto::FileMkdir{closed.file("d"), false, 0755}, EACCES);
  expectErrno(7, proto::FileRename{closed.file("f"), closed.file("g")}, EACCES);
  expectErrno(8, proto::FileList{closed.file("private")}, EACCES);
  EXPECT_TRUE(exists(closed.file("f")));
  EXPECT_FALSE(exists(closed.file("d")));

  chmod(closed.path().c_str(), 0777);
  agent.send(9, proto::FileMkdir{closed.file("mine"), false, 0755});
  auto ok = agent.nextFor(9);
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->first.type, proto::MsgType::kOk);
  struct stat st {};
  ASSERT_EQ(stat(closed.file("mine").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 1000u);
}

// The supervisor's connection to the agent (sandbox/agent/), driven inline as `airlock run`
// drives it: Started during a program, and the file operations, with the agent's errno named.
TEST(AgentConnectionInline, ProgramAndFileOperations) {
  TempDir dir;
  AgentProcess agent;
  ASSERT_EQ(agent.configure(AgentProcess::defaultConfigure()).first.type, proto::MsgType::kOk);
  UniqueFd channel = agent.takeChannel();
  auto hub = sandbox::ChannelHub::start(sandbox::ChannelHub::Mode::kInline);
  ASSERT_TRUE(hub) << hub.error().message();
  auto conn = (*hub)->attach(channel.get(), "sb-test");
  ASSERT_TRUE(conn) << conn.error().message();
  auto deadline = sandbox::Clock::now() + std::chrono::seconds(30);

  std::string out;
  auto r = sandbox::runProgram(
      **conn, shell("echo $$"), [&](proto::Stream, std::string_view d) { out += d; }, {}, deadline);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_GT(r->pid, 0u);
  EXPECT_EQ(static_cast<uint32_t>(std::atoi(out.c_str())), r->pid);
  EXPECT_EQ(r->exited.exit_code, 0);

  namespace files = sandbox::files;
  using sandbox::ErrorCode;
  ASSERT_TRUE(files::mkdir(**conn, dir.file("x/y"), true));
  auto exists_err = files::mkdir(**conn, dir.file("x"), false);
  ASSERT_FALSE(exists_err);
  EXPECT_EQ(exists_err.error().code, ErrorCode::kConflict);
  EXPECT_THAT(exists_err.error().message, HasSubstr("EEXIST"));
  EXPECT_THAT(exists_err.error().message, HasSubstr(dir.file("x")));

  dir.write("x/y/f", "data");
  auto list = files::list(**conn, dir.file("x/y"));
  ASSERT_TRUE(list) << list.error().message;
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].name, "f");
  EXPECT_EQ((*list)[0].size, 4u);
  auto too_many = files::list(**conn, dir.path(), 0);
  ASSERT_FALSE(too_many);

  auto st = files::stat(**conn, dir.file("x/y/f"));
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(st->type, "file");
  auto missing = files::stat(**conn, dir.file("nope"));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_THAT(missing.error().message, HasSubstr("ENOENT"));

  ASSERT_TRUE(files::rename(**conn, dir.file("x/y/f"), dir.file("g")));
  EXPECT_EQ(dir.read("g"), "data");
  auto not_empty = files::remove(**conn, dir.file("x"), false);
  ASSERT_FALSE(not_empty);
  EXPECT_EQ(not_empty.error().code, ErrorCode::kConflict);
  EXPECT_THAT(not_empty.error().message, HasSubstr("ENOTEMPTY"));
  ASSERT_TRUE(files::remove(**conn, dir.file("x"), true));
  EXPECT_FALSE(exists(dir.file("x")));
  (*hub)->detach(*conn);
}

}  // namespace
}  // namespace airlock::agent::testing
