// The API server under load and abuse: the real server on a Unix socket, the service faked so
// the HTTP layer is all that is measured (the same loops against `airlock serve` with real
// sandboxes are in tests/e2e). During each case a probe opens a new connection every 10 ms and
// asks GET /healthz, as a monitor would: its p99 must stay under 50 ms. After each case the
// process's descriptors and threads are back to their baseline and its RSS close to it.
//
// These run alone (label "load", RUN_SERIAL): they measure latency.
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "supervisor/api/server.h"
#include "tests/support/test_support.h"
#include "tests/unit/api_fake_service.h"
#include "tests/unit/api_test_client.h"

namespace airlock::testing {
namespace {

using api::Server;
using api::ServerOptions;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr double kHealthzP99LimitMs = 50;

struct Resources {
  size_t fds = 0;
  size_t threads = 0;
  long rss_kb = 0;
};

size_t entries(const char* dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++n;
  return n;
}

// RSS counts live memory only after the allocator gives back what it keeps for reuse: the
// clients' own buffers (megabytes of oversized requests) live in this process too.
Resources measure() {
  malloc_trim(0);
  Resources r;
  r.fds = entries("/proc/self/fd");
  r.threads = entries("/proc/self/task");
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) r.rss_kb = std::stol(line.substr(6));
  }
  return r;
}

// A monitor: a fresh connection every 10 ms, GET /healthz, the round trip recorded.
class HealthProbe {
 public:
  explicit HealthProbe(std::string socket) : socket_(std::move(socket)) {
    thread_ = std::thread([this] {
      while (!stop_.load()) {
        auto t0 = Clock::now();
        auto c = HttpClient::unix(socket_);
        int status = c ? c->request("GET", "/healthz").status : 0;
        double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        {
          std::lock_guard lock(mu_);
          samples_.push_back(ms);
          if (status != 200) ++failures_;
        }
        std::this_thread::sleep_for(10ms);
      }
    });
  }
  ~HealthProbe() { stop(); }

  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  // Stops, prints and checks the probe's figures for `what`.
  void expectHealthy(const std::string& what) {
    stop();
    std::sort(samples_.begin(), samples_.end());
    ASSERT_GE(samples_.size(), 10u) << what << ": too few probes";
    double p50 = samples_[samples_.size() / 2];
    double p99 = samples_[samples_.size() * 99 / 100];
    std::printf(
        "%s: /healthz from a new connection, %zu probes: p50 %.2f ms, p99 %.2f ms, "
        "max %.2f ms, failed %d\n",
        what.c_str(), samples_.size(), p50, p99, samples_.back(), failures_);
    EXPECT_EQ(failures_, 0) << what << ": /healthz did not answer 200";
    if (!kSanitizedBuild) {
      EXPECT_LT(p99, kHealthzP99LimitMs) << what;
    }
  }

 private:
  std::string socket_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<double> samples_;
  int failures_ = 0;
  std::thread thread_;
};

class ApiLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Both ends of a thousand connections live in this process.
    rlimit nofile{};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &nofile), 0);
    nofile.rlim_cur = std::min<rlim_t>(nofile.rlim_max, 16384);
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &nofile), 0);
    AIRLOCK_REQUIRE(nofile.rlim_cur >= 4096, "RLIMIT_NOFILE hard limit below 4096");
    options_.socket_path = dir_.file("api.sock");
  }

  Server& start() {
    auto s = Server::start(fake_, options_);
    EXPECT_TRUE(s) << (s ? "" : s.error().message());
    if (!s) std::abort();
    server_ = std::move(*s);
    // Warm up: the io threads and the allocator's first arenas are part of the baseline.
    for (int i = 0; i < 20; ++i) connect().request("GET", "/healthz");
    waitUntil([&] { return server_->connections() == 0; });
    baseline_ = measure();
    return *server_;
  }

  HttpClient connect() {
    auto c = HttpClient::unix(options_.socket_path);
    if (!c) {
      ADD_FAILURE() << "connect " << options_.socket_path << ": " << strerror(errno);
      std::abort();
    }
    return std::move(*c);
  }

  template <typename F>
  static bool waitUntil(F done, std::chrono::milliseconds limit = 5s) {
    auto deadline = Clock::now() + limit;
    while (!done() && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
    return done();
  }

  // Descriptors and threads return to the baseline exactly; RSS to within `rss_slack_mb` (the
  // allocator keeps some freed memory for reuse).
  void expectBackToBaseline(const std::string& what, long rss_slack_mb = 16) {
    bool settled = waitUntil([&] {
      auto now = measure();
      return server_->connections() == 0 && now.fds == baseline_.fds &&
             now.threads == baseline_.threads;
    });
    auto now = measure();
    std::printf("%s, after: fds %zu (baseline %zu), threads %zu (%zu), RSS %ld KiB (%ld)\n",
                what.c_str(), now.fds, baseline_.fds, now.threads, baseline_.threads, now.rss_kb,
                baseline_.rss_kb);
    EXPECT_TRUE(settled) << what << ": connections " << server_->connections();
    EXPECT_EQ(now.fds, baseline_.fds) << what;
    EXPECT_EQ(now.threads, baseline_.threads) << what;
    if (!kSanitizedBuild) {
      EXPECT_LE(now.rss_kb, baseline_.rss_kb + rss_slack_mb * 1024) << what;
    }
  }

  TempDir dir_;
  FakeService fake_;
  ServerOptions options_;
  std::unique_ptr<Server> server_;
  Resources baseline_;
};

