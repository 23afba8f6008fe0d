// The agent's transfer helper (agent/transfer_helper.h) run as a program, outside any sandbox:
// archives built here with libarchive, hostile ones included. Each bad archive fails naming its
// entry, writes nothing outside the target and leaves no partial output; the controls show the
// same archives do escape with a tool that trusts them (tar -P), in a scratch directory.
#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <csignal>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "test_support.h"

namespace airlock::testing {
namespace {

namespace fs = std::filesystem;

struct Entry {
  std::string name;
  mode_t type = AE_IFREG;
  std::string data;  // regular files
  std::string link;  // symlinks and hard links (hard: type AE_IFREG with link set)
  unsigned dev_major = 0, dev_minor = 0;
};

// An archive in memory: "tar", "tar.gz", "zip".
std::string makeArchive(const std::vector<Entry>& entries, const std::string& format = "tar") {
  std::string out;
  archive* a = archive_write_new();
  if (format == "zip")
    archive_write_set_format_zip(a);
  else
    archive_write_set_format_pax_restricted(a);
  if (format == "tar.gz") archive_write_add_filter_gzip(a);
  archive_write_set_bytes_in_last_block(a, 1);
  archive_write_open(
      a, &out, nullptr,
      [](archive*, void* ctx, const void* buf, size_t n) -> la_ssize_t {
        static_cast<std::string*>(ctx)->append(static_cast<const char*>(buf), n);
        return static_cast<la_ssize_t>(n);
      },
      nullptr);
  for (const auto& e : entries) {
    archive_entry* ae = archive_entry_new();
    archive_entry_set_pathname(ae, e.name.c_str());
    archive_entry_set_filetype(ae, e.type);
    archive_entry_set_perm(ae, e.type == AE_IFDIR ? 0755 : 0644);
    if (e.type == AE_IFLNK) archive_entry_set_symlink(ae, e.link.c_str());
    if (e.type == AE_IFREG && !e.link.empty()) archive_entry_set_hardlink(ae, e.link.c_str());
    if (e.type == AE_IFCHR) archive_entry_set_rdev(ae, makedev(e.dev_major, e.dev_minor));
    archive_entry_set_size(
        ae, e.type == AE_IFREG && e.link.empty() ? static_cast<la_int64_t>(e.data.size()) : 0);
    archive_write_header(a, ae);
    if (e.type == AE_IFREG && e.link.empty() && !e.data.empty())
      archive_write_data(a, e.data.data(), e.data.size());
    archive_entry_free(ae);
  }
  archive_write_close(a);
  archive_write_free(a);
  return out;
}

ProcResult unpack(const std::string& archive, const std::string& target,
                  const std::vector<std::string>& limits = {}) {
  std::vector<std::string> argv = {agentBinary(), "--unpack", target};
  argv.insert(argv.end(), limits.begin(), limits.end());
  return runCommand(argv, archive, 60);
}

// Every path under `dir`, relative, sorted.
std::vector<std::string> treeOf(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec))
    out.push_back(it->path().string().substr(dir.size() + 1));
  std::sort(out.begin(), out.end());
  return out;
}

TEST(TransferHelper, ExtractsFilesDirectoriesAndInsideLinks) {
  TempDir dir;
  const std::string archive = makeArchive({{.name = "repo/", .type = AE_IFDIR},
                                           {.name = "repo/README", .data = "hello\n"},
                                           {.name = "repo/src/main.py", .data = "print(1)\n"},
                                           {.name = "repo/docs", .type = AE_IFLNK, .link = "src"},
                                           {.name = "repo/copy", .link = "repo/README"}},
                                          "tar.gz");
  auto r = unpack(archive, dir.path() + "/out");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"files\":2,\"dirs\":1,\"links\":2,\"bytes\":15,\"compressed_bytes\":" +
                       std::to_string(archive.size()) + "}\n");
  EXPECT_EQ(treeOf(dir.path() + "/out"),
            (std::vector<std::string>{"repo", "repo/README", "repo/copy", "repo/docs", "repo/src",
                                      "repo/src/main.py"}));
  EXPECT_EQ(dir.read("out/repo/src/main.py"), "print(1)\n");
  EXPECT_EQ(fs::read_symlink(dir.path() + "/out/repo/docs"), "src");
  EXPECT_EQ(treeOf(dir.path()),
            (std::vector<std::string>{"out", "out/repo", "out/repo/README", "out/repo/copy",
                                      "out/repo/docs", "out/repo/src", "out/repo/src/main.py"}))
      << "a staging directory was left behind";
}

