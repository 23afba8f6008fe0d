// The C++ client SDK against a real `airlock serve` on a temporary socket, policy and state
// directory: a service's whole round trip (create, code with a figure, commands, files, typed
// errors, timeouts) and RAII, which must leave no sandbox and no host resource behind.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "airlock/client/http.h"
#include "airlock/client/sandbox.h"
#include "test_support.h"

extern char** environ;

namespace airlock::sdk {
namespace {

using testing::TempDir;

// `airlock serve` as an operator runs it; SIGTERM on destruction (it destroys its sandboxes).
class Supervisor {
 public:
  explicit Supervisor(const TempDir& dir) : sock_(dir.file("airlock.sock")) {
    dir.write("policy.toml", "schema = 1\n[server]\nsocket = \"" + sock_ + "\"\nstate_dir = \"" +
                                 dir.file("state") + "\"\n");
    std::string bin = testing::airlockBinary(), policy = dir.file("policy.toml");
    std::vector<std::string> args = {bin, "serve", "--policy", policy};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, bin.c_str(), nullptr, nullptr, argv.data(), environ) != 0) pid_ = -1;
  }
  ~Supervisor() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  // Waits until /healthz answers.
  ::testing::AssertionResult ready() {
    if (pid_ <= 0) return ::testing::AssertionFailure() << "could not start airlock serve";
    auto http = Http::connect(url(), "");
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!http->call("GET", "/healthz")) {
      if (waitpid(pid_, nullptr, WNOHANG) != 0)
        return ::testing::AssertionFailure() << "airlock serve exited early";
      if (std::chrono::steady_clock::now() > deadline)
        return ::testing::AssertionFailure() << "airlock serve did not come up in 30 s";
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return ::testing::AssertionSuccess();
  }
  std::string url() const { return "unix://" + sock_; }

 private:
  std::string sock_;
  pid_t pid_ = -1;
};

class CppSdk : public ::testing::Test {
 protected:
  void SetUp() override {
    AIRLOCK_REQUIRE_ROOT();
    before_ = testing::snapshotHostResources();
    supervisor_ = std::make_unique<Supervisor>(dir_);
    ASSERT_TRUE(supervisor_->ready());
    conn_ = {supervisor_->url(), ""};
  }
  void TearDown() override {
    if (!testing::isRealRoot()) return;
    supervisor_.reset();
    EXPECT_EQ(testing::snapshotHostResources(), before_) << "sandboxes left host resources behind";
  }
  SandboxOptions options(const std::string& name = "") {
    SandboxOptions o;
    o.language = "python";
    o.name = name;
    o.metadata = {{"test", "cpp-sdk"}};
    o.connection = conn_;
    return o;
  }

  testing::HostResources before_;
  TempDir dir_;
  std::unique_ptr<Supervisor> supervisor_;
  ConnectionOptions conn_;
};

TEST_F(CppSdk, CodeCommandsAndFilesRoundTrip) {
  auto sb = Sandbox::create(options("cpp-sdk"));
  ASSERT_TRUE(sb) << sb.error().message();
  EXPECT_EQ(sb->info().state, "running");

  std::string live;
  RunCodeOptions o;
  o.on_stdout = [&](std::string_view s) { live += s; };
  auto ex = sb->runCode("x = 41\nprint('hello')\nx + 1", o);
  ASSERT_TRUE(ex) << ex.error().message();
  EXPECT_EQ(ex->stdout_text, "hello\n");
  EXPECT_EQ(live, "hello\n");
  EXPECT_EQ(ex->text(), "42");
  EXPECT_EQ(sb->runCode("x * 2")->text(), "82") << "state persists between runs";

  auto plot = sb->runCode("import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])");
  ASSERT_TRUE(plot) << plot.error().message();
  std::string png;
  for (const auto& r : plot->results)
    if (r.has("image/png")) png = r.png();
  EXPECT_TRUE(png.starts_with("iVBORw0KGgo")) << "a PNG, base64";

  auto raised = sb->runCode("1 / 0");
  ASSERT_TRUE(raised);
  ASSERT_TRUE(raised->error);
  EXPECT_EQ(raised->error->name, "ZeroDivisionError");

  ASSERT_TRUE(sb->files().mkdir("/home/user/data"));
  const std::string bytes("a,b\n1,\xff\n", 8);
  ASSERT_TRUE(sb->files().write("/home/user/data/in.csv", bytes));
  auto read = sb->files().read("/home/user/data/in.csv");
  ASSERT_TRUE(read) << read.error().message();
  EXPECT_EQ(*read, bytes);
  ASSERT_TRUE(sb->files().rename("/home/user/data/in.csv", "/home/user/data/t.csv"));
  auto list = sb->files().list("/home/user/data");
  ASSERT_TRUE(list);
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].name, "t.csv");
  EXPECT_EQ((*list)[0].size, 8u);

  auto cmd = sb->commands().run("wc -l < /home/user/data/t.csv; exit 4");
  ASSERT_TRUE(cmd) << cmd.error().message();
  EXPECT_EQ(cmd->exit_code, 4);
  EXPECT_EQ(cmd->stdout_text, "2\n");

  auto bg = sb->commands().start(std::vector<std::string>{"cat"});
  ASSERT_TRUE(bg) << bg.error().message();
  ASSERT_TRUE(bg->sendStdin("fed through stdin\n", true));
  auto done = bg->wait();
  ASSERT_TRUE(done) << done.error().message();
  EXPECT_EQ(done->stdout_text, "fed through stdin\n");
  EXPECT_EQ(done->exit_code, 0);

  // The directory packed by the transfer helper and unpacked elsewhere (docs/transfer.md).
  auto packed = sb->downloadArchive("/home/user/data", "tar.gz");
  ASSERT_TRUE(packed) << packed.error().message();
  EXPECT_TRUE(packed->starts_with("\x1f\x8b")) << "gzip";
  auto unpacked = sb->uploadArchive("/home/user/copy", *packed);
  ASSERT_TRUE(unpacked) << unpacked.error().message();
  EXPECT_EQ(unpacked->status, "ok");
  EXPECT_EQ(unpacked->files, 1u);
  EXPECT_EQ(unpacked->archive_bytes, packed->size());
  EXPECT_EQ(sb->files().read("/home/user/copy/t.csv").value_or(""), bytes);
  auto denied = sb->transferIn("https://data.example.com/x.tar.gz", "/home/user/url");
  ASSERT_FALSE(denied) << "no transfer.http.allow pattern in the policy";
  EXPECT_EQ(denied.error().kind(), ErrorKind::kTransferFailed);
  EXPECT_EQ(denied.error().code(), "denied");

  ASSERT_TRUE(sb->files().remove("/home/user/copy", true));
  ASSERT_TRUE(sb->files().remove("/home/user/data", true));
  EXPECT_EQ(sb->files().exists("/home/user/data").value_or(true), false);
  ASSERT_TRUE(sb->setTimeout(120));
  EXPECT_EQ(sb->info().keep_alive_s, 120);
}

