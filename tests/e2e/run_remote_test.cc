// `airlock run` through a running `airlock serve` (POST /v1/runs): the same programs run in
// this process (--local) and through the supervisor, side by side, must print the same output,
// exit with the same code and write the same --json record (timings and ids aside).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "test_support.h"

namespace airlock::testing {
namespace {

using Json = nlohmann::json;

// GET over the supervisor's socket, the body of a Content-Length answer (enough for /metrics).
std::string get(const std::string& sock, const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock.c_str());
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return {};
  }
  std::string req = "GET " + path + " HTTP/1.1\r\nHost: airlock\r\nConnection: close\r\n\r\n";
  (void)!write(fd, req.data(), req.size());
  std::string raw;
  char buf[65536];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) raw.append(buf, static_cast<size_t>(n));
  close(fd);
  if (!raw.starts_with("HTTP/1.1 200")) return {};
  auto body = raw.find("\r\n\r\n");
  return body == std::string::npos ? std::string() : raw.substr(body + 4);
}

// The test policy: the defaults, a profile that runs only Python, and one the default tenant
// may not use.
constexpr const char* kProfiles = R"(
[profiles.default]
[profiles.pyonly]
languages = ["python"]
[profiles.secret]
[tenants.default]
profiles = ["default", "pyonly"]
)";

class Supervisor {
 public:
  // `tenant`: more keys of [tenants.default].
  explicit Supervisor(const TempDir& dir, const std::string& tenant = "") {
    sock_ = dir.file("airlock.sock");
    dir.write("policy.toml", std::string("schema = 1\n") + kProfiles + tenant +
                                 "[server]\nsocket = \"" + sock_ + "\"\n");
    policy_ = dir.file("policy.toml");
    std::string bin = airlockBinary();
    std::vector<std::string> args = {bin, "serve", "--policy", policy_};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, bin.c_str(), nullptr, nullptr, argv.data(), environ) != 0) pid_ = -1;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (pid_ > 0 && get(sock_, "/healthz").empty() &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ~Supervisor() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  bool up() const { return pid_ > 0 && !get(sock_, "/healthz").empty(); }
  const std::string& sock() const { return sock_; }
  const std::string& policy() const { return policy_; }
  std::string url() const { return "AIRLOCK_URL=unix://" + sock_; }
  // A line of /metrics ("airlock_executions_total{kind=\"run\"} 2"), or "" when absent.
  std::string metric(const std::string& name) const {
    std::string text = get(sock_, "/metrics");
    for (size_t pos = 0, nl; (nl = text.find('\n', pos)) != std::string::npos; pos = nl + 1) {
      std::string line = text.substr(pos, nl - pos);
      if (line.starts_with(name + " ")) return line;
    }
    return {};
  }

 private:
  std::string sock_, policy_;
  pid_t pid_ = -1;
};

class RunRemote : public ::testing::Test {
 protected:
  void SetUp() override {
    AIRLOCK_REQUIRE_ROOT();
    before_ = snapshotHostResources();
    serve_ = std::make_unique<Supervisor>(dir_);
    ASSERT_TRUE(serve_->up()) << "airlock serve did not come up";
  }
  void TearDown() override {
    if (IsSkipped()) return;
    serve_.reset();
    EXPECT_EQ(snapshotHostResources(), before_) << "a run left something on the host";
  }

  ProcResult local(std::vector<std::string> args, const std::string& in = "") const {
    args.insert(args.begin(), {airlockBinary(), "run", "--local"});
    return runCommand(args, in, 120, {serve_->url()});
  }
  ProcResult remote(std::vector<std::string> args, const std::string& in = "") const {
    args.insert(args.begin(), {airlockBinary(), "run"});
    return runCommand(args, in, 120, {serve_->url()});
  }
  std::string runs() const { return serve_->metric("airlock_executions_total{kind=\"run\"}"); }

