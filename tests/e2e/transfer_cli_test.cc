// `airlock run --in SOURCE:DIR --out DIR:DEST`, end to end: real archives built here, real host
// directories, a real HTTP server in a network namespace this test makes, and the records in the
// result and the audit log (docs/transfer.md).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/sha.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "netns_server.h"
#include "test_support.h"

extern char** environ;

namespace airlock::testing {
namespace {

using nlohmann::json;

std::string sha256Of(const std::string& bytes) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), d);
  std::string hex;
  char b[3];
  for (unsigned char c : d) {
    std::snprintf(b, sizeof b, "%02x", c);
    hex += b;
  }
  return hex;
}

// Names in a tar archive, as `tar -t` lists them ("./" prefixes dropped).
std::set<std::string> tarNames(const std::string& archive) {
  auto r = runCommand({"/usr/bin/tar", "-tf", archive});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> names;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("./")) line = line.substr(2);
    if (line.size() > 1 && line.back() == '/') line.pop_back();
    if (!line.empty() && line != "." && line != "./") names.insert(line);
  }
  return names;
}

class TransferCli : public ::testing::Test {
 protected:
  void SetUp() override {
    AIRLOCK_REQUIRE_ROOT();
    before_ = snapshotHostResources();
    // A small tree to move around: two files, one in a subdirectory.
    std::filesystem::create_directories(dir_.file("src/sub"));
    dir_.write("src/a.txt", "alpha\n");
    dir_.write("src/sub/b.txt", "beta\n");
    tar({"-czf", dir_.file("in.tar.gz"), "-C", dir_.file("src"), "."});
  }
  void TearDown() override {
    if (IsSkipped()) return;
    EXPECT_EQ(snapshotHostResources(), before_) << "a sandbox left something on the host";
  }