TEST_F(CppSdk, TypedErrorsAndTimeouts) {
  auto missing = Sandbox::connect("no-such-sandbox", conn_);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind(), ErrorKind::kNotFound);

  auto sb = Sandbox::create(options());
  ASSERT_TRUE(sb) << sb.error().message();
  RunCodeOptions bad;
  bad.language = "cobol";
  auto lang = sb->runCode("x", bad);
  ASSERT_FALSE(lang);
  EXPECT_EQ(lang.error().kind(), ErrorKind::kBadRequest) << lang.error().message();

  auto no_file = sb->files().read("/home/user/nothing-here");
  ASSERT_FALSE(no_file);
  EXPECT_EQ(no_file.error().kind(), ErrorKind::kNotFound) << no_file.error().message();

  RunCodeOptions quick;
  quick.timeout_s = 1;
  auto slow = sb->runCode("import time\ny = 5\nwhile True: time.sleep(0.05)", quick);
  ASSERT_FALSE(slow);
  EXPECT_EQ(slow.error().kind(), ErrorKind::kTimeout);
  EXPECT_EQ(sb->runCode("y")->text(), "5") << "the interrupted context keeps its state";

  CommandOptions short_cmd;
  short_cmd.timeout_s = 1;
  auto hung = sb->commands().run("sleep 30", short_cmd);
  ASSERT_FALSE(hung);
  EXPECT_EQ(hung.error().kind(), ErrorKind::kTimeout);

  auto taken = Sandbox::create(options());
  ASSERT_TRUE(taken);
  SandboxOptions dup = options("dup");
  auto first = Sandbox::create(dup);
  ASSERT_TRUE(first);
  auto second = Sandbox::create(dup);
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().kind(), ErrorKind::kConflict) << second.error().message();
}

TEST_F(CppSdk, OwnedSandboxesEndWithTheirObjectsDetachedOnesDoNot) {
  std::string kept_id;
  {
    auto owned = Sandbox::create(options("owned"));
    ASSERT_TRUE(owned);
    auto kept = Sandbox::create(options("kept"));
    ASSERT_TRUE(kept);
    kept->detach();
    kept_id = kept->id();
    auto listed = Sandbox::list({{"test", "cpp-sdk"}}, conn_);
    ASSERT_TRUE(listed);
    EXPECT_EQ(listed->size(), 2u);
    auto again = Sandbox::connect("owned", conn_);
    ASSERT_TRUE(again);
    EXPECT_EQ(again->id(), owned->id());
  }
  auto listed = Sandbox::list({{"test", "cpp-sdk"}}, conn_);
  ASSERT_TRUE(listed) << listed.error().message();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].id, kept_id);
  auto kept = Sandbox::connect(kept_id, conn_);
  ASSERT_TRUE(kept);
  ASSERT_TRUE(kept->kill());
  EXPECT_EQ(Sandbox::connect(kept_id, conn_).error().kind(), ErrorKind::kNotFound);
}

// The README's quick start (sdk/cpp/examples/quickstart.cc) as a user runs it: AIRLOCK_URL
// finds the supervisor, the value comes back, and its sandbox is gone when the program ends.
TEST_F(CppSdk, ReadmeQuickStartRuns) {
  auto ran = testing::runCommand({AIRLOCK_CLIENT_QUICKSTART}, "", 120,
                                 {"AIRLOCK_URL=" + supervisor_->url()});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_TRUE(ran.out.starts_with("3\ntotal ")) << ran.out;
  auto listed = Sandbox::list({}, conn_);
  ASSERT_TRUE(listed) << listed.error().message();
  EXPECT_TRUE(listed->empty()) << "the quick start's sandbox outlived it";
}

}  // namespace
}  // namespace airlock::sdk