  // Runs `args` both ways, plain and with --json, and checks that everything but timings and
  // ids matches. `local_args` replaces the local side's arguments when they must differ.
  void expectSame(const std::vector<std::string>& args, const std::string& in = "",
                  std::vector<std::string> local_args = {}) {
    if (local_args.empty()) local_args = args;
    auto l = local(local_args, in), r = remote(args, in);
    EXPECT_EQ(r.exit_code, l.exit_code) << "local stderr: " << l.err << "\nremote: " << r.err;
    EXPECT_EQ(r.out, l.out);
    EXPECT_EQ(r.err, l.err);
    local_args.insert(local_args.begin(), "--json");
    std::vector<std::string> json_args = args;
    json_args.insert(json_args.begin(), "--json");
    auto lj = local(local_args, in), rj = remote(json_args, in);
    EXPECT_EQ(rj.exit_code, lj.exit_code) << rj.err;
    auto a = Json::parse(lj.out, nullptr, false), b = Json::parse(rj.out, nullptr, false);
    ASSERT_FALSE(a.is_discarded()) << lj.out << lj.err;
    ASSERT_FALSE(b.is_discarded()) << rj.out << rj.err;
    for (const char* key :
         {"schema", "status", "exit_code", "signal", "airlock_exit_code", "message", "stdout",
          "stderr", "stdout_truncated", "stderr_truncated", "stdout_bytes", "stderr_bytes",
          "profile", "language", "files_in", "files_out", "review"})
      EXPECT_EQ(b[key], a[key]) << key;
    if (a["status"] != "refused") {
      EXPECT_EQ(b["sandbox_id"].get<std::string>().size(), 16u);
      EXPECT_NE(b["sandbox_id"], a["sandbox_id"]);
    }
    last_local_ = lj;
    last_remote_ = rj;
  }

  TempDir dir_;
  std::unique_ptr<Supervisor> serve_;
  HostResources before_;
  ProcResult last_local_, last_remote_;
};

TEST_F(RunRemote, PrintOne) {
  expectSame({"--lang", "python", "-c", "print(1)"});
  EXPECT_EQ(last_remote_.exit_code, 0);
  EXPECT_EQ(Json::parse(last_remote_.out)["stdout"], "1\n");
  // Positive control: the remote runs reached the supervisor, the local ones did not.
  EXPECT_EQ(runs(), "airlock_executions_total{kind=\"run\"} 2");
  EXPECT_EQ(serve_->metric("airlock_runs_total{status=\"exited\"}"),
            "airlock_runs_total{status=\"exited\"} 2");
}

TEST_F(RunRemote, ExitCodeAndBothStreams) {
  expectSame({"--lang", "shell", "-c", "echo out; echo err >&2; printf '\\377'; exit 3"});
  EXPECT_EQ(last_remote_.exit_code, 3);
}

TEST_F(RunRemote, ScriptFileWithArguments) {
  dir_.write("greet.py", "import sys\nprint('hello', *sys.argv[1:])\nprint(sys.argv[0])\n");
  expectSame({dir_.file("greet.py"), "a", "b c"});
  EXPECT_EQ(Json::parse(last_remote_.out)["stdout"], "hello a b c\n/home/user/greet.py\n");
}

TEST_F(RunRemote, Timeout) {
  expectSame({"--timeout", "1", "--lang", "shell", "-c", "echo started; sleep 30"});
  EXPECT_EQ(last_remote_.exit_code, 124);
  EXPECT_EQ(Json::parse(last_remote_.out)["status"], "timeout");
}

TEST_F(RunRemote, PolicyRefusal) {
  // The same policy both ways: the server's own, and --policy for the local run.
  expectSame(
      {"--profile", "pyonly", "--lang", "shell", "-c", "true"}, "",
      {"--policy", serve_->policy(), "--profile", "pyonly", "--lang", "shell", "-c", "true"});
  EXPECT_EQ(last_remote_.exit_code, 123);
  EXPECT_NE(Json::parse(last_remote_.out)["message"].get<std::string>().find(
                "does not allow language 'shell'"),
            std::string::npos)
      << last_remote_.out;
}