TEST_F(ApiLoadTest, AThousandIdleConnectionsCostNoThreadAndLockNoOneOut) {
  auto& server = start();
  HealthProbe probe(options_.socket_path);
  std::vector<HttpClient> idle;
  for (int i = 0; i < 1000; ++i) {
    idle.push_back(connect());
    // Half have had a request answered (keep-alive), half never sent a byte.
    if (i % 2 == 0) {
      ASSERT_EQ(idle.back().request("GET", "/healthz").status, 200);
    }
  }
  ASSERT_TRUE(waitUntil([&] { return server.connections() >= 1000; }));
  std::this_thread::sleep_for(1s);
  auto during = measure();
  std::printf(
      "1000 idle connections held: %zu open, request threads %zu, process threads %zu "
      "(baseline %zu), RSS +%ld KiB\n",
      server.connections(), server.requestThreads(), during.threads, baseline_.threads,
      during.rss_kb - baseline_.rss_kb);
  EXPECT_EQ(server.requestThreads(), 0u);
  EXPECT_LE(during.threads, baseline_.threads + 1) << "idle connections pinned threads";
  probe.expectHealthy("1000 idle connections");
  // None was evicted: the default limits hold them all.
  for (auto& c : idle) EXPECT_EQ(c.request("GET", "/healthz").status, 200);
  idle.clear();
  expectBackToBaseline("1000 idle connections");
}

TEST_F(ApiLoadTest, SlowlorisIsCutAtTheHeaderDeadline) {
  options_.header_timeout = 2s;
  auto& server = start();
  HealthProbe probe(options_.socket_path);
  std::vector<HttpClient> slow;
  for (int i = 0; i < 300; ++i) {
    slow.push_back(connect());
    ASSERT_TRUE(slow.back().sendRaw("G"));
  }
  // One more byte a second on each, for longer than the deadline.
  auto t0 = Clock::now();
  const std::string rest = "ET /healthz HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaa";
  for (size_t i = 0; i < 5 && Clock::now() - t0 < 5s; ++i) {
    std::this_thread::sleep_for(1s);
    for (auto& c : slow) (void)c.sendRaw(rest.substr(i, 1));
  }
  size_t cut = 0;
  for (auto& c : slow) cut += c.closedByServer(1000) ? 1 : 0;
  std::printf(
      "slowloris: %zu of %zu one-byte-a-second connections cut at the %.0f s header "
      "deadline\n",
      cut, slow.size(), 2.0);
  EXPECT_EQ(cut, slow.size());
  EXPECT_EQ(server.requestThreads(), 0u);
  probe.expectHealthy("slowloris, 300 connections");
  slow.clear();
  expectBackToBaseline("slowloris");
}