  void tar(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"/usr/bin/tar"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = runCommand(argv);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  // `airlock run --json ARGS`: the record, and the exit code checked against it.
  json run(const std::vector<std::string>& args) {
    std::vector<std::string> a{"run", "--local", "--json"};
    a.insert(a.end(), args.begin(), args.end());
    auto r = runAirlock(a, "", 180);
    EXPECT_FALSE(r.timed_out);
    auto j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "not JSON: " << r.out << "\nstderr: " << r.err;
    if (j.is_discarded()) return json::object();
    EXPECT_EQ(j["airlock_exit_code"], r.exit_code);
    return j;
  }

  TempDir dir_;
  HostResources before_;
};

TEST_F(TransferCli, ALocalArchiveGoesInAndADirectoryComesOutPacked) {
  const std::string out = dir_.file("out.tar.zst");
  auto j = run({"--in", dir_.file("in.tar.gz") + ":/home/user/d", "--out", "/home/user/d:" + out,
                "--lang", "shell", "-c", "cat d/a.txt d/sub/b.txt; echo gamma > d/c.txt"});
  ASSERT_EQ(j["airlock_exit_code"], 0) << j.dump(2);
  EXPECT_EQ(j["stdout"], "alpha\nbeta\n");
  ASSERT_EQ(j["transfers"].size(), 2u) << j.dump(2);
  const json& in = j["transfers"][0];
  EXPECT_EQ(in["direction"], "in");
  EXPECT_EQ(in["plugin"], "archive");
  EXPECT_EQ(in["status"], "ok");
  EXPECT_EQ(in["sandbox_path"], "/home/user/d");
  EXPECT_EQ(in["files"], 2);
  EXPECT_EQ(in["bytes"], 11);
  // The hash is of the archive's bytes as they crossed: the local file's.
  EXPECT_EQ(in["sha256"], sha256Of(readFile(dir_.file("in.tar.gz"))));
  const json& o = j["transfers"][1];
  EXPECT_EQ(o["direction"], "out");
  EXPECT_EQ(o["status"], "ok");
  EXPECT_EQ(o["files"], 3);
  EXPECT_EQ(o["sha256"], sha256Of(readFile(out)));
  EXPECT_EQ(tarNames(out), (std::set<std::string>{"a.txt", "c.txt", "sub", "sub/b.txt"}));
}

TEST_F(TransferCli, AZipSlipStopsTheRunBeforeTheProgramAndWritesNothing) {
  // Python's tarfile writes the hostile name as is (GNU tar would strip the "../").
  const std::string evil = dir_.file("evil.tar");
  auto r =
      runCommand({"/usr/bin/python3", "-c",
                  "import io,tarfile,sys\n"
                  "t=tarfile.open(sys.argv[1],'w')\n"
                  "for n in ('ok.txt','../escaped.txt'):\n"
                  "  i=tarfile.TarInfo(n); d=b'x\\n'; i.size=len(d); t.addfile(i,io.BytesIO(d))\n"
                  "t.close()\n",
                  evil});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = run({"--in", evil + ":/home/user/d", "--lang", "shell", "-c", "echo ran; ls -a"});
  EXPECT_EQ(j["airlock_exit_code"], 125) << j.dump(2);
  EXPECT_EQ(j["stdout"], "") << "the program ran after a refused transfer";
  ASSERT_EQ(j["transfers"].size(), 1u);
  EXPECT_EQ(j["transfers"][0]["status"], "error");
  EXPECT_NE(j["transfers"][0]["error"].get<std::string>().find("entry '../escaped.txt'"),
            std::string::npos)
      << j.dump(2);
}

TEST_F(TransferCli, APluginTheProfileDoesNotListIsRefused) {
  dir_.write("p.toml", "schema = 1\n[profiles.default.transfer]\nplugins = [\"http\"]\n");
  auto j = run({"--policy", dir_.file("p.toml"), "--in", dir_.file("in.tar.gz") + ":/home/user/d",
                "--lang", "shell", "-c", "echo ran"});
  EXPECT_EQ(j["airlock_exit_code"], 123) << j.dump(2);
  EXPECT_EQ(j["stdout"], "");
  ASSERT_EQ(j["transfers"].size(), 1u);
  EXPECT_EQ(j["transfers"][0]["status"], "denied");
  EXPECT_NE(j["transfers"][0]["error"].get<std::string>().find(
                "transfer plugin 'archive' is not in profile 'default' transfer.plugins (http)"),
            std::string::npos)
      << j.dump(2);
}

TEST_F(TransferCli, AQuotaHitMidTransferLeavesNothingBehind) {
  // 3 MiB of incompressible bytes against a 1 MiB cap: the cap stops the stream, and the staged
  // part is removed (the program finds no directory).
  std::string noise(3 << 20, '\0');
  uint32_t x = 12345;
  for (char& c : noise) {
    x = x * 1103515245 + 12345;
    c = static_cast<char>(x >> 24);
  }
  dir_.write("src2/noise.bin", noise);
  tar({"-cf", dir_.file("big.tar"), "-C", dir_.file("src2"), "."});
  dir_.write("p.toml", "schema = 1\n[profiles.default.transfer.archive]\nmax_mb = 1\n");
  auto j = run({"--policy", dir_.file("p.toml"), "--in", dir_.file("big.tar") + ":/home/user/d",
                "--lang", "shell", "-c", "echo ran"});
  EXPECT_EQ(j["airlock_exit_code"], 123) << j.dump(2);
  ASSERT_EQ(j["transfers"].size(), 1u);
  EXPECT_NE(j["transfers"][0]["error"].get<std::string>().find("more than the transfer limit"),
            std::string::npos)
      << j.dump(2);

  // The same cap hit while the archive inflates (3 MiB of zeros gzip to a few KiB): the helper
  // stops midway and removes what it staged, so the program never runs.
  dir_.write("src3/zeros", std::string(3 << 20, '\0'));
  tar({"-czf", dir_.file("zeros.tar.gz"), "-C", dir_.file("src3"), "."});
  auto z = run({"--policy", dir_.file("p.toml"), "--in",
                dir_.file("zeros.tar.gz") + ":/home/user/d", "--lang", "shell", "-c", "echo ran"});
  EXPECT_EQ(z["airlock_exit_code"], 125) << z.dump(2);
  EXPECT_EQ(z["stdout"], "");
  EXPECT_NE(z["transfers"][0]["error"].get<std::string>().find("zeros"), std::string::npos)
      << z.dump(2);

  // Out: the packed archive passes the cap while it streams; no partial file is left.
  auto k = run({"--policy", dir_.file("p.toml"), "--out", "/home/user/d:" + dir_.file("o.tar"),
                "--lang", "shell", "-c", "mkdir d; head -c 2000000 /dev/urandom > d/big.bin"});
  ASSERT_EQ(k["transfers"].size(), 1u) << k.dump(2);
  EXPECT_EQ(k["transfers"][0]["status"], "error") << k.dump(2);
  // The program succeeded, but what it made did not get out: the run did not do its job.
  EXPECT_EQ(k["airlock_exit_code"], 125) << k.dump(2);
  // The helper names the entry that passed the cap as it packed.
  EXPECT_NE(k["transfers"][0]["error"].get<std::string>().find("'big.bin': more than 1048576"),
            std::string::npos)
      << k.dump(2);
  EXPECT_FALSE(std::filesystem::exists(dir_.file("o.tar"))) << "a partial archive was left";
}

TEST_F(TransferCli, AHelperSlowerThanItsSourceStillGetsEveryByte) {
  // The agent holds at most 4 MiB of input its helper has not read, and the supervisor sends on
  // the helper's credit only. bzip2 unpacks at a few tens of MB/s of input while a local file
  // reads at hundreds, so without that credit 12 MiB of compressed input would overflow it.
  std::string text(24 << 20, '\0');
  uint64_t x = 88172645463325252ull;
  for (char& c : text) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<char>('a' + (x & 15));  // 4 bits of entropy a byte: bzip2 halves it
  }
  dir_.write("slow/text.txt", text);
  tar({"-cjf", dir_.file("slow.tar.bz2"), "-C", dir_.file("slow"), "."});
  ASSERT_GT(std::filesystem::file_size(dir_.file("slow.tar.bz2")), 8u << 20);
  auto j = run({"--in", dir_.file("slow.tar.bz2") + ":/home/user/d", "--lang", "shell", "-c",
                "wc -c < d/text.txt"});
  ASSERT_EQ(j["airlock_exit_code"], 0) << j.dump(2);
  EXPECT_EQ(j["stdout"], std::to_string(24 << 20) + "\n");
  EXPECT_EQ(j["transfers"][0]["sha256"], sha256Of(readFile(dir_.file("slow.tar.bz2"))));
}

