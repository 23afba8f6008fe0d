// Reviewers outside the supervisor: the `command` program (JSON in and out through its sandbox
// runner), the `webhook` service (a loopback HTTP server this test starts), and the
// example review plugin through the plugin ABI.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "airlock/unique_fd.h"
#include "supervisor/plugin/registry.h"
#include "supervisor/review/command_reviewer.h"
#include "supervisor/review/external_verdict.h"
#include "supervisor/review/plugin_reviewer.h"
#include "supervisor/review/webhook_reviewer.h"
#include "test_support.h"

namespace airlock::review {
namespace {

using Clock = std::chrono::steady_clock;
using airlock::testing::TempDir;

TEST(ExternalVerdict, ParsesTheDocumentAndRefusesNonsense) {
  auto v = parseExternalVerdict(R"({"verdict":"deny","rule":"r1","reason":"no"})");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->decision, Decision::kDeny);
  EXPECT_EQ(v->rule, "r1");
  EXPECT_EQ(parseExternalVerdict(R"({"verdict":"hold"})")->decision, Decision::kHold);
  EXPECT_TRUE(parseExternalVerdict(R"({"verdict":"allow","rule":null})")->allowed());
  for (const char* bad : {"", "[]", "{}", R"({"verdict":"maybe"})", R"({"verdict":1})",
                          R"({"verdict":"deny","rule":5})", "{\"verdict\":"}) {
    EXPECT_FALSE(parseExternalVerdict(bad).has_value()) << bad;
  }
  EXPECT_FALSE(parseExternalVerdict(std::string(kMaxExternalAnswer + 1, ' ')).has_value());
}

// A runner answering from a script, recording the job: the command reviewer's side of the
// contract (the request it sends, how it reads what came back). Real sandboxes run it in
// tests/privileged/review_command_test.cc.
class ScriptedRunner final : public SandboxRunner {
 public:
  explicit ScriptedRunner(Result<SandboxJobResult> answer) : answer_(std::move(answer)) {}
  Result<SandboxJobResult> run(const SandboxJob& job) override {
    jobs.push_back(job);
    return answer_;
  }
  std::vector<SandboxJob> jobs;

 private:
  Result<SandboxJobResult> answer_;
};

SandboxJobResult exited(int code, std::string out, std::string err = "") {
  SandboxJobResult r;
  r.exit_code = code;
  r.stdout_data = std::move(out);
  r.stderr_data = std::move(err);
  return r;
}

policy::ReviewCommand command(std::string path, uint32_t timeout_ms = 5000) {
  policy::ReviewCommand c;
  c.argv = {std::move(path), "--strict"};
  c.timeout_ms = timeout_ms;
  return c;
}

TEST(CommandReviewer, SendsTheSubjectAsJsonToItsProgramInASandbox) {
  auto runner = std::make_shared<ScriptedRunner>(
      exited(0, R"({"verdict":"deny","rule":"no-rm","reason":"deletes things"})"));
  CommandReviewer r(command("/opt/rev/check", 1500), runner);
  auto v = r.review(Subject::commandLine("rm -rf /"));
  ASSERT_TRUE(v.has_value()) << v.error().message();
  EXPECT_EQ(v->decision, Decision::kDeny);
  EXPECT_EQ(v->rule, "no-rm");
  ASSERT_EQ(runner->jobs.size(), 1u);
  const SandboxJob& job = runner->jobs[0];
  EXPECT_EQ(job.argv, (std::vector<std::string>{"/opt/rev/check", "--strict"}));
  EXPECT_EQ(job.timeout, std::chrono::milliseconds(1500));
  auto request = nlohmann::json::parse(job.stdin_data);
  EXPECT_EQ(request["kind"], "command");
  EXPECT_EQ(request["code"], "rm -rf /");
}

TEST(CommandReviewer, CrashesTimeoutsBadAnswersAndMissingProgramsAreErrors) {
  SandboxJobResult killed = exited(-1, "", "the program was killed by signal SEGV\n");
  killed.signal = SIGSEGV;
  SandboxJobResult late = exited(-1, "");
  late.timed_out = true;
  for (auto [answer, expect] : std::vector<std::pair<Result<SandboxJobResult>, std::string>>{
           {killed, "was killed by signal SEGV"},
           {exited(3, "", "oops\n"), "exited with status 3 (stderr: oops)"},
           {exited(127, "", "exec /opt/rev/check: ENOENT"), "status 127 (stderr: exec"},
           {exited(0, "not-json"), "not a JSON object"},
           {exited(0, "{}"), "no \"verdict\""},
           {exited(0, ""), "not a JSON object: ''"},
           {exited(0, std::string(kMaxExternalAnswer + 1, ' ')), "answer is over"},
           {late, "gave no verdict within 5000 ms"},
           {fail("no sandbox could start"), "no sandbox could start"}}) {
    CommandReviewer r(command("/opt/rev/check"), std::make_shared<ScriptedRunner>(answer));
    auto v = r.review(Subject::code("python", "x"));
    ASSERT_FALSE(v.has_value()) << expect;
    EXPECT_NE(v.error().message().find(expect), std::string::npos) << v.error().message();
    EXPECT_NE(v.error().message().find("review command '/opt/rev/check'"), std::string::npos)
        << v.error().message();
  }
}

// A one-request-at-a-time HTTP server on 127.0.0.1 that answers what `respond` says.
class LoopbackServer {
 public:
  using Respond = std::function<std::string(const std::string& request)>;
  explicit LoopbackServer(Respond respond) : respond_(std::move(respond)) {
    listener_ = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listener_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    socklen_t len = sizeof addr;
    ::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    EXPECT_EQ(::listen(listener_.get(), 8), 0);
    thread_ = std::thread([this] { serve(); });
  }
  ~LoopbackServer() {
    stop_ = true;
    ::shutdown(listener_.get(), SHUT_RDWR);
    thread_.join();
  }
  std::string url(const std::string& path = "/review") const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  std::string last_request;