TEST_F(RunRemote, FilesGoInAndComeBack) {
  dir_.write("numbers.txt", "3\n4\n5\n");
  const std::string out = dir_.file("sum.bin");
  std::vector<std::string> args = {
      "--file",
      dir_.file("numbers.txt") + ":in/numbers.txt",
      "--out",
      "out/sum.bin:" + out,
      "--lang",
      "python",
      "-c",
      "import os\nos.makedirs('out', exist_ok=True)\n"
      "n = [int(l) for l in open('in/numbers.txt')]\n"
      "open('out/sum.bin', 'wb').write(str(sum(n)).encode() + bytes([0, 255]))\n"};
  auto l = local(args);
  ASSERT_EQ(l.exit_code, 0) << l.err;
  EXPECT_EQ(dir_.read("sum.bin"), std::string("12\0\xff", 4));
  std::filesystem::remove(out);
  auto r = remote(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(dir_.read("sum.bin"), std::string("12\0\xff", 4));
  expectSame(args);
  auto record = Json::parse(last_remote_.out);
  EXPECT_EQ(record["files_in"][0]["local_path"], dir_.file("numbers.txt"));
  EXPECT_EQ(record["files_out"][0]["local_path"], out);
  EXPECT_EQ(record["files_out"][0]["bytes"], 4);

  // Past what the answer may carry (the server's max_json_body_kb, 8 MiB here): an error for
  // that file, nothing written locally, and the run counts as failed.
  std::filesystem::remove(out);
  auto big = remote({"--json", "--out", "big:" + out, "--lang", "shell", "-c",
                     "head -c 9000000 /dev/zero > big"});
  EXPECT_EQ(big.exit_code, 125) << big.err;
  auto big_record = Json::parse(big.out, nullptr, false);
  ASSERT_FALSE(big_record.is_discarded()) << big.out << big.err;
  EXPECT_EQ(big_record["status"], "exited");
  EXPECT_TRUE(big_record["files_out"][0]["error"].is_string()) << big.out;
  EXPECT_EQ(big_record["files_out"][0]["bytes"], 0);
  EXPECT_FALSE(std::filesystem::exists(out));

  // A file the program did not make: the same error, no local file, exit 125.
  std::filesystem::remove(out);
  expectSame({"--out", "nope.txt:" + out, "--lang", "shell", "-c", "true"});
  EXPECT_EQ(last_remote_.exit_code, 125);
  EXPECT_FALSE(std::filesystem::exists(out));
}

// URL and hostdir: transfers are the supervisor's plugins' either way, so they go through it
// (POST /v1/runs transfers_in/transfers_out); a local archive is this host's file, so a run with
// one happens here.
TEST_F(RunRemote, TransfersGoThroughTheSupervisorUnlessTheyNameLocalArchives) {
  std::filesystem::create_directories(dir_.file("data/set"));
  std::filesystem::create_directories(dir_.file("data/results"));
  dir_.write("data/set/a.csv", "1,2\n");
  serve_.reset();
  serve_ = std::make_unique<Supervisor>(dir_,
                                        "[transfer]\nwritable_roots = [\"data\"]\n"
                                        "[transfer.roots]\ndata = \"" +
                                            dir_.file("data") + "\"\n");
  ASSERT_TRUE(serve_->up()) << "airlock serve did not come up";
  const std::string before = runs();
  auto r = remote({"--json", "--in", "hostdir:data/set:/home/user/set", "--out",
                   "/home/user/set:hostdir:data/results/set.tar.gz", "--lang", "shell", "-c",
                   "cat set/a.csv; echo 3 > set/b.csv"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(runs(), before) << "the run did not go through the supervisor";
  auto record = Json::parse(r.out, nullptr, false);
  ASSERT_FALSE(record.is_discarded()) << r.out;
  EXPECT_EQ(record["stdout"], "1,2\n");
  ASSERT_EQ(record["transfers"].size(), 2u) << r.out;
  EXPECT_EQ(record["transfers"][0]["plugin"], "hostdir");
  EXPECT_EQ(record["transfers"][0]["status"], "ok");
  EXPECT_EQ(record["transfers"][1]["direction"], "out");
  EXPECT_EQ(record["transfers"][1]["status"], "ok") << r.out;
  EXPECT_EQ(record["files_out"].size(), 0u);
  auto listed = runCommand({"/usr/bin/tar", "-tzf", dir_.file("data/results/set.tar.gz")});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find("b.csv"), std::string::npos) << listed.out;

  // A refused transfer in is refused there too, before the program runs.
  auto bad = remote(
      {"--json", "--in", "hostdir:data/../x:/home/user/x", "--lang", "shell", "-c", "echo ran"});
  EXPECT_EQ(bad.exit_code, 123) << bad.err << bad.out;
  EXPECT_EQ(Json::parse(bad.out, nullptr, false)["stdout"], "") << bad.out;

  // A local archive: run here, so the supervisor's run count stays.
  auto tar = runCommand(
      {"/usr/bin/tar", "-czf", dir_.file("local.tar.gz"), "-C", dir_.file("data/set"), "."});
  ASSERT_EQ(tar.exit_code, 0) << tar.err;
  const std::string after = runs();
  auto l = remote({"--in", dir_.file("local.tar.gz") + ":/home/user/l", "--lang", "shell", "-c",
                   "cat l/a.csv"});
  EXPECT_EQ(l.exit_code, 0) << l.err;
  EXPECT_EQ(l.out, "1,2\n");
  EXPECT_EQ(runs(), after) << "a local archive went to the supervisor";
}

TEST_F(RunRemote, StdinIsPassedThrough) {
  expectSame({"--lang", "python", "-c", "import sys; print(sys.stdin.read().upper())"}, "shout\n");
  EXPECT_EQ(Json::parse(last_remote_.out)["stdout"], "SHOUT\n\n");
  expectSame({"--no-stdin", "--lang", "shell", "-c", "wc -c"}, "ignored");
  EXPECT_EQ(Json::parse(last_remote_.out)["stdout"], "0\n");
}

// `airlock run ARGS...` through the supervisor with its stdout on a pipe, for tests that watch
// a run while it goes on.
struct LiveRun {
  pid_t pid = -1;
  int out = -1;
  std::string got;

  LiveRun(const std::string& url, std::vector<std::string> args) {
    std::string bin = airlockBinary();
    args.insert(args.begin(), {bin, "run"});
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (char** e = environ; *e != nullptr; ++e) envp.push_back(*e);
    std::string url_env = url;
    envp.push_back(url_env.data());
    envp.push_back(nullptr);
    int fds[2];
    if (pipe(fds) != 0) return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv.data(), envp.data()) != 0) pid = -1;
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    out = fds[0];
  }
  ~LiveRun() {
    if (out >= 0) close(out);
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  // Reads stdout until `text` has come (true) or 30 s have passed.
  bool waitFor(const std::string& text) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (got.find(text) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      pollfd p{out, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char buf[256];
      ssize_t n = read(out, buf, sizeof buf);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    return got.find(text) != std::string::npos;
  }
  // The exit status once it has ended, after reading the rest of its stdout.
  int finish() {
    char buf[256];
    for (ssize_t n; (n = read(out, buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
    int st = 0;
    waitpid(pid, &st, 0);
    pid = -1;
    return st;
  }
};

// Output reaches the terminal while the program runs, not when it ends.
TEST_F(RunRemote, OutputIsLive) {
  LiveRun run(serve_->url(), {"--lang", "python", "-c",
                              "import time\nprint('first', flush=True)\ntime.sleep(4)\n"
                              "print('second')"});
  ASSERT_GT(run.pid, 0);
  ASSERT_TRUE(run.waitFor("first\n")) << run.got;
  EXPECT_EQ(run.got, "first\n") << "the first line came only with the rest";
  EXPECT_EQ(waitpid(run.pid, nullptr, WNOHANG), 0) << "the run had already ended";
  int st = run.finish();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  EXPECT_EQ(run.got, "first\nsecond\n");
  EXPECT_EQ(runs(), "airlock_executions_total{kind=\"run\"} 1");
}

// A client that goes away (Ctrl-C) stops its run: the sandbox is removed at once, not at the
// end of the program's 30 s.
TEST_F(RunRemote, AClientThatLeavesStopsItsRun) {
  LiveRun run(serve_->url(), {"--lang", "shell", "-c", "echo started; sleep 60"});
  ASSERT_GT(run.pid, 0);
  ASSERT_TRUE(run.waitFor("started\n")) << run.got;
  EXPECT_EQ(serve_->metric("airlock_sandboxes{state=\"running\"}"),
            "airlock_sandboxes{state=\"running\"} 1")
      << "positive control: the run's sandbox is counted";
  auto stopped = std::chrono::steady_clock::now();
  kill(run.pid, SIGINT);
  int st = run.finish();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 130) << st;
  std::string running;
  for (int i = 0; i < 100; ++i) {
    running = serve_->metric("airlock_sandboxes{state=\"running\"}");
    if (running.ends_with(" 0")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(running, "airlock_sandboxes{state=\"running\"} 0");
  EXPECT_LT(std::chrono::steady_clock::now() - stopped, std::chrono::seconds(10));
  EXPECT_EQ(snapshotHostResources(), before_) << "the stopped run's sandbox is still there";
}

TEST_F(RunRemote, LocalNeverTouchesTheSupervisor) {
  EXPECT_EQ(runs(), "airlock_executions_total{kind=\"run\"} 0");
  auto l = local({"--lang", "shell", "-c", "echo here"});
  ASSERT_EQ(l.exit_code, 0) << l.err;
  EXPECT_EQ(l.out, "here\n");
  dir_.write("other.toml", "schema = 1\n");
  auto p = runCommand({airlockBinary(), "run", "--policy", dir_.file("other.toml"), "--lang",
                       "shell", "-c", "echo here"},
                      "", 120, {serve_->url()});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(runs(), "airlock_executions_total{kind=\"run\"} 0")
      << "--local or --policy ran remotely";
  // Positive control: the same run without --local is the supervisor's.
  auto r = remote({"--lang", "shell", "-c", "echo here"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "here\n");
  EXPECT_EQ(runs(), "airlock_executions_total{kind=\"run\"} 1");
}

TEST_F(RunRemote, ARefusingSupervisorIsAnErrorNotALocalRun) {
  // 403: the tenant may not use the profile.
  auto forbidden = remote({"--profile", "secret", "--lang", "shell", "-c", "echo ran"});
  EXPECT_EQ(forbidden.exit_code, 125);
  EXPECT_EQ(forbidden.out, "");
  EXPECT_NE(forbidden.err.find("tenant 'default' may not use profile 'secret'"), std::string::npos)
      << forbidden.err;
  EXPECT_NE(forbidden.err.find("403"), std::string::npos) << forbidden.err;
  // 400: a limit over the profile's.
  auto over = remote({"--json", "--timeout", "100000", "--lang", "shell", "-c", "echo ran"});
  EXPECT_EQ(over.exit_code, 125);
  auto j = Json::parse(over.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << over.out;
  EXPECT_EQ(j["status"], "error");
  EXPECT_EQ(j["airlock_exit_code"], 125);
  EXPECT_NE(j["message"].get<std::string>().find("field 'timeout_s'"), std::string::npos)
      << j["message"];
  // 413: a request over the server's JSON body limit (8 MiB), with what to do about it.
  dir_.write("big.bin", std::string(9 << 20, 'x'));
  auto large = remote({"--file", dir_.file("big.bin"), "--lang", "shell", "-c", "echo ran"});
  EXPECT_EQ(large.exit_code, 125);
  EXPECT_EQ(large.out, "");
  EXPECT_NE(large.err.find("413"), std::string::npos) << large.err;
  EXPECT_NE(large.err.find("--local"), std::string::npos) << large.err;
  EXPECT_EQ(runs(), "airlock_executions_total{kind=\"run\"} 0");
  EXPECT_EQ(serve_->metric("airlock_rejections_total{reason=\"profile_forbidden\"}"),
            "airlock_rejections_total{reason=\"profile_forbidden\"} 1");
}

// A run holds its tenant's quota like a sandbox while it runs: a second run and a sandbox
// create are refused (429) until it ends.
TEST_F(RunRemote, ARunCountsAgainstTheTenantsQuota) {
  TempDir dir;
  Supervisor one(dir, "max_sandboxes = 1\n");
  ASSERT_TRUE(one.up());
  LiveRun run(one.url(), {"--lang", "shell", "-c", "echo started; sleep 3"});
  ASSERT_TRUE(run.waitFor("started\n")) << run.got;
  auto second = runCommand({airlockBinary(), "run", "--lang", "shell", "-c", "echo ran"}, "", 60,
                           {one.url()});
  EXPECT_EQ(second.exit_code, 125);
  EXPECT_EQ(second.out, "");
  EXPECT_NE(second.err.find("tenant 'default' has its maximum of 1 sandboxes (HTTP 429"),
            std::string::npos)
      << second.err;
  auto create = runCommand({airlockBinary(), "sandbox", "create"}, "", 60, {one.url()});
  EXPECT_EQ(create.exit_code, 125);
  EXPECT_NE(create.err.find("maximum of 1 sandboxes"), std::string::npos) << create.err;
  int st = run.finish();
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  // The room is back as soon as the run has answered.
  auto third = runCommand({airlockBinary(), "run", "--lang", "shell", "-c", "echo ran"}, "", 60,
                          {one.url()});
  EXPECT_EQ(third.exit_code, 0) << third.err;
  EXPECT_EQ(third.out, "ran\n");
  EXPECT_EQ(one.metric("airlock_rejections_total{reason=\"tenant_sandboxes\"}"),
            "airlock_rejections_total{reason=\"tenant_sandboxes\"} 2");
}

// The caller's tenant (here from its bearer token) is the tenant of the run's audit records.
TEST_F(RunRemote, TheRunsAuditRecordsNameTheTenant) {
  TempDir dir;
  const std::string log = dir.file("audit.log");
  // sha256("ci-token-1")
  Supervisor ci(dir,
                "[tenants.ci]\ntoken_sha256 = "
                "\"e3d5fb0f34f799f6befeb47d5fc507eb3952e3fe8c4674d99f7b7abc7b1f63d6\"\n"
                "[audit]\nlog = \"" +
                    log + "\"\n");
  ASSERT_TRUE(ci.up());
  auto r = runCommand({airlockBinary(), "run", "--json", "--lang", "shell", "-c", "echo hi"}, "",
                      60, {ci.url(), "AIRLOCK_TOKEN=ci-token-1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string execution = Json::parse(r.out)["audit"]["execution"];
  int records = 0;
  std::string text = readFile(log);
  for (size_t pos = 0, nl; (nl = text.find('\n', pos)) != std::string::npos; pos = nl + 1) {
    auto rec = Json::parse(text.substr(pos, nl - pos), nullptr, false);
    if (rec.is_discarded() || rec.value("execution", Json()) != execution) continue;
    ++records;
    EXPECT_EQ(rec["tenant"], "ci") << rec.dump();
  }
  EXPECT_GT(records, 0) << "positive control: the run's records are in " << log << ":\n" << text;
}

TEST_F(RunRemote, NoReachableSupervisorRunsInThisProcess) {
  auto r = runCommand({airlockBinary(), "run", "--lang", "python", "-c", "print(1)"}, "", 120,
                      {"AIRLOCK_URL=unix://" + dir_.file("nobody.sock")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "1\n");
  EXPECT_EQ(r.err, "");
  auto bad = runCommand({airlockBinary(), "run", "--lang", "python", "-c", "print(1)"}, "", 120,
                        {"AIRLOCK_URL=ftp://x"});
  EXPECT_EQ(bad.exit_code, 125);
  EXPECT_NE(bad.err.find("AIRLOCK_URL 'ftp://x'"), std::string::npos) << bad.err;
  EXPECT_EQ(runs(), "airlock_executions_total{kind=\"run\"} 0");
}

}  // namespace
}  // namespace airlock::testing