TEST_F(TransferCli, HostDirectoriesComeInBeneathTheirRootOnly) {
  std::filesystem::create_directories(dir_.file("root/iris/deep"));
  dir_.write("root/iris/data.csv", "1,2,3\n");
  dir_.write("root/iris/deep/more.csv", "4,5,6\n");
  dir_.write("secret.txt", "not for sandboxes\n");
  std::filesystem::create_symlink(dir_.file("secret.txt"), dir_.file("root/leak"));
  dir_.write("p.toml", "schema = 1\n[transfer.roots]\ndatasets = \"" + dir_.file("root") + "\"\n");
  auto j = run({"--policy", dir_.file("p.toml"), "--in", "hostdir:datasets/iris:/home/user/iris",
                "--lang", "shell", "-c", "cat iris/data.csv iris/deep/more.csv"});
  ASSERT_EQ(j["airlock_exit_code"], 0) << j.dump(2);
  EXPECT_EQ(j["stdout"], "1,2,3\n4,5,6\n");
  EXPECT_EQ(j["transfers"][0]["plugin"], "hostdir");
  EXPECT_EQ(j["transfers"][0]["files"], 2);

  for (const char* escape :
       {"hostdir:datasets/../secret.txt", "hostdir:datasets/leak", "hostdir:nosuch/x"}) {
    auto k = run({"--policy", dir_.file("p.toml"), "--in", std::string(escape) + ":/home/user/x",
                  "--lang", "shell", "-c", "echo ran"});
    EXPECT_EQ(k["airlock_exit_code"], 123) << escape << ": " << k.dump(2);
    EXPECT_EQ(k["stdout"], "") << escape;
    EXPECT_NE(k["transfers"][0]["error"].get<std::string>().find(escape), std::string::npos)
        << "the error names the location: " << k.dump(2);
  }
}

