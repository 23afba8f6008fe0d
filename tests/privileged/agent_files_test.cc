// airlock-agent file transfers: chunked writes and reads, O_NOFOLLOW, size limits, errors that
// name the path.
#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "agent_harness.h"
#include "test_support.h"

namespace airlock::agent::testing {
namespace {

namespace proto = airlock::protocol;
using ::airlock::testing::TempDir;
using ::testing::HasSubstr;

class AgentFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    auto ok = agent_.configure(AgentProcess::defaultConfigure());
    ASSERT_EQ(ok.first.type, proto::MsgType::kOk);
  }

  // Reads path through the agent; returns the data, or the Error frame's message.
  struct ReadResult {
    std::string data;
    uint64_t size = 0;
    int chunks = 0;
    std::optional<proto::ErrorMsg> error;
  };
  ReadResult read(uint32_t id, const std::string& path, uint64_t max_bytes = 0) {
    agent_.send(id, proto::FileRead{path, max_bytes});
    ReadResult r;
    for (;;) {
      auto f = agent_.nextFor(id);
      if (!f) break;
      if (f->first.type == proto::MsgType::kError) {
        r.error = *proto::decodeError(f->second);
        break;
      }
      EXPECT_EQ(f->first.type, proto::MsgType::kFileData);
      auto d = proto::decodeFileData(f->second);
      EXPECT_TRUE(d);
      if (r.chunks == 0) r.size = d->size;
      ++r.chunks;
      r.data += d->data;
      if (d->last) break;
    }
    return r;
  }

  std::optional<proto::ErrorMsg> writeOne(uint32_t id, const std::string& path,
                                          const std::string& data, uint32_t mode = 0644) {
    agent_.send(id, proto::FileWrite{path, mode, data, true, true});
    auto f = agent_.nextFor(id);
    if (f && f->first.type == proto::MsgType::kError) return *proto::decodeError(f->second);
    EXPECT_TRUE(f && f->first.type == proto::MsgType::kOk);
    return std::nullopt;
  }

  AgentProcess agent_;
};

TEST_F(AgentFiles, ThreeMebibytesInChunksRoundTrip) {
  TempDir dir;
  std::string content(3 * 1024 * 1024 + 123, '\0');
  std::mt19937 rng(7);
  for (auto& c : content) c = static_cast<char>(rng());
  std::string path = dir.file("big.bin");
  const size_t chunk = proto::kMaxChunk;
  uint32_t id = 100;
  for (size_t off = 0; off < content.size(); off += chunk) {
    bool last = off + chunk >= content.size();
    agent_.send(id, proto::FileWrite{path, 0600, content.substr(off, chunk), off == 0, last});
  }
  auto ok = agent_.nextFor(id);
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->first.type, proto::MsgType::kOk) << proto::decodeError(ok->second)->message;

  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, getuid());
  EXPECT_EQ(static_cast<size_t>(st.st_size), content.size());

  auto r = read(101, path);
  ASSERT_FALSE(r.error) << r.error->message;
  EXPECT_EQ(r.size, content.size());
  EXPECT_EQ(r.chunks, 13);
  EXPECT_TRUE(r.data == content);
}

TEST_F(AgentFiles, EmptyFileAndOverwrite) {
  TempDir dir;
  std::string path = dir.file("f");
  ASSERT_FALSE(writeOne(110, path, "long first content"));
  ASSERT_FALSE(writeOne(111, path, "short"));
  EXPECT_EQ(::airlock::testing::readFile(path), "short");
  ASSERT_FALSE(writeOne(112, path, ""));
  auto r = read(113, path);
  ASSERT_FALSE(r.error);
  EXPECT_EQ(r.chunks, 1);
  EXPECT_EQ(r.size, 0u);
  EXPECT_EQ(r.data, "");
}

TEST_F(AgentFiles, SymlinksAreNeverFollowed) {
  TempDir dir;
  dir.write("target", "secret");
  std::string link = dir.file("link");
  ASSERT_EQ(symlink(dir.file("target").c_str(), link.c_str()), 0);
  auto r = read(120, link);
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->stage, "file_read");
  EXPECT_EQ(r.error->errnum, ELOOP);
  EXPECT_THAT(r.error->message, HasSubstr("'" + link + "'"));

  auto w = writeOne(121, link, "overwrite");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->stage, "file_write");
  EXPECT_EQ(w->errnum, ELOOP);
  EXPECT_EQ(dir.read("target"), "secret");
}

TEST_F(AgentFiles, SizeLimitsAndNonRegularFiles) {
  TempDir dir;
  dir.write("ten", "0123456789");
  auto over = read(130, dir.file("ten"), 9);
  ASSERT_TRUE(over.error);
  EXPECT_EQ(over.error->errnum, EFBIG);
  EXPECT_THAT(over.error->message, HasSubstr("10 bytes exceeds max_bytes 9"));
  auto exact = read(131, dir.file("ten"), 10);
  ASSERT_FALSE(exact.error);
  EXPECT_EQ(exact.data, "0123456789");

  auto d = read(132, dir.path());
  ASSERT_TRUE(d.error);
  EXPECT_EQ(d.error->errnum, EISDIR);
  ASSERT_EQ(mkfifo(dir.file("fifo").c_str(), 0600), 0);
  auto fifo = read(133, dir.file("fifo"));  // must not hang on open
  ASSERT_TRUE(fifo.error);
  EXPECT_EQ(fifo.error->errnum, EINVAL);
}

TEST_F(AgentFiles, MissingParentIsENOENTNamingThePath) {
  TempDir dir;
  std::string path = dir.file("no/such/dir/f");
  auto w = writeOne(140, path, "x");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->errnum, ENOENT);
  EXPECT_THAT(w->message, HasSubstr("'" + path + "'"));
  auto r = read(141, dir.file("missing"));
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->errnum, ENOENT);
}

TEST_F(AgentFiles, ContinuationWithoutFirstChunkIsRefused) {
  TempDir dir;
  agent_.send(150, proto::FileWrite{dir.file("f"), 0644, "x", false, true});
  auto f = agent_.nextFor(150);
  ASSERT_TRUE(f);
  ASSERT_EQ(f->first.type, proto::MsgType::kError);
  EXPECT_EQ(proto::decodeError(f->second)->errnum, EBADF);
  EXPECT_NE(access(dir.file("f").c_str(), F_OK), 0);
}

}  // namespace
}  // namespace airlock::agent::testing