TEST_F(ApiLoadTest, TenThousandRandomBodiesGetAnswersNotCrashes) {
  options_.max_json_body = 16 * 1024;
  start();
  {
    auto c = connect();
    ASSERT_EQ(c.request("POST", "/v1/sandboxes", R"({"name":"s"})").status, 201);
  }
  HealthProbe probe(options_.socket_path);
  const std::vector<std::pair<std::string, std::string>> routes = {
      {"POST", "/v1/sandboxes"},
      {"POST", "/v1/sandboxes/s/commands"},
      {"POST", "/v1/sandboxes/s/code"},
      {"POST", "/v1/sandboxes/s/files/write"},
      {"POST", "/v1/runs"},
      {"PUT", "/v1/sandboxes/s/network"},
      {"POST", "/v1/sandboxes/s/contexts"},
  };
  std::atomic<int> answered{0}, server_errors{0}, unanswered{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&, t] {
      std::mt19937 rng(1234 + t);
      std::optional<HttpClient> c;
      for (int i = 0; i < 1250; ++i) {
        if (!c) {
          if (auto fresh = HttpClient::unix(options_.socket_path)) c.emplace(std::move(*fresh));
        }
        if (!c) {
          ++unanswered;
          continue;
        }
        auto& [method, target] = routes[rng() % routes.size()];
        std::string body(rng() % 2048, '\0');
        for (auto& ch : body) ch = static_cast<char>(rng());
        if (rng() % 3 == 0) body = "{\"name\": " + body;  // some look like JSON
        auto r = c->request(method, target, body);
        if (!r.ok) {
          ++unanswered;
          c.reset();
          continue;
        }
        ++answered;
        if (r.status >= 500) ++server_errors;
        if (r.header("connection") == "close") c.reset();
      }
    });
  }
  for (auto& th : clients) th.join();
  std::printf("random bodies: %d answered, %d unanswered, %d server errors\n", answered.load(),
              unanswered.load(), server_errors.load());
  EXPECT_EQ(answered.load(), 10000);
  EXPECT_EQ(server_errors.load(), 0);
  probe.expectHealthy("10,000 random bodies");
  expectBackToBaseline("10,000 random bodies");
}

TEST_F(ApiLoadTest, OversizedHeadersAndBodiesAreRefusedAndForgotten) {
  options_.max_json_body = 64 * 1024;
  options_.max_upload_bytes = 1 << 20;
  start();
  {
    auto c = connect();
    ASSERT_EQ(c.request("POST", "/v1/sandboxes", R"({"name":"s"})").status, 201);
  }
  HealthProbe probe(options_.socket_path);
  const std::string big(2 << 20, 'x');
  struct Case {
    const char* name;
    std::function<std::string()> request;
    int status;
  };
  std::string many_headers;
  for (int i = 0; i < 400; ++i)
    many_headers += "X-H" + std::to_string(i) + ": " + big.substr(0, 50) + "\r\n";
  const std::vector<Case> cases = {
      {"64 KiB header line",
       [&] { return "GET /healthz HTTP/1.1\r\nX-Big: " + big.substr(0, 64 << 10) + "\r\n\r\n"; },
       431},
      {"400 headers", [&] { return "GET /v1/sandboxes HTTP/1.1\r\n" + many_headers + "\r\n"; },
       431},
      {"2 MiB JSON body",
       [&] {
         return "POST /v1/sandboxes HTTP/1.1\r\nContent-Type: "
                "application/json\r\nContent-Length: " +
                std::to_string(big.size()) + "\r\n\r\n" + big;
       },
       413},
      {"chunked JSON body past the limit",
       [&] {
         std::string r =
             "POST /v1/sandboxes/s/code HTTP/1.1\r\nContent-Type: application/json\r\n"
             "Transfer-Encoding: chunked\r\n\r\n";
         for (int i = 0; i < 32; ++i) r += "10000\r\n" + big.substr(0, 0x10000) + "\r\n";
         return r + "0\r\n\r\n";
       },
       413},
      {"2 MiB upload past max_upload",
       [&] {
         return "PUT /v1/sandboxes/s/files?path=/tmp/x HTTP/1.1\r\nContent-Length: " +
                std::to_string(big.size()) + "\r\n\r\n" + big;
       },
       413},
  };
  std::atomic<int> wrong{0};
  std::vector<std::thread> clients;
  for (const auto& cs : cases) {
    // Built before the clients start: megabytes built in many threads stay in the allocator's
    // per-thread arenas and would read as the server's RSS.
    for (int t = 0; t < 4; ++t) {
      clients.emplace_back([&, wire = cs.request()] {
        for (int i = 0; i < 50; ++i) {
          auto c = HttpClient::unix(options_.socket_path);
          if (!c) {
            ++wrong;
            continue;
          }
          std::thread writer([&] { (void)c->sendRaw(wire); });
          auto r = c->readResponse();
          shutdown(c->fd(), SHUT_RDWR);  // unblocks the writer if the server stopped reading
          writer.join();
          if (r.status != cs.status) {
            ++wrong;
            std::printf("%s: got %d, want %d\n", cs.name, r.status, cs.status);
          }
        }
      });
    }
  }
  for (auto& th : clients) th.join();
  EXPECT_EQ(wrong.load(), 0);
  probe.expectHealthy("oversized headers and bodies");
  expectBackToBaseline("oversized headers and bodies");
}