TEST_F(TransferCli, TheReviewChainSeesTheLocationAndTheListingBeforeAnythingLands) {
  // Rules that name "transfer" see a transfer's first line ("in LOCATION -> DIR") and, once the
  // archive is staged inside, one "TYPE SIZE NAME" line per entry.
  dir_.write("p.toml",
             "schema = 1\n"
             "[profiles.default.review]\n"
             "chain = [\"patterns\"]\n"
             "[[profiles.default.review.patterns.rules]]\n"
             "id = \"no-dotenv\"\n"
             "pattern = '(?m)^file [0-9]+ (.*/)?\\.env$'\n"
             "action = \"deny\"\n"
             "reason = \"archives with .env files are not taken in\"\n"
             "languages = [\"transfer\"]\n"
             "[[profiles.default.review.patterns.rules]]\n"
             "id = \"no-untrusted\"\n"
             "pattern = '^in [^ ]*untrusted'\n"
             "action = \"deny\"\n"
             "languages = [\"transfer\"]\n"
             // A rule for code: it must not see the listing, whose sub/b.txt it would match.
             "[[profiles.default.review.patterns.rules]]\n"
             "id = \"code-only\"\n"
             "pattern = 'b\\.txt'\n"
             "action = \"deny\"\n");

  // Positive control: a clean archive passes both looks, and the verdict is on the record.
  auto ok = run({"--policy", dir_.file("p.toml"), "--in", dir_.file("in.tar.gz") + ":/home/user/d",
                 "--lang", "shell", "-c", "cat d/a.txt"});
  ASSERT_EQ(ok["airlock_exit_code"], 0) << ok.dump(2);
  EXPECT_EQ(ok["stdout"], "alpha\n");
  EXPECT_EQ(ok["transfers"][0]["review"]["verdict"], "allow") << ok.dump(2);

  // By content: the listing names a .env two levels down; nothing reaches the program.
  std::filesystem::create_directories(dir_.file("src4/conf"));
  dir_.write("src4/app.py", "print(1)\n");
  dir_.write("src4/conf/.env", "KEY=secret\n");
  tar({"-czf", dir_.file("app.tar.gz"), "-C", dir_.file("src4"), "."});
  auto j = run({"--policy", dir_.file("p.toml"), "--in", dir_.file("app.tar.gz") + ":/home/user/d",
                "--lang", "shell", "-c", "echo ran"});
  EXPECT_EQ(j["airlock_exit_code"], 123) << j.dump(2);
  EXPECT_EQ(j["stdout"], "") << "the program ran after a denied transfer";
  ASSERT_EQ(j["transfers"].size(), 1u) << j.dump(2);
  EXPECT_EQ(j["transfers"][0]["status"], "denied");
  EXPECT_EQ(j["transfers"][0]["review"]["rule"], "no-dotenv") << j.dump(2);
  EXPECT_NE(j["transfers"][0]["error"].get<std::string>().find(
                "archives with .env files are not taken in"),
            std::string::npos)
      << j.dump(2);
  EXPECT_EQ(j["transfers"][0]["files"], 0) << "a denied archive is not counted as moved in";

  // By location: denied once the source is open, before a byte is unpacked.
  std::filesystem::copy_file(dir_.file("in.tar.gz"), dir_.file("untrusted.tar.gz"));
  auto k =
      run({"--policy", dir_.file("p.toml"), "--in", dir_.file("untrusted.tar.gz") + ":/home/user/d",
           "--lang", "shell", "-c", "echo ran"});
  EXPECT_EQ(k["airlock_exit_code"], 123) << k.dump(2);
  EXPECT_EQ(k["transfers"][0]["review"]["rule"], "no-untrusted") << k.dump(2);
  EXPECT_EQ(k["transfers"][0]["archive_bytes"], 0) << k.dump(2);
}

