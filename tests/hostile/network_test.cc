// Network with networking off (docs/security-tests.md): no route anywhere, not to the host's
// loopback services, its other addresses, abstract or path unix sockets, nor the internet. Only
// servers the test starts on the host's loopback (and its own unix sockets) are ever targets.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "hostile_support.h"

namespace airlock::hostile {
namespace {

using airlock::testing::TempDir;

// Listening sockets on the host that greet every client with a token and count them.
class TokenServers {
 public:
  explicit TokenServers(const std::string& token, const std::string& unix_path) : token_(token) {
    int s4 = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a4{};
    a4.sin_family = AF_INET;
    a4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s4, reinterpret_cast<sockaddr*>(&a4), sizeof a4) == 0 && listen(s4, 16) == 0) {
      socklen_t len = sizeof a4;
      getsockname(s4, reinterpret_cast<sockaddr*>(&a4), &len);
      port4_ = ntohs(a4.sin_port);
      fds_.push_back(s4);
    }
    int s6 = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in6 a6{};
    a6.sin6_family = AF_INET6;
    a6.sin6_addr = in6addr_loopback;
    if (s6 >= 0 && bind(s6, reinterpret_cast<sockaddr*>(&a6), sizeof a6) == 0 &&
        listen(s6, 16) == 0) {
      socklen_t len = sizeof a6;
      getsockname(s6, reinterpret_cast<sockaddr*>(&a6), &len);
      port6_ = ntohs(a6.sin6_port);
      fds_.push_back(s6);
    } else if (s6 >= 0) {
      close(s6);
    }
    abstract_ = "airlock-hostile-" + token;
    for (const std::string& name : {std::string(1, '\0') + abstract_, unix_path}) {
      int su = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_un au{};
      au.sun_family = AF_UNIX;
      memcpy(au.sun_path, name.data(), name.size());
      socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
      if (bind(su, reinterpret_cast<sockaddr*>(&au), len) == 0 && listen(su, 16) == 0)
        fds_.push_back(su);
      else
        close(su);
    }
    thread_ = std::thread([this] { serve(); });
  }
  ~TokenServers() {
    running_ = false;
    thread_.join();
    for (int fd : fds_) close(fd);
  }
  int port4() const { return port4_; }
  int port6() const { return port6_; }
  const std::string& abstractName() const { return abstract_; }
  int accepted() const { return accepted_; }
  size_t listening() const { return fds_.size(); }

 private:
  void serve() {
    while (running_) {
      std::vector<pollfd> p;
      for (int fd : fds_) p.push_back({fd, POLLIN, 0});
      if (poll(p.data(), p.size(), 50) <= 0) continue;
      for (auto& e : p) {
        if (!(e.revents & POLLIN)) continue;
        int c = accept4(e.fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) continue;
        ++accepted_;
        (void)!write(c, token_.data(), token_.size());
        close(c);
      }
    }
  }
  std::string token_;
  std::string abstract_;
  std::vector<int> fds_;
  int port4_ = 0, port6_ = 0;
  std::atomic<bool> running_{true};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

std::string firstNonLoopbackIpv4() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string ip;
  for (ifaddrs* i = list; i != nullptr && ip.empty(); i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof buf);
    if (std::string(buf).rfind("127.", 0) != 0) ip = buf;
  }
  freeifaddrs(list);
  return ip;
}

// Class: Exfil. With network mode "none" nothing outside the sandbox answers. Control: the same
// probe run bare on the host reaches each test server and reads its token.
TEST_F(HostileTest, Exfil_NoNetworkReachesHost) {
  TempDir dir;
  const std::string token = uniqueToken();
  TokenServers servers(token, dir.file("sock"));
  ASSERT_GT(servers.port4(), 0);
  ASSERT_GE(servers.listening(), 3u);
  const std::string code = probe("connect.py");

  std::vector<std::string> local{"tcp:127.0.0.1:" + std::to_string(servers.port4()),
                                 "unix:@" + servers.abstractName(), "unix:" + dir.file("sock")};
  if (servers.port6() > 0) local.push_back("tcp6:[::1]:" + std::to_string(servers.port6()));
  auto control = runBarePython(code, local);
  auto cres = parseProbeJson(control.out, "control");
  for (const auto& t : local)
    EXPECT_EQ(cres.value(t, "?"), "OK:" + token) << "control: bare connect to " << t;
  int control_accepts = servers.accepted();
  EXPECT_EQ(control_accepts, static_cast<int>(local.size()));

  std::vector<std::string> targets = local;
  std::string host_ip = firstNonLoopbackIpv4();
  if (!host_ip.empty()) targets.push_back("tcp:" + host_ip + ":" + std::to_string(servers.port4()));
  targets.push_back("tcp:1.1.1.1:443");
  targets.push_back("udp:1.1.1.1:53");
  auto run = runSandbox("python", code, {.args = targets});
  expectOutcome(run, "exited", 0);
  auto res = parseProbeJson(run.out(), "sandbox");
  EXPECT_EQ(servers.accepted(), control_accepts)
      << "[Exfil] a host test server accepted a connection from the sandbox";
  EXPECT_EQ(res.value("ipv4_routes", -1), 0) << "[Exfil] the sandbox has IPv4 routes";
  for (const auto& t : targets) {
    std::string r = res.value(t, "?");
    EXPECT_EQ(r.rfind("OK", 0), std::string::npos) << "[Exfil] " << t << " reached: " << r;
    EXPECT_TRUE(r == "ECONNREFUSED" || r == "ENETUNREACH" || r == "EHOSTUNREACH" || r == "ENOENT" ||
                r == "EACCES" || r == "EPERM" || r == "EADDRNOTAVAIL")
        << "[Exfil] " << t << " answered " << r;
  }
}

}  // namespace
}  // namespace airlock::hostile