TEST_F(ApiLoadTest, AClientThatNeverReadsItsStreamIsCutAtTheIoDeadline) {
  const std::string chunk(64 * 1024, 'y');
  fake_.command_script = {{0ms, {{"type", "start"}, {"command_id", "c1"}, {"pid", 7}}},
                          {0ms, {{"type", "stdout"}, {"data", chunk}}}};
  fake_.command_endless = true;
  options_.io_timeout = 1s;
  auto& server = start();
  auto c = connect();
  ASSERT_EQ(c.request("POST", "/v1/sandboxes", R"({"name":"s"})").status, 201);
  HealthProbe probe(options_.socket_path);
  ASSERT_TRUE(c.sendRequest("POST", "/v1/sandboxes/s/commands", R"({"argv":["yes"]})"));
  // ... and never reads a byte of the answer.
  long peak_rss = 0;
  auto t0 = Clock::now();
  bool ended = waitUntil(
      [&] {
        peak_rss = std::max(peak_rss, measure().rss_kb);
        return fake_.streams.destroyed_early.load() == 1 && server.requestThreads() == 0;
      },
      10s);
  double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf(
      "a client that never reads: stream ended after %.2f s (io_timeout 1 s), peak RSS "
      "+%ld KiB\n",
      seconds, peak_rss - baseline_.rss_kb);
  EXPECT_TRUE(ended) << "the stream is still being written to a client that reads nothing";
  if (!kSanitizedBuild) {
    EXPECT_LE(peak_rss, baseline_.rss_kb + 32 * 1024) << "the server buffered the stream";
  }
  probe.expectHealthy("a client that never reads");
  c.closeNow();
  expectBackToBaseline("a client that never reads");
}

TEST_F(ApiLoadTest, AHundredClientsCreateRunAndDestroyInALoop) {
  auto& server = start();
  HealthProbe probe(options_.socket_path);
  std::atomic<int> cycles{0}, failures{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 100; ++t) {
    clients.emplace_back([&, t] {
      auto c = HttpClient::unix(options_.socket_path);
      if (!c) {
        ++failures;
        return;
      }
      for (int i = 0; i < 30; ++i) {
        const std::string name = "c" + std::to_string(t) + "-" + std::to_string(i);
        bool ok =
            c->request("POST", "/v1/sandboxes", R"({"name":")" + name + R"("})").status == 201 &&
            c->request("POST", "/v1/sandboxes/" + name + "/code",
                       R"j({"code":"print(1)","stream":false})j")
                    .status == 200 &&
            c->request("DELETE", "/v1/sandboxes/" + name).status == 204;
        ok ? ++cycles : ++failures;
      }
    });
  }
  for (auto& th : clients) th.join();
  std::printf("100 clients x 30 create/run/destroy cycles: %d done, %d failed\n", cycles.load(),
              failures.load());
  EXPECT_EQ(cycles.load(), 3000);
  // A request's thread ends just after its answer went out, so a client can see the answer
  // first (under a sanitizer, by milliseconds): the threads must end, not have ended already.
  EXPECT_TRUE(waitUntil([&] { return server.requestThreads() == 0; }, 5s))
      << server.requestThreads() << " request threads still running";
  probe.expectHealthy("100 clients creating, running and destroying");
  expectBackToBaseline("100 clients creating, running and destroying");
}

}  // namespace
}  // namespace airlock::testing