struct Hostile {
  const char* what;
  std::vector<Entry> entries;
  const char* error;  // stderr names the entry and the rule
};

TEST(TransferHelper, HostileArchivesFailNamingTheEntryAndWriteNothing) {
  const std::vector<Hostile> cases = {
      {"zip slip",
       {{.name = "ok.txt", .data = "x"}, {.name = "../evil.txt", .data = "x"}},
       "entry '../evil.txt': a '..' component (it would leave the target)"},
      {"absolute path",
       {{.name = "/tmp/airlock-transfer-evil", .data = "x"}},
       "entry '/tmp/airlock-transfer-evil': an absolute path"},
      {"symlink outside",
       {{.name = "lnk", .type = AE_IFLNK, .link = "/etc/passwd"}},
       "entry 'lnk': a symlink to '/etc/passwd', outside the target"},
      {"symlink up",
       {{.name = "d/lnk", .type = AE_IFLNK, .link = "../../x"}},
       "entry 'd/lnk': a symlink to '../../x', outside the target"},
      {"hard link outside",
       {{.name = "h", .link = "/etc/passwd"}},
       "entry 'h': a hard link to '/etc/passwd', outside the target"},
      {"device",
       {{.name = "null", .type = AE_IFCHR, .dev_major = 1, .dev_minor = 3}},
       "entry 'null': a character device, which transfers never create"},
      {"fifo",
       {{.name = "pipe", .type = AE_IFIFO}},
       "entry 'pipe': a FIFO, which transfers never create"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    TempDir dir;
    auto r = unpack(makeArchive(c.entries), dir.path() + "/out");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.err.find(c.error), std::string::npos) << r.err;
    EXPECT_TRUE(treeOf(dir.path()).empty()) << "left behind: " << treeOf(dir.path()).size();
  }
  EXPECT_FALSE(fs::exists("/tmp/airlock-transfer-evil"));
}

// The control: the zip-slip archive is really malicious. GNU tar told to trust its paths (-P)
// writes beside the target, in this test's scratch directory.
TEST(TransferHelper, ControlTheSlipArchiveEscapesATrustingTool) {
  TempDir dir;
  dir.write("slip.tar", makeArchive({{.name = "../escaped.txt", .data = "x"}}));
  ASSERT_EQ(::mkdir((dir.path() + "/inner").c_str(), 0755), 0);
  auto r = runCommand({"/usr/bin/tar", "-xPf", dir.file("slip.tar"), "-C", dir.path() + "/inner"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir.path() + "/escaped.txt")) << "control: the archive does not escape";
}

