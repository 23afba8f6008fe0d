// The eBPF audit wired into real sandboxes: `airlock run --json` and the service (in-process, as
// `airlock serve` drives it) attach each sandbox's cgroup before PID 1 starts, put the execution's
// audit summary into its result, write the [audit] log (events, executions, review verdicts),
// change network rules at runtime and fail executions closed when events are dropped.
//
// Connections go only to loopback inside the sandbox's own network namespace, or to
// 10.255.255.1, which the kernel refuses (EPERM) before any packet exists: mode "none" has no
// route out of the sandbox either way.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>

#include <fstream>
#include <sstream>
#include <thread>

#include "supervisor/audit/engine.h"
#include "supervisor/sandbox/host/sandbox.h"
#include "supervisor/sandbox/manager.h"
#include "test_support.h"

namespace airlock::sandbox {
namespace {

using airlock::testing::snapshotHostResources;
using airlock::testing::TempDir;

// Skips (or fails, when privileged tests must run) unless the host can load the audit engine.
#define AIRLOCK_REQUIRE_AUDIT_ENGINE()                                                           \
  do {                                                                                           \
    AIRLOCK_REQUIRE_ROOT();                                                                      \
    static const std::string why = [] {                                                          \
      auto e = audit::AuditEngine::load();                                                       \
      return e ? std::string() : e.error().message();                                            \
    }();                                                                                         \
    if (!why.empty()) {                                                                          \
      if (airlock::testing::privilegeRequired()) FAIL() << "audit engine: " << why;              \
      GTEST_SKIP() << "the eBPF audit engine cannot load here (needs BTF and CAP_BPF): " << why; \
    }                                                                                            \
  } while (0)

std::vector<Json> drain(EventStream& s, int timeout_s = 60) {
  std::vector<Json> events;
  auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  while (!s.done() && Clock::now() < deadline) {
    if (auto e = s.next(deadline)) events.push_back(std::move(*e));
  }
  return events;
}

const Json* last(const std::vector<Json>& events, const std::string& type) {
  for (auto it = events.rbegin(); it != events.rend(); ++it)
    if ((*it)["type"] == type) return &*it;
  return nullptr;
}

std::vector<Json> readLog(const std::string& path) {
  std::vector<Json> records;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    auto j = Json::parse(line, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "not JSON: " << line;
    records.push_back(std::move(j));
  }
  return records;
}

std::vector<std::string> paths(const Json& audit) {
  std::vector<std::string> out;
  for (const auto& p : audit["processes"]) out.push_back(p["path"].get<std::string>());
  return out;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(AuditRun, JsonShowsTheProgramAndItsChildren) {
  AIRLOCK_REQUIRE_AUDIT_ENGINE();
  TempDir dir;
  dir.write("policy.toml", "schema = 1\n[audit]\nlog = \"" + dir.file("audit.jsonl") +
                               "\"\n[profiles.default.audit]\nexec = true\n");
  auto before = snapshotHostResources();
  auto r = airlock::testing::runAirlock(
      {"run", "--policy", dir.file("policy.toml"), "--lang", "python", "--json", "-c",
       "import subprocess\nsubprocess.run(['ls', '/'], capture_output=True)\nprint('ok')"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  auto doc = Json::parse(r.out);
  const Json& audit = doc["audit"];
  ASSERT_TRUE(audit.is_object()) << doc.dump(2);
  auto started = paths(audit);
  EXPECT_TRUE(contains(started, "/usr/bin/python3")) << audit.dump(2);
  EXPECT_TRUE(contains(started, "/usr/bin/ls")) << audit.dump(2);
  EXPECT_EQ(audit["processes_started"], 2) << audit.dump(2);
  EXPECT_EQ(audit["events_dropped"], 0);
  EXPECT_EQ(audit["execution"], doc["sandbox_id"]);
  // The attach is one step of create, measured.
  bool attached = false;
  for (const auto& [step, ms] : doc["timing_ms"]["create_steps"].items()) {
    if (step == "audit_attach") {
      attached = true;
      RecordProperty("audit_attach_ms", std::to_string(ms.get<double>()));
    }
  }
  EXPECT_TRUE(attached) << doc["timing_ms"].dump();
  auto records = readLog(dir.file("audit.jsonl"));
  ASSERT_GE(records.size(), 4u);
  // The sandbox's life frames its records: created first, destroyed last (the run is done).
  EXPECT_EQ(records.front()["type"], "sandbox") << records.front().dump();
  EXPECT_EQ(records.front()["event"], "create");
  EXPECT_EQ(records.back()["type"], "sandbox") << records.back().dump();
  EXPECT_EQ(records.back()["event"], "destroy");
  EXPECT_EQ(records.back()["reason"], "done");
  auto first_exec = std::find_if(records.begin(), records.end(),
                                 [](const nlohmann::json& r) { return r["type"] == "exec"; });
  ASSERT_NE(first_exec, records.end());
  const nlohmann::json& exec = *first_exec;
  if (airlock::testing::underGvisor() || airlock::testing::underMicrovm()) {
    // runsc starts PID 1 (the agent) itself, with no exec to report, and a microVM's init
    // execs it before anything is reported: the first exec is the program's, inside the
    // execution (numbered by the sandbox's own kernel).
    EXPECT_EQ(exec["path"], "/usr/bin/python3") << exec.dump();
    EXPECT_EQ(exec["execution"], doc["sandbox_id"]);
    EXPECT_EQ(exec["pid"], 0) << "not a host process";
  } else {
    // PID 1 (the agent) is audited from its first exec, before the execution began.
    EXPECT_EQ(exec["ns_pid"], 1);
    EXPECT_TRUE(exec["execution"].is_null());
  }
  // One eBPF summary (`summary`) and one outcome record (`kind`: what ran, its sha256).
  int summaries = 0, outcomes = 0;
  for (const auto& r : records) {
    if (r["type"] != "execution") continue;
    EXPECT_EQ(r["sandbox"], doc["sandbox_id"]);
    summaries += r.contains("summary");
    outcomes += r.contains("kind");
  }
  EXPECT_EQ(summaries, 1);
  EXPECT_EQ(outcomes, 1);
  EXPECT_EQ(snapshotHostResources(), before);
}

TEST(AuditRun, ARunReadsItsRingWhileTheProgramRuns) {
  AIRLOCK_REQUIRE_AUDIT_ENGINE();
  // `airlock run` has no reader thread: it reads the ring while it waits for the agent. 200
  // execs of ~600-byte records cannot wait in a 16 KiB ring until the end (it holds 27), so
  // nothing dropped means they were read as they came (the engine-level test,
  // Audit.WithoutAReaderThreadTheCallerPumpsTheRing, shows the same ring overflowing unread).
  TempDir dir;
  dir.write("policy.toml",
            "schema = 1\n[audit]\nrun_ring_kb = 16\n[profiles.default.audit]\nexec = true\n");
  auto r = airlock::testing::runAirlock({"run", "--policy", dir.file("policy.toml"), "--lang",
                                         "shell", "--json", "-c",
                                         "for i in $(seq 200); do /usr/bin/true; done; echo done"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  auto doc = Json::parse(r.out);
  EXPECT_EQ(doc["stdout"], "done\n");
  const Json& audit = doc["audit"];
  ASSERT_TRUE(audit.is_object()) << doc.dump(2);
  EXPECT_EQ(audit["events_dropped"], 0) << audit.dump(2);
  // bash, seq and the 200 trues.
  EXPECT_EQ(audit["processes_started"], 202) << audit.dump(2);
}

TEST(AuditRun, ProfileThatAuditsNothingHasNoSummary) {
  AIRLOCK_REQUIRE_ROOT();
  TempDir dir;
  dir.write("policy.toml", "schema = 1\n[profiles.default.audit]\nexec = false\nnetwork = false\n");
  auto r = airlock::testing::runAirlock(
      {"run", "--policy", dir.file("policy.toml"), "--lang", "python", "--json", "-c", "print(1)"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  auto doc = Json::parse(r.out);
  EXPECT_TRUE(doc["audit"].is_null()) << doc["audit"].dump();
  for (const auto& [step, ms] : doc["timing_ms"]["create_steps"].items())
    EXPECT_NE(step, "audit_attach");
}

// Without the engine, a profile that audits refuses to create sandboxes rather than run blind.
TEST(AuditSandbox, FailsClosedWhenTheEngineIsMissing) {
  AIRLOCK_REQUIRE_ROOT();
  TempDir state;
  ASSERT_EQ(::chmod(state.path().c_str(), 0755), 0);  // the sandbox's uid reaches its scratch dir
  auto registry = plugin::Registry::loadDirectory(airlock::testing::pluginDir());
  policy::Profile profile;
  profile.name = "default";
  auto ctx = std::make_shared<sandbox::AuditContext>();
  ctx->load_error = "no BTF (test)";
  sandbox::SandboxOptions o;
  o.profile = &profile;
  o.agent_path = airlock::testing::agentBinary();
  o.state_dir = state.path();
  o.audit = ctx;
  auto before = snapshotHostResources();
  auto sb = sandbox::Sandbox::create(registry, o);
  ASSERT_FALSE(sb);
  EXPECT_NE(sb.error().message().find("eBPF audit engine is not available (no BTF (test))"),
            std::string::npos)
      << sb.error().message();
  EXPECT_EQ(snapshotHostResources(), before);

  // The profile may opt out; then the sandbox runs, unaudited.
  profile.audit = {false, false, false, false};
  auto unaudited = sandbox::Sandbox::create(registry, o);
  ASSERT_TRUE(unaudited) << unaudited.error().message();
  EXPECT_EQ((*unaudited)->audit(), nullptr);
  EXPECT_TRUE((*unaudited)->destroy());
}

class AuditService : public ::testing::Test {
 protected:
  void SetUp() override {
    AIRLOCK_REQUIRE_AUDIT_ENGINE();
    before_ = snapshotHostResources();
  }
  void TearDown() override {
    if (svc_ == nullptr) return;
    svc_.reset();
    EXPECT_EQ(snapshotHostResources(), before_) << "the service left host resources behind";
  }
  // A policy whose [audit] log is in the test's directory, with more [audit] keys and then
  // `extra` appended.
  void start(const std::string& extra = "", const std::string& audit_keys = "") {
    const std::string text =
        "schema = 1\n[audit]\nlog = \"" + log() + "\"\n" + audit_keys + "\n" + extra;
    auto pol = policy::parse(airlock::testing::withTestIsolation(text), "test.toml");
    ASSERT_TRUE(pol) << pol.error().message();
    ManagerOptions o;
    o.policy = std::move(*pol);
    o.plugin_dir = airlock::testing::pluginDir();
    o.agent_path = airlock::testing::agentBinary();
    o.workspace_dir = dir_.path() + "/workspaces";
    auto s = Manager::start(std::move(o));
    ASSERT_TRUE(s) << s.error().message();
    svc_ = std::move(*s);
  }
  std::string create() {
    auto r = svc_->createSandbox({}, {});
    EXPECT_TRUE(r) << r.error().message;
    return r ? r->id : "";
  }
  std::vector<Json> run(const std::string& sb, const std::string& cmd) {
    CommandSpec c;
    c.cmd = cmd;
    auto s = svc_->runCommand({}, sb, c);
    EXPECT_TRUE(s) << s.error().message;
    return s ? drain(**s) : std::vector<Json>{};
  }
  std::string log() const { return dir_.file("audit.jsonl"); }

  TempDir dir_;
  airlock::testing::HostResources before_;
  std::unique_ptr<Manager> svc_;
};

// What the program of kConnectRefused prints when mode "none" refuses it: the eBPF hook's EPERM;
// under gVisor, whose connections no hook sees, its netstack's answer (loopback alone: no route).
std::string refusedInModeNone() {
  return airlock::testing::underGvisor() ? "EHOSTUNREACH\n" : "EPERM\n";
}

constexpr const char* kConnectRefused =
    "python3 -c \"import socket,errno\n"
    "s = socket.socket()\n"
    "try:\n"
    "    s.connect(('10.255.255.1', 80))\n"
    "except OSError as e:\n"
    "    print(errno.errorcode[e.errno])\"";

TEST_F(AuditService, RefusedConnectionNamesItsRuleInTheResultAndTheLog) {
  start();
  auto sb = create();
  auto events = run(sb, kConnectRefused);
  const Json* exit = last(events, "exit");
  ASSERT_NE(exit, nullptr);
  EXPECT_EQ((*exit)["exit_code"], 0);
  const Json& audit = (*exit)["audit"];
  ASSERT_TRUE(audit.is_object()) << exit->dump(2);
  EXPECT_EQ(audit["connections_denied"], 1) << audit.dump(2);
  EXPECT_EQ(audit["connections"][0]["address"], "10.255.255.1");
  EXPECT_EQ(audit["connections"][0]["rule"], "protected:10.0.0.0/8");
  const std::string denial = audit["first_denial"];
  EXPECT_NE(denial.find("10.255.255.1:80"), std::string::npos) << denial;
  EXPECT_NE(denial.find("10.0.0.0/8"), std::string::npos) << denial;
  // The program was refused at once, not after a timeout.
  std::string out;
  for (const auto& e : events)
    if (e["type"] == "stdout") out += e["data"].get<std::string>();
  EXPECT_EQ(out, refusedInModeNone());

  const std::string execution = audit["execution"];
  int connects = 0, executions = 0;
  for (const auto& r : readLog(log())) {
    EXPECT_EQ(r["schema"], 1);
    EXPECT_EQ(r["sandbox"], sb) << r.dump();
    EXPECT_EQ(r["tenant"], "default") << r.dump();
    if (r["type"] == "net" && r["execution"] == execution) {
      ++connects;
      EXPECT_EQ(r["hook"], "connect4");
      EXPECT_EQ(r["verdict"], "deny");
      EXPECT_EQ(r["address"], "10.255.255.1");
      EXPECT_EQ(r["rule"], "protected:10.0.0.0/8");
    }
    // The eBPF summary; the outcome record (with `kind`) is the execution's other record.
    if (r["type"] == "execution" && r["execution"] == execution && r.contains("summary"))
      ++executions;
  }
  EXPECT_EQ(connects, 1);
  EXPECT_EQ(executions, 1);
}

TEST_F(AuditService, LoopbackInsideTheSandboxIsAllowed) {
  start();
  auto sb = create();
  auto events = run(sb,
                    "python3 -c \"import socket\n"
                    "srv = socket.socket()\n"
                    "srv.bind(('127.0.0.1', 0))\n"
                    "srv.listen()\n"
                    "c = socket.create_connection(srv.getsockname())\n"
                    "a, _ = srv.accept()\n"
                    "c.sendall(b'x' * 1000)\n"
                    "print(len(a.recv(2000)))\"");
  const Json* exit = last(events, "exit");
  ASSERT_NE(exit, nullptr);
  EXPECT_EQ((*exit)["exit_code"], 0) << exit->dump(2);
  const Json& audit = (*exit)["audit"];
  EXPECT_EQ(audit["connections_allowed"], 1) << audit.dump(2);
  EXPECT_EQ(audit["connections_denied"], 0) << audit.dump(2);
  EXPECT_EQ(audit["connections"][0]["rule"], "loopback") << audit.dump(2);
  if (airlock::testing::underGvisor())
    // gVisor's loopback lives in the sentry: no host counter sees it (docs/audit.md).
    EXPECT_EQ(audit["bytes_sent"], 0) << audit.dump(2);
  else
    EXPECT_GE(audit["bytes_sent"].get<uint64_t>(), 1000u) << audit.dump(2);
  EXPECT_FALSE(audit.contains("first_denial") && !audit["first_denial"].is_null() &&
               !audit["first_denial"].get<std::string>().empty());
}

TEST_F(AuditService, CodeRunsCarryTheAuditToo) {
  start();
  auto sb = create();
  CodeSpec c;
  c.language = "python";
  c.code = "import subprocess\nsubprocess.run(['true'])\n1 + 1";
  auto s = svc_->runCode({}, sb, c);
  ASSERT_TRUE(s) << s.error().message;
  auto events = drain(**s);
  const Json* end = last(events, "end");
  ASSERT_NE(end, nullptr);
  EXPECT_EQ((*end)["status"], "ok");
  EXPECT_TRUE(contains(paths((*end)["audit"]), "/usr/bin/true")) << end->dump(2);
}

TEST_F(AuditService, ReviewVerdictsGoToTheLogDeniedOnesToo) {
  start(R"(
[profiles.default.review]
chain = ["patterns"]
[[profiles.default.review.patterns.rules]]
id = "no-curl"
pattern = 'curl'
action = "deny"
reason = "no downloads"
)");
  auto sb = create();
  CommandSpec denied;
  denied.cmd = "curl http://example.com";
  auto r = svc_->runCommand({}, sb, denied);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kDeniedByReview);
  auto allowed = run(sb, "echo fine");
  ASSERT_NE(last(allowed, "exit"), nullptr);
  const std::string allowed_execution = (*last(allowed, "exit"))["audit"]["execution"];

  std::vector<Json> reviews;
  for (const auto& rec : readLog(log()))
    if (rec["type"] == "review") reviews.push_back(rec);
  ASSERT_EQ(reviews.size(), 2u);
  EXPECT_EQ(reviews[0]["verdict"], "deny");
  EXPECT_EQ(reviews[0]["reviewer"], "patterns");
  EXPECT_EQ(reviews[0]["rule"], "no-curl");
  EXPECT_EQ(reviews[0]["reason"], "no downloads");
  EXPECT_EQ(reviews[0]["kind"], "command");
  EXPECT_EQ(reviews[0]["sandbox"], sb);
  EXPECT_TRUE(reviews[0]["execution"].is_string());
  EXPECT_TRUE(reviews[0].contains("duration_ms"));
  EXPECT_TRUE(reviews[0].contains("cached"));
  EXPECT_EQ(reviews[1]["verdict"], "allow");
  EXPECT_EQ(reviews[1]["execution"], allowed_execution);
}

TEST_F(AuditService, NetworkRulesChangeAtRuntime) {
  start();
  auto sb = create();
  auto shown = svc_->getNetwork({}, sb);
  ASSERT_TRUE(shown) << shown.error().message;
  EXPECT_EQ(*shown, (Json{{"mode", "none"}, {"rules", Json::array()}, {"link", nullptr}}));

  auto bad = svc_->setNetwork({}, sb, {"deny tcp 192.0.2.0/24 443", "allow tcp 10.0.0.1/8 80"});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kBadRequest);
  EXPECT_EQ(httpStatus(bad.error().code), 400);
  EXPECT_TRUE(bad.error().message.starts_with("rules[1]: network rule 'allow tcp 10.0.0.1/8 80'"))
      << bad.error().message;
  EXPECT_EQ(*svc_->getNetwork({}, sb), *shown) << "a refused update changes nothing";

  auto set = svc_->setNetwork({}, sb, {"allow tcp 10.255.255.1 80"});
  ASSERT_TRUE(set) << set.error().message;
  EXPECT_EQ((*set)["rules"], Json::array({"allow tcp 10.255.255.1/32 80"}));
  // Allowed by rule 0 now: the kernel lets the connect through, and mode "none" has no route.
  auto events = run(sb, kConnectRefused);
  const Json& audit = (*last(events, "exit"))["audit"];
  EXPECT_EQ(audit["connections_allowed"], 1) << audit.dump(2);
  EXPECT_EQ(audit["connections"][0]["rule"], "rule:0") << audit.dump(2);
  std::string out;
  for (const auto& e : events)
    if (e["type"] == "stdout") out += e["data"].get<std::string>();
  EXPECT_EQ(out, airlock::testing::underGvisor() ? "EHOSTUNREACH\n" : "ENETUNREACH\n");
}

TEST_F(AuditService, NoEnforcementIsAConflict) {
  start("[profiles.default.audit]\nexec = false\nnetwork = false\n");
  auto sb = create();
  auto r = svc_->setNetwork({}, sb, {});
  ASSERT_FALSE(r);
  EXPECT_EQ(httpStatus(r.error().code), 409) << r.error().message;
}

TEST_F(AuditService, DropsUnderFailClosedFailTheExecution) {
  // One page of ring buffer and a flood of refused datagrams (each refusal is an event).
  start("[profiles.default.audit]\nfail_closed = true\n", "ring_kb = 4\n");
  auto sb = create();
  auto events = run(sb,
                    "python3 -c \"import socket\n"
                    "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                    "for i in range(20000):\n"
                    "    try: s.sendto(b'x', ('10.255.255.1', 9))\n"
                    "    except OSError: pass\"");
  const Json* exit = last(events, "exit");
  ASSERT_NE(exit, nullptr);
  const Json& audit = (*exit)["audit"];
  EXPECT_GT(audit["events_dropped"].get<uint64_t>(), 0u) << audit.dump(2);
  EXPECT_EQ(audit["connections_denied"].get<uint64_t>() + audit["events_dropped"].get<uint64_t>(),
            20000u)
      << "every refusal is either recorded or counted as dropped";
  EXPECT_EQ(audit["failed"], true);
  EXPECT_EQ(audit["fail_closed"], true);
  ASSERT_TRUE(exit->contains("error")) << exit->dump(2);
  EXPECT_NE((*exit)["error"].get<std::string>().find("audit.fail_closed"), std::string::npos);

  // Code runs fail the way code fails: an error event, then "end" with status error.
  CodeSpec c;
  c.language = "python";
  c.code =
      "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
      "for i in range(20000):\n"
      "    try: s.sendto(b'x', ('10.255.255.1', 9))\n"
      "    except OSError: pass\n";
  auto code = svc_->runCode({}, sb, c);
  ASSERT_TRUE(code) << code.error().message;
  auto code_events = drain(**code);
  const Json* error = last(code_events, "error");
  ASSERT_NE(error, nullptr);
  EXPECT_EQ((*error)["name"], "AuditIncomplete");
  EXPECT_EQ((*last(code_events, "end"))["status"], "error");
}

// ---- over HTTP: `airlock serve` as an operator runs it, and `airlock audit` on its log ----

struct Response {
  int status = 0;
  Json body;
};

// One request per connection; the JSON answers used here come with a Content-Length.
Response http(const std::string& sock, const std::string& method, const std::string& path,
              const std::string& body = "") {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock.c_str());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return {};
  }
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: airlock\r\nConnection: close\r\n";
  if (method == "POST" || method == "PUT")
    req +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  (void)!::write(fd, req.data(), req.size());
  std::string raw;
  char buf[65536];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) raw.append(buf, static_cast<size_t>(n));
  ::close(fd);
  Response r;
  if (raw.size() < 12) return r;
  r.status = std::stoi(raw.substr(9, 3));
  const size_t body_at = raw.find("\r\n\r\n");
  if (body_at != std::string::npos && body_at + 4 < raw.size())
    r.body = Json::parse(raw.substr(body_at + 4), nullptr, false);
  return r;
}

class AuditServe : public ::testing::Test {
 protected:
  void SetUp() override {
    AIRLOCK_REQUIRE_AUDIT_ENGINE();
    before_ = snapshotHostResources();
    sock_ = dir_.file("airlock.sock");
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);  // sandboxes reach their scratch dir
    dir_.write("policy.toml", "schema = 1\n[server]\nsocket = \"" + sock_ +
                                  "\"\n[audit]\nlog = \"" + dir_.file("audit.jsonl") +
                                  "\"\n[profiles.default]\n[profiles.quiet.audit]\nexec = "
                                  "false\nnetwork = false\n");
    std::string bin = airlock::testing::airlockBinary();
    std::vector<std::string> args = {
        bin, "serve", "--policy", dir_.file("policy.toml"), "--state-dir", dir_.file("state")};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ASSERT_EQ(posix_spawn(&pid_, bin.c_str(), nullptr, nullptr, argv.data(), environ), 0);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (http(sock_, "GET", "/healthz").status != 200) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "airlock serve did not come up";
      int st;
      ASSERT_EQ(waitpid(pid_, &st, WNOHANG), 0) << "airlock serve exited early";
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  void TearDown() override {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);  // drains and destroys its sandboxes
    int st = 0;
    ::waitpid(pid_, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st;
    EXPECT_EQ(snapshotHostResources(), before_) << "airlock serve left host resources behind";
  }
  std::string create(const std::string& profile) {
    auto r = http(sock_, "POST", "/v1/sandboxes", Json{{"profile", profile}}.dump());
    EXPECT_EQ(r.status, 201) << r.body.dump();
    return r.body.value("id", "");
  }

  TempDir dir_;
  airlock::testing::HostResources before_;
  std::string sock_;
  pid_t pid_ = -1;
};

TEST_F(AuditServe, NetworkRoutesAnswer400409AndTheLogIsQueried) {
  const std::string sb = create("default");
  ASSERT_FALSE(sb.empty());
  const std::string net = "/v1/sandboxes/" + sb + "/network";
  auto shown = http(sock_, "GET", net);
  EXPECT_EQ(shown.status, 200);
  EXPECT_EQ(shown.body, (Json{{"mode", "none"}, {"rules", Json::array()}, {"link", nullptr}}));

  auto bad =
      http(sock_, "PUT", net, R"({"rules": ["deny udp ::/0 53", "allow tcp 10.0.0.1/8 80"]})");
  EXPECT_EQ(bad.status, 400) << bad.body.dump();
  const std::string message = bad.body["error"]["message"];
  EXPECT_TRUE(message.starts_with("rules[1]: network rule 'allow tcp 10.0.0.1/8 80'")) << message;
  EXPECT_EQ(http(sock_, "PUT", net, R"({"rules": "allow any 0.0.0.0/0"})").status, 400);
  EXPECT_EQ(http(sock_, "PUT", net, "{}").status, 400);
  auto good = http(sock_, "PUT", net, R"({"rules": ["deny tcp 192.0.2.0/24 443"]})");
  EXPECT_EQ(good.status, 200) << good.body.dump();
  EXPECT_EQ(good.body["rules"], Json::array({"deny tcp 192.0.2.0/24 443"}));

  const std::string quiet = create("quiet");
  EXPECT_EQ(http(sock_, "PUT", "/v1/sandboxes/" + quiet + "/network", R"({"rules": []})").status,
            409);

  auto ran = http(sock_, "POST", "/v1/sandboxes/" + sb + "/commands",
                  Json{{"cmd", kConnectRefused}, {"stream", false}}.dump());
  ASSERT_EQ(ran.status, 200) << ran.body.dump();
  EXPECT_EQ(ran.body["stdout"], refusedInModeNone());
  EXPECT_EQ(ran.body["audit"]["connections_denied"], 1) << ran.body.dump(2);
  EXPECT_NE(ran.body["audit"]["first_denial"].get<std::string>().find("10.255.255.1:80"),
            std::string::npos);
  const std::string execution = ran.body["audit"]["execution"];

  auto q = airlock::testing::runAirlock(
      {"audit", "query", "--log", dir_.file("audit.jsonl"), "--sandbox", sb, "--type", "connect"});
  ASSERT_EQ(q.exit_code, 0) << q.err;
  auto record = Json::parse(q.out.substr(0, q.out.find('\n')));
  EXPECT_EQ(q.out.find('\n'), q.out.size() - 1) << "one connect record: " << q.out;
  EXPECT_EQ(record["execution"], execution);
  EXPECT_EQ(record["verdict"], "deny");
  auto t = airlock::testing::runAirlock(
      {"audit", "tail", "-n", "1", "--log", dir_.file("audit.jsonl"), "--execution", execution});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_EQ(Json::parse(t.out)["type"], "execution") << t.out;
  auto wrong = airlock::testing::runAirlock(
      {"audit", "query", "--log", dir_.file("audit.jsonl"), "--since", "yesterday"});
  EXPECT_EQ(wrong.exit_code, 125);
  EXPECT_NE(wrong.err.find("--since 'yesterday'"), std::string::npos) << wrong.err;
}

}  // namespace
}  // namespace airlock::sandbox
