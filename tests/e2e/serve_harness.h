// What the `airlock serve` end-to-end tests share: an independent HTTP client, the supervisor
// as a child process, and a fixture that checks the host is left as it was found.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "test_support.h"

extern char** environ;

namespace airlock::testing {

using Json = nlohmann::json;

struct Response {
  int status = 0;
  std::string body;
  // The whole response arrived (the server was not killed while sending it).
  bool complete = false;
};

// A deliberately independent HTTP/1.1 client (one request per connection, chunked decoding), so
// the tests do not share code with the server or the CLI client they check. A response cut off
// (the server died) keeps its status and what arrived, with complete = false; no answer within
// two minutes is status 0.
inline Response http(const std::string& sock, const std::string& method, const std::string& path,
                     const std::string& body = "",
                     const std::string& content_type = "application/json") {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval limit{.tv_sec = 120, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock.c_str());
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return {};
  }
  std::string req = method + " " + path + " HTTP/1.1\r\nHost: airlock\r\nConnection: close\r\n";
  if (!body.empty() || method == "POST" || method == "PUT")
    req += "Content-Type: " + content_type + "\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\n";
  req += "\r\n" + body;
  (void)!send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string raw;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) raw.append(buf, static_cast<size_t>(n));
  close(fd);
  Response r;
  size_t hdr_end = raw.find("\r\n\r\n");
  if (raw.size() < 12 || hdr_end == std::string::npos) return r;
  r.status = std::atoi(raw.substr(9, 3).c_str());
  std::string headers = raw.substr(0, hdr_end);
  std::string rest = raw.substr(hdr_end + 4);
  for (auto& c : headers) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (headers.find("transfer-encoding: chunked") != std::string::npos) {
    size_t pos = 0;
    while (pos < rest.size()) {
      size_t eol = rest.find("\r\n", pos);
      if (eol == std::string::npos) break;
      size_t len = std::strtoul(rest.substr(pos, eol - pos).c_str(), nullptr, 16);
      if (len == 0) {
        r.complete = true;
        break;
      }
      if (eol + 2 + len > rest.size()) {
        r.body += rest.substr(eol + 2);
        break;
      }
      r.body += rest.substr(eol + 2, len);
      pos = eol + 2 + len + 2;
    }
  } else {
    r.body = rest;
    size_t cl = headers.find("content-length:");
    r.complete = cl == std::string::npos ||
                 std::strtoul(headers.c_str() + cl + 15, nullptr, 10) == rest.size();
  }
  return r;
}

inline std::vector<Json> ndjson(const std::string& body) {
  std::vector<Json> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t eol = body.find('\n', pos);
    if (eol == std::string::npos) eol = body.size();
    if (eol > pos) out.push_back(Json::parse(body.substr(pos, eol - pos)));
    pos = eol + 1;
  }
  return out;
}

// `airlock serve --policy <dir>/policy.toml` on <dir>/airlock.sock, with extra_args after it.
// Its stderr is the test's, or appended to log_file when one is given.
class Serve {
 public:
  explicit Serve(const TempDir& dir, const std::string& extra_policy = "",
                 std::string log_file = "", std::vector<std::string> extra_args = {})
      : log_(std::move(log_file)), extra_args_(std::move(extra_args)) {
    sock_ = dir.file("airlock.sock");
    dir.write("policy.toml", "schema = 1\n[server]\nsocket = \"" + sock_ + "\"\n" + extra_policy);
    policy_ = dir.file("policy.toml");
    start();
  }
  ~Serve() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  // Starts it and, unless told not to, waits until it answers /healthz.
  void start(bool wait = true) {
    std::string bin = airlockBinary();
    std::vector<std::string> args = {bin, "serve", "--policy", policy_};
    args.insert(args.end(), extra_args_.begin(), extra_args_.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (!log_.empty())
      posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, log_.c_str(),
                                       O_WRONLY | O_CREAT | O_APPEND, 0600);
    int rc = posix_spawn(&pid_, bin.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    ASSERT_EQ(rc, 0);
    if (!wait) return;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (http(sock_, "GET", "/healthz").status != 200) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "airlock serve did not come up";
      int st;
      ASSERT_EQ(waitpid(pid_, &st, WNOHANG), 0) << "airlock serve exited early";
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  // Returns the exit status after the signal.
  int stop(int sig = SIGTERM) {
    kill(pid_, sig);
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
    return st;
  }
  const std::string& sock() const { return sock_; }
  pid_t pid() const { return pid_; }

 private:
  std::string sock_, policy_, log_;
  std::vector<std::string> extra_args_;
  pid_t pid_ = -1;
};

class ServeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    AIRLOCK_REQUIRE_ROOT();
    before_ = snapshotHostResources();
  }
  void TearDown() override {
    if (!isRealRoot()) return;
    EXPECT_EQ(snapshotHostResources(), before_) << "airlock serve left host resources behind";
  }
  // The host's resources once they are back to before_, or after 10 s. A killed supervisor's
  // children were re-parented to the host's init, which reaps them on its own schedule (seconds
  // on this host): tests wait for that, not for airlock.
  HostResources settledHostResources() const {
    auto now = snapshotHostResources();
    for (int i = 0; i < 100 && !(now == before_); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      now = snapshotHostResources();
    }
    return now;
  }
  HostResources before_;
  TempDir dir_;
};

}  // namespace airlock::testing