TEST_F(TransferCli, HostDirectoriesTakeArchivesOutOnlyWhenWritable) {
  std::filesystem::create_directories(dir_.file("results"));
  dir_.write("ro.toml",
             "schema = 1\n[transfer.roots]\nresults = \"" + dir_.file("results") + "\"\n");
  auto j = run({"--policy", dir_.file("ro.toml"), "--out", "/home/user/o:hostdir:results/r.tar",
                "--lang", "shell", "-c", "mkdir o; echo x > o/x"});
  ASSERT_EQ(j["transfers"].size(), 1u) << j.dump(2);
  EXPECT_EQ(j["transfers"][0]["status"], "denied");
  EXPECT_NE(j["transfers"][0]["error"].get<std::string>().find("read-only"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir_.file("results/r.tar")));

  dir_.write(
      "rw.toml",
      "schema = 1\n[transfer]\nwritable_roots = [\"results\"]\n[transfer.roots]\nresults = \"" +
          dir_.file("results") + "\"\n");
  auto k = run({"--policy", dir_.file("rw.toml"), "--out", "/home/user/o:hostdir:results/r.tar",
                "--lang", "shell", "-c", "mkdir o; echo x > o/x"});
  ASSERT_EQ(k["transfers"][0]["status"], "ok") << k.dump(2);
  EXPECT_EQ(tarNames(dir_.file("results/r.tar")), (std::set<std::string>{"x"}));
}

TEST_F(TransferCli, EveryTransferIsAnAuditRecord) {
  dir_.write("p.toml", "schema = 1\n[audit]\nlog = \"" + dir_.file("audit.jsonl") +
                           "\"\n[profiles.default.transfer]\nplugins = [\"archive\"]\n");
  auto j = run({"--policy", dir_.file("p.toml"), "--in", dir_.file("in.tar.gz") + ":/home/user/d",
                "--lang", "shell", "-c", "true"});
  ASSERT_EQ(j["airlock_exit_code"], 0) << j.dump(2);
  std::istringstream log(readFile(dir_.file("audit.jsonl")));
  int transfers = 0;
  for (std::string line; std::getline(log, line);) {
    auto r = json::parse(line, nullptr, false);
    if (r.is_discarded() || r["type"] != "transfer") continue;
    ++transfers;
    EXPECT_EQ(r["direction"], "in");
    EXPECT_EQ(r["plugin"], "archive");
    EXPECT_EQ(r["status"], "ok");
    EXPECT_EQ(r["sandbox"], j["sandbox_id"]);
    EXPECT_EQ(r["sha256"], j["transfers"][0]["sha256"]);
  }
  EXPECT_EQ(transfers, 1);
}

TEST_F(TransferCli, BadSpecsAreNamed) {
  for (const char* spec : {"https://example.com/a.tar", "hostdir:data", "nocolon"}) {
    auto r = runAirlock({"run", "--local", "--in", spec, "--lang", "shell", "-c", "true"});
    EXPECT_EQ(r.exit_code, 125) << spec;
    EXPECT_NE(r.err.find("expected SOURCE:SANDBOX_DIR"), std::string::npos)
        << spec << ": " << r.err;
  }
}