 private:
  void serve() {
    while (!stop_) {
      UniqueFd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
      if (!conn) return;
      std::string req;
      char buf[65536];
      // Headers, then Content-Length bytes of body.
      size_t need = std::string::npos;
      while (need == std::string::npos || req.size() < need) {
        ssize_t n = ::read(conn.get(), buf, sizeof buf);
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
        size_t end = req.find("\r\n\r\n");
        if (end != std::string::npos && need == std::string::npos) {
          size_t cl = req.find("Content-Length: ");
          need = end + 4 + (cl == std::string::npos ? 0 : std::stoul(req.substr(cl + 16)));
        }
      }
      last_request = req;
      std::string answer = respond_(req);
      if (!answer.empty()) (void)!::write(conn.get(), answer.data(), answer.size());
    }
  }
  Respond respond_;
  UniqueFd listener_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

std::string httpAnswer(int status, const std::string& body) {
  return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

std::unique_ptr<WebhookReviewer> webhook(const std::string& url, uint32_t timeout_ms = 2000,
                                         const std::string& token_file = "") {
  policy::ReviewWebhook w;
  w.url = url;
  w.timeout_ms = timeout_ms;
  w.token_file = token_file;
  auto r = WebhookReviewer::create(w);
  EXPECT_TRUE(r.has_value()) << r.error().message();
  return r ? std::move(*r) : nullptr;
}

TEST(WebhookReviewer, PostsTheSubjectAndReadsAllowAndDeny) {
  LoopbackServer server([](const std::string& req) {
    bool bad = req.find("subprocess") != std::string::npos;
    return httpAnswer(200, bad ? R"({"verdict":"deny","rule":"judge","reason":"spawns"})"
                               : R"({"verdict":"allow"})");
  });
  TempDir dir;
  dir.write("token", "s3cret\n");
  auto r = webhook(server.url(), 2000, dir.file("token"));
  ASSERT_TRUE(r);
  auto allowed = r->review(Subject::code("python", "print(1)"));
  ASSERT_TRUE(allowed.has_value()) << allowed.error().message();
  EXPECT_TRUE(allowed->allowed());
  EXPECT_TRUE(server.last_request.starts_with("POST /review HTTP/1.1"));
  EXPECT_NE(server.last_request.find("Authorization: Bearer s3cret\r\n"), std::string::npos);
  auto body =
      nlohmann::json::parse(server.last_request.substr(server.last_request.find("\r\n\r\n") + 4));
  EXPECT_EQ(body["kind"], "code");
  EXPECT_EQ(body["language"], "python");
  EXPECT_EQ(body["code"], "print(1)");
  EXPECT_EQ(body["code_sha256"].get<std::string>().size(), 64u);
  auto denied = r->review(Subject::code("python", "import subprocess"));
  ASSERT_TRUE(denied.has_value()) << denied.error().message();
  EXPECT_EQ(denied->decision, Decision::kDeny);
  EXPECT_EQ(denied->rule, "judge");
}

TEST(WebhookReviewer, TimeoutAndServerErrorsAreErrors) {
  LoopbackServer slow([](const std::string&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    return httpAnswer(200, R"({"verdict":"allow"})");
  });
  auto t0 = Clock::now();
  auto v = webhook(slow.url(), 300)->review(Subject::code("python", "x"));
  ASSERT_FALSE(v.has_value());
  EXPECT_EQ(v.error().errnum(), ETIMEDOUT);
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(1200));

  LoopbackServer broken([](const std::string&) { return httpAnswer(500, "model overloaded"); });
  auto e = webhook(broken.url())->review(Subject::code("python", "x"));
  ASSERT_FALSE(e.has_value());
  EXPECT_NE(e.error().message().find("HTTP 500: model overloaded"), std::string::npos)
      << e.error().message();

  LoopbackServer garbage([](const std::string&) { return httpAnswer(200, "<html>"); });
  EXPECT_FALSE(webhook(garbage.url())->review(Subject::code("python", "x")).has_value());

  // Nobody listening: connection refused.
  std::string refused_url;
  {
    LoopbackServer gone([](const std::string&) { return std::string(); });
    refused_url = gone.url();
  }
  auto c = webhook(refused_url)->review(Subject::code("python", "x"));
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.error().message().find("connecting to"), std::string::npos) << c.error().message();
}

TEST(WebhookReviewer, BadUrlsAndMissingTokenFilesFailAtCreate) {
  policy::ReviewWebhook w;
  w.url = "https://judge.example/review";
  EXPECT_FALSE(WebhookReviewer::create(w).has_value());
  w.url = "http://127.0.0.1:9/";
  w.token_file = "/nonexistent/token";
  EXPECT_FALSE(WebhookReviewer::create(w).has_value());
}

TEST(PluginReviewer, TheExamplePluginDeniesAndHoldsItsWords) {
  auto registry =
      plugin::Registry::loadDirectory(airlock::testing::pluginDir(), {.required_owner = geteuid()});
  auto r = PluginReviewer::create(registry, "example",
                                  R"({"deny_words": ["rm -rf"], "hold_words": ["DROP TABLE"]})");
  ASSERT_TRUE(r.has_value()) << r.error().message();
  EXPECT_EQ((*r)->name(), "plugin:example");
  EXPECT_TRUE((*r)->review(Subject::code("python", "print(1)"))->allowed());
  auto deny = (*r)->review(Subject::commandLine("rm -rf /"));
  ASSERT_TRUE(deny.has_value());
  EXPECT_EQ(deny->decision, Decision::kDeny);
  EXPECT_EQ(deny->rule, "deny-word");
  EXPECT_EQ(deny->reason, "contains 'rm -rf'");
  EXPECT_EQ((*r)->review(Subject::code("python", "q('DROP TABLE x')"))->decision, Decision::kHold);

  auto bad_config = PluginReviewer::create(registry, "example", R"({"deny_words": 3})");
  ASSERT_FALSE(bad_config.has_value());
  EXPECT_NE(bad_config.error().message().find("deny_words"), std::string::npos);
  auto missing = PluginReviewer::create(registry, "nonesuch", "{}");
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.error().message().find("review plugins found: example"), std::string::npos)
      << missing.error().message();
}

}  // namespace
}  // namespace airlock::review