TEST(TransferHelper, CapsStopWhileStreaming) {
  // The helper stops reading at the cap: the rest of what this test feeds it meets a closed pipe.
  ::signal(SIGPIPE, SIG_IGN);
  TempDir dir;
  // A bomb: 256 MiB of zeros gzip to a few hundred KiB; stopped at the ratio, not after.
  const std::string bomb =
      makeArchive({{.name = "zeros", .data = std::string(256u << 20, '\0')}}, "tar.gz");
  ASSERT_LT(bomb.size(), 1u << 20);
  auto r = unpack(bomb, dir.path() + "/bomb", {"--max-ratio", "100"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("entry 'zeros': expands more than 100 times"), std::string::npos) << r.err;
  // Without the ratio cap the same archive is within the byte cap's reach: the control.
  auto bytes = unpack(bomb, dir.path() + "/bytes", {"--max-bytes", "1048576"});
  EXPECT_EQ(bytes.exit_code, 1);
  EXPECT_NE(bytes.err.find("entry 'zeros': the archive holds more than 1048576 bytes"),
            std::string::npos)
      << bytes.err;

  std::vector<Entry> many;
  for (int i = 0; i < 200; ++i) many.push_back({.name = "f" + std::to_string(i), .data = "x"});
  auto files = unpack(makeArchive(many), dir.path() + "/files", {"--max-files", "100"});
  EXPECT_EQ(files.exit_code, 1);
  EXPECT_NE(files.err.find("entry 'f100': more than 100 files"), std::string::npos) << files.err;

  auto deep = unpack(makeArchive({{.name = "a/b/c/d/e", .data = "x"}}), dir.path() + "/deep",
                     {"--max-depth", "4"});
  EXPECT_EQ(deep.exit_code, 1);
  EXPECT_NE(deep.err.find("entry 'a/b/c/d/e': deeper than 4 levels"), std::string::npos)
      << deep.err;
  EXPECT_TRUE(treeOf(dir.path()).empty()) << "partial output left behind";
}

TEST(TransferHelper, AMillionFileArchiveStopsAtTheFileCap) {
  ::signal(SIGPIPE, SIG_IGN);  // the helper stops reading at the cap
  // 10^6 empty files: 512 MB of tar headers, a few MB gzipped.
  std::string gz;
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  archive_write_add_filter_gzip(a);
  archive_write_open(
      a, &gz, nullptr,
      [](archive*, void* ctx, const void* buf, size_t n) -> la_ssize_t {
        static_cast<std::string*>(ctx)->append(static_cast<const char*>(buf), n);
        return static_cast<la_ssize_t>(n);
      },
      nullptr);
  archive_entry* ae = archive_entry_new();
  for (int i = 0; i < 1000000; ++i) {
    archive_entry_clear(ae);
    archive_entry_set_pathname(ae, ("f" + std::to_string(i)).c_str());
    archive_entry_set_filetype(ae, AE_IFREG);
    archive_entry_set_perm(ae, 0644);
    archive_entry_set_size(ae, 0);
    ASSERT_EQ(archive_write_header(a, ae), ARCHIVE_OK);
  }
  archive_entry_free(ae);
  archive_write_close(a);
  archive_write_free(a);
  TempDir dir;
  // The policy's default cap (transfer.*.max_files): the 100001st entry stops it, and the
  // 100000 files staged before it are removed.
  auto r = unpack(gz, dir.path() + "/out", {"--max-files", "100000"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("entry 'f100000': more than 100000 files"), std::string::npos) << r.err;
  EXPECT_TRUE(treeOf(dir.path()).empty()) << "left behind: " << treeOf(dir.path()).size();
}

TEST(TransferHelper, ATruncatedArchiveLeavesNothing) {
  TempDir dir;
  std::string good = makeArchive({{.name = "big", .data = std::string(1 << 20, 'x')}}, "tar.gz");
  auto r = unpack(good.substr(0, good.size() / 2), dir.path() + "/out");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("airlock transfer: "), std::string::npos) << r.err;
  EXPECT_TRUE(treeOf(dir.path()).empty());
  auto junk = unpack(std::string(4096, 'j'), dir.path() + "/junk");
  EXPECT_EQ(junk.exit_code, 1);
  EXPECT_NE(junk.err.find("not an archive"), std::string::npos) << junk.err;
}

// The framing the supervisor uses (--framed): chunks, then 'E'. A stream that stops early, or
// says 'A', commits nothing even when what arrived parses as a whole archive.
std::string framed(const std::string& bytes, size_t chunk, const std::string& end) {
  std::string out;
  for (size_t at = 0; at < bytes.size(); at += chunk) {
    const std::string part = bytes.substr(at, chunk);
    const uint32_t n = static_cast<uint32_t>(part.size());
    out += 'D';
    for (int i = 0; i < 4; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
    out += part;
  }
  return out + end;
}

TEST(TransferHelper, AFramedStreamCommitsOnlyAtItsEnd) {
  TempDir dir;
  const std::string archive =
      makeArchive({{.name = "a.txt", .data = "a"}, {.name = "b.txt", .data = "b"}}, "tar.gz");
  auto ok = unpack(framed(archive, 7, "E"), dir.path() + "/ok", {"--framed"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(treeOf(dir.path() + "/ok"), (std::vector<std::string>{"a.txt", "b.txt"}));
  for (const std::string end : {"A", ""}) {
    SCOPED_TRACE(end.empty() ? "cut" : "abort");
    auto r = unpack(framed(archive, 7, end), dir.path() + "/no", {"--framed"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("the transfer was cut off before its end"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir.path() + "/no"));
  }
  auto garbled = unpack("D\xff\xff\xff\x7fxx", dir.path() + "/garbled", {"--framed"});
  EXPECT_EQ(garbled.exit_code, 1);
  EXPECT_EQ(treeOf(dir.path()), (std::vector<std::string>{"ok", "ok/a.txt", "ok/b.txt"}));
}

// Into an existing directory: new names are added; a name it has already refuses the whole
// archive, and nothing of it is left (the directory's own files are untouched).
TEST(TransferHelper, AnExistingTargetIsAddedToNeverOverwritten) {
  TempDir dir;
  dir.write("home/notes.txt", "mine\n");
  auto added = unpack(makeArchive({{.name = "new.txt", .data = "new\n"}}), dir.path() + "/home");
  ASSERT_EQ(added.exit_code, 0) << added.err;
  EXPECT_EQ(dir.read("home/new.txt"), "new\n");
  auto clash = unpack(
      makeArchive({{.name = "other.txt", .data = "o"}, {.name = "notes.txt", .data = "theirs\n"}}),
      dir.path() + "/home");
  EXPECT_EQ(clash.exit_code, 1);
  EXPECT_NE(clash.err.find("'notes.txt' exists there already in " + dir.path() + "/home"),
            std::string::npos)
      << clash.err;
  EXPECT_EQ(dir.read("home/notes.txt"), "mine\n");
  EXPECT_EQ(treeOf(dir.path() + "/home"), (std::vector<std::string>{"new.txt", "notes.txt"}))
      << "all or nothing: no entry of the refused archive is left";
}

TEST(TransferHelper, PackRoundTripsEveryFormatAndNeverFollowsLinks) {
  TempDir dir;
  dir.write("src/a.txt", "a\n");
  dir.write("src/sub/b.txt", "b\n");
  fs::create_symlink("/etc", dir.path() + "/src/etc-link");
  for (const char* format : {"tar", "tar.gz", "tar.zst", "zip"}) {
    SCOPED_TRACE(format);
    auto packed = runCommand({agentBinary(), "--pack", dir.path() + "/src", "--format", format});
    ASSERT_EQ(packed.exit_code, 0) << packed.err;
    EXPECT_NE(packed.err.find("\"files\":2,\"dirs\":1,\"links\":1,\"bytes\":4"), std::string::npos)
        << packed.err;
    const std::string out = dir.path() + "/out-" + format;
    auto r = unpack(packed.out, out);
    if (std::string(format) == "zip") {
      // A zip read as a stream has no symlinks (its central directory, which marks them, comes
      // last): the link arrives as a small file holding its target, which is harmless.
      ASSERT_EQ(r.exit_code, 0) << r.err;
      EXPECT_FALSE(fs::is_symlink(out + "/etc-link"));
      EXPECT_EQ(dir.read("out-zip/etc-link"), "/etc");
      continue;
    }
    // An absolute link: packed as a link (never followed), refused on the way back in.
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("a symlink to '/etc', outside the target"), std::string::npos) << r.err;
  }
  fs::remove(dir.path() + "/src/etc-link");
  for (const char* format : {"tar", "tar.gz", "tar.zst", "zip"}) {
    SCOPED_TRACE(format);
    auto packed = runCommand({agentBinary(), "--pack", dir.path() + "/src", "--format", format});
    ASSERT_EQ(packed.exit_code, 0) << packed.err;
    const std::string out = dir.path() + "/rt-" + format;
    auto r = unpack(packed.out, out);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(treeOf(out), (std::vector<std::string>{"a.txt", "sub", "sub/b.txt"}));
    EXPECT_EQ(dir.read(std::string("rt-") + format + "/sub/b.txt"), "b\n");
  }
  auto bad = runCommand({agentBinary(), "--pack", dir.path() + "/src", "--format", "rar"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("unknown format 'rar'"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace airlock::testing