// A real HTTP server in a network namespace this test makes, reached over a veth pair: the
// supervisor fetches from it, under the profile's URL patterns and protected ranges.
class TransferCliHttp : public TransferCli {
 protected:
  void SetUp() override {
    TransferCli::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    std::filesystem::create_directories(dir_.file("static"));
    std::filesystem::copy_file(dir_.file("in.tar.gz"), dir_.file("static/in.tar.gz"));
    std::string why;
    server_ = NetnsServer::start({"/usr/bin/python3", AIRLOCK_TRANSFER_HTTP_SERVER, "--addr",
                                  "{addr}", "--http-port", "8080", "--static", dir_.file("static")},
                                 8080, &why);
    ASSERT_NE(server_, nullptr) << why;
    addr_ = server_->address();
    dir_.write("p.toml", "schema = 1\n[profiles.default.transfer.http]\nallow = [\"http://" +
                             addr_ + ":8080/static/\"]\nallow_private = [\"" + addr_ + "/32\"]\n");
  }
  void TearDown() override {
    server_.reset();
    TransferCli::TearDown();
  }
  std::string url(const std::string& path) const { return server_->url(path); }

  std::unique_ptr<NetnsServer> server_;
  std::string addr_;  // the server's address
};

TEST_F(TransferCliHttp, AnAllowedUrlIsFetchedAndUnpacked) {
  auto j = run({"--policy", dir_.file("p.toml"), "--in", url("/static/in.tar.gz") + ":/home/user/d",
                "--lang", "shell", "-c", "cat d/a.txt"});
  ASSERT_EQ(j["airlock_exit_code"], 0) << j.dump(2);
  EXPECT_EQ(j["stdout"], "alpha\n");
  EXPECT_EQ(j["transfers"][0]["plugin"], "http");
  EXPECT_EQ(j["transfers"][0]["sha256"], sha256Of(readFile(dir_.file("in.tar.gz"))));
}

TEST_F(TransferCliHttp, UrlsOutsideThePolicyAndRedirectsToMetadataAreRefused) {
  // Positive control above: the same server and policy fetch fine. Here: a path outside the
  // pattern, the address without allow_private, and a redirect to the metadata service.
  dir_.write("noprivate.toml", "schema = 1\n[profiles.default.transfer.http]\nallow = [\"http://" +
                                   addr_ + ":8080/\"]\n");
  struct Case {
    std::string policy, location, want;
  } cases[] = {
      {"p.toml", url("/file/10.tar"), "not allowed by transfer.http.allow"},
      {"noprivate.toml", url("/static/in.tar.gz"), "protected range"},
  };
  for (const auto& c : cases) {
    auto j = run({"--policy", dir_.file(c.policy), "--in", c.location + ":/home/user/d", "--lang",
                  "shell", "-c", "echo ran"});
    EXPECT_EQ(j["airlock_exit_code"], 123) << c.location << ": " << j.dump(2);
    EXPECT_EQ(j["stdout"], "");
    EXPECT_NE(j["transfers"][0]["error"].get<std::string>().find(c.want), std::string::npos)
        << c.location << ": " << j.dump(2);
  }
  dir_.write("redirect.toml", "schema = 1\n[profiles.default.transfer.http]\nallow = [\"http://" +
                                  addr_ +
                                  ":8080/\", \"http://169.254.169.254/\"]\nallow_private = [\"" +
                                  addr_ + "/32\"]\n");
  auto j = run({"--policy", dir_.file("redirect.toml"), "--in",
                url("/redirect?to=http://169.254.169.254/latest/meta-data") + ":/home/user/d",
                "--lang", "shell", "-c", "echo ran"});
  EXPECT_EQ(j["airlock_exit_code"], 123) << j.dump(2);
  EXPECT_NE(j["transfers"][0]["error"].get<std::string>().find("169.254.169.254"),
            std::string::npos)
      << j.dump(2);
}

}  // namespace
}  // namespace airlock::testing
