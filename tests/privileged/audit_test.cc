// eBPF audit and network policy on the real kernel: processes forked into a test cgroup v2
// directory exec and connect; the engine's summaries and the kernel's answers (EPERM or success)
// are checked. Network targets are only loopback and two network namespaces the test creates
// (client "c" and server "s" joined by a veth pair); everything is removed in TearDown.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <vector>

#include "supervisor/audit/engine.h"
#include "supervisor/audit/engine_objects.h"
#include "supervisor/audit/hook_probe.h"
#include "supervisor/sys/cgroup.h"
#include "test_support.h"

namespace airlock::audit {
namespace {

using airlock::testing::runCommand;

// runCommand does not search PATH: the absolute path of an admin tool, or "" if absent.
std::string tool(const char* name) {
  for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
    std::string p = std::string(dir) + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return {};
}

// Runs body() in a forked child that `move` puts into a cgroup before it starts. Returns the
// child's exit status, or -1.
int runMoved(const std::function<bool(pid_t)>& move, const std::function<int()>& body,
             int netns_fd = -1);

// The same for `cg` (and, when netns_fd >= 0, that network namespace).
int runIn(sys::SandboxCgroup& cg, const std::function<int()>& body, int netns_fd = -1) {
  auto move = [&cg](pid_t pid) {
    auto moved = cg.attachAll(pid);
    EXPECT_TRUE(moved) << (moved ? "" : moved.error().message());
    return moved.has_value();
  };
  return runMoved(move, body, netns_fd);
}

// The same for a cgroup v2 directory the test made itself.
int runInDir(const std::string& dir, const std::function<int()>& body) {
  auto move = [&dir](pid_t pid) {
    std::ofstream procs(dir + "/cgroup.procs");
    procs << pid << std::flush;
    EXPECT_TRUE(procs.good()) << "cannot move " << pid << " into " << dir;
    return procs.good();
  };
  return runMoved(move, body);
}

int runMoved(const std::function<bool(pid_t)>& move, const std::function<int()>& body,
             int netns_fd) {
  int gate[2];
  if (::pipe2(gate, O_CLOEXEC) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(gate[1]);
    char c;
    if (::read(gate[0], &c, 1) != 1) ::_exit(120);
    if (netns_fd >= 0 && ::setns(netns_fd, CLONE_NEWNET) != 0) ::_exit(121);
    ::_exit(body());
  }
  ::close(gate[0]);
  move(pid);  // on failure the child runs where it is, and the test's expectations say so
  char go = 'g';
  EXPECT_EQ(::write(gate[1], &go, 1), 1);
  ::close(gate[1]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Child bodies: return 0 on success, else the errno (EPERM = 1 means the policy refused).
int connectTo(int family, const char* addr, uint16_t port, int type = SOCK_STREAM) {
  int s = ::socket(family, type | SOCK_CLOEXEC, 0);
  if (s < 0) return 100;
  sockaddr_storage ss{};
  socklen_t len;
  if (family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    ::inet_pton(AF_INET, addr, &a->sin_addr);
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    ::inet_pton(AF_INET6, addr, &a->sin6_addr);
    len = sizeof *a;
  }
  int rc = ::connect(s, reinterpret_cast<sockaddr*>(&ss), len);
  int e = rc == 0 ? 0 : errno;
  ::close(s);
  return e;
}

int sendTo(int family, const char* addr, uint16_t port, int count = 1) {
  int s = ::socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return 100;
  sockaddr_storage ss{};
  socklen_t len;
  if (family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    ::inet_pton(AF_INET, addr, &a->sin_addr);
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    ::inet_pton(AF_INET6, addr, &a->sin6_addr);
    len = sizeof *a;
  }
  int e = 0;
  for (int i = 0; i < count; ++i) {
    if (::sendto(s, "ping", 4, 0, reinterpret_cast<sockaddr*>(&ss), len) < 0) e = errno;
  }
  ::close(s);
  return e;
}

// A listening or bound socket on addr:0 in the current thread's network namespace.
struct Server {
  int fd = -1;
  uint16_t port = 0;
  Server(int family, const char* addr, int type = SOCK_STREAM) {
    fd = ::socket(family, type | SOCK_CLOEXEC, 0);
    sockaddr_storage ss{};
    socklen_t len;
    if (family == AF_INET) {
      auto* a = reinterpret_cast<sockaddr_in*>(&ss);
      a->sin_family = AF_INET;
      ::inet_pton(AF_INET, addr, &a->sin_addr);
      len = sizeof *a;
    } else {
      auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
      a->sin6_family = AF_INET6;
      ::inet_pton(AF_INET6, addr, &a->sin6_addr);
      len = sizeof *a;
    }
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&ss), len), 0) << addr << ": " << errno;
    if (type == SOCK_STREAM) {
      EXPECT_EQ(::listen(fd, 64), 0);
    }
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
    port = ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                   : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  }
  Server(Server&& o) noexcept : fd(std::exchange(o.fd, -1)), port(o.port) {}
  ~Server() {
    if (fd >= 0) ::close(fd);
  }
  // Whether a datagram arrives within timeout_ms.
  bool received(int timeout_ms = 500) const {
    timeval tv{0, timeout_ms * 1000};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[64];
    return ::recv(fd, buf, sizeof buf, 0) > 0;
  }
};

// Creates a server socket inside the network namespace at netns_path (from a helper thread:
// setns changes only the calling thread, and a socket keeps the namespace it was made in).
Server serverIn(const std::string& netns_path, int family, const char* addr,
                int type = SOCK_STREAM) {
  std::optional<Server> out;
  std::thread t([&] {
    int fd = ::open(netns_path.c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0) << netns_path;
    EXPECT_EQ(::setns(fd, CLONE_NEWNET), 0);
    ::close(fd);
    out.emplace(family, addr, type);
  });
  t.join();
  return std::move(*out);
}

const ConnectionEntry* findConnection(const AuditSummary& s, const std::string& address,
                                      uint16_t port) {
  for (const auto& c : s.connections)
    if (c.address == address && c.port == port) return &c;
  return nullptr;
}

std::string dump(const AuditSummary& s) { return s.toJson().dump(1); }

NetPolicy policy(NetMode mode, std::initializer_list<std::string> rules = {}) {
  NetPolicy p{mode, {}};
  for (const auto& r : rules) {
    auto parsed = NetRule::parse(r);
    EXPECT_TRUE(parsed) << r;
    if (parsed) p.rules.push_back(*parsed);
  }
  return p;
}

class Audit : public ::testing::Test {
 protected:
  static std::shared_ptr<AuditEngine>& engine() {
    static std::shared_ptr<AuditEngine> e;
    return e;
  }

  void SetUp() override {
    AIRLOCK_REQUIRE_ROOT();
    auto host = sys::CgroupHost::detect();
    ASSERT_TRUE(host) << host.error().message();
    host_ = *host;
    if (host_.v2_mount.empty()) {
      if (airlock::testing::privilegeRequired()) FAIL() << "cgroup2 is not mounted";
      GTEST_SKIP() << "cgroup2 is not mounted: eBPF audit scopes by cgroup v2 id";
    }
    // Probed once per test binary: each probe loads and attaches a program.
    static const std::string missing = [&] {
      for (const auto& h : probeHooks(host_.v2_mount))
        if (h.used && !h.ok) return h.hook + ": " + h.detail;
      return std::string();
    }();
    if (!missing.empty()) {
      if (airlock::testing::privilegeRequired()) FAIL() << "kernel lacks " << missing;
      GTEST_SKIP() << "the kernel lacks the hook " << missing;
    }
    if (!engine()) {
      auto e = AuditEngine::load();
      ASSERT_TRUE(e) << e.error().message();
      engine() = *e;
    }
    prefix_ = "test-audit-" + std::to_string(::getpid()) + "-";
  }

  void TearDown() override {
    for (const auto& ns : netns_) runCommand({tool("ip"), "netns", "del", ns});
    if (prefix_.empty()) return;
    auto r = sys::reclaimStaleCgroups(host_, std::chrono::seconds(5), prefix_);
    EXPECT_TRUE(r) << r.error().message();
    if (r) {
      EXPECT_EQ(*r, 0) << "a test left cgroups behind";
    }
  }

  sys::SandboxCgroup makeCgroup() {
    auto cg = sys::SandboxCgroup::create(host_, prefix_ + std::to_string(counter_++), {});
    EXPECT_TRUE(cg) << cg.error().message();
    return std::move(*cg);
  }

  std::unique_ptr<SandboxAudit> attach(const sys::SandboxCgroup& cg, NetPolicy net,
                                       AttachOptions extra = {}) {
    extra.cgroup_v2_path = cg.v2Path();
    extra.sandbox_id = cg.name();
    extra.network = std::move(net);
    auto a = engine()->attach(extra);
    EXPECT_TRUE(a) << a.error().message();
    return a ? std::move(*a) : nullptr;
  }

  // Two namespaces joined by a veth pair: c (10.x-free test addresses) and s, where servers
  // listen. Addresses come from documentation ranges (not protected), plus fake metadata
  // addresses on s that c routes to.
  void makeNetworks() {
    std::string tag = std::to_string(::getpid());
    client_ns_ = "airlock-test-c-" + tag;
    server_ns_ = "airlock-test-s-" + tag;
    std::vector<std::vector<std::string>> steps = {
        {"ip", "netns", "add", client_ns_},
        {"ip", "netns", "add", server_ns_},
        {"ip", "-n", client_ns_, "link", "add", "vc", "type", "veth", "peer", "name", "vs", "netns",
         server_ns_},
        {"ip", "-n", client_ns_, "link", "set", "lo", "up"},
        {"ip", "-n", server_ns_, "link", "set", "lo", "up"},
        {"ip", "-n", client_ns_, "addr", "add", "198.51.100.1/24", "dev", "vc"},
        {"ip", "-n", server_ns_, "addr", "add", "198.51.100.2/24", "dev", "vs"},
        {"ip", "-n", client_ns_, "addr", "add", "2001:db8::1/64", "dev", "vc", "nodad"},
        {"ip", "-n", server_ns_, "addr", "add", "2001:db8::2/64", "dev", "vs", "nodad"},
        {"ip", "-n", client_ns_, "link", "set", "vc", "up"},
        {"ip", "-n", server_ns_, "link", "set", "vs", "up"},
        // The fake metadata service: local addresses of s (on its loopback; this kernel may
        // lack the dummy driver) that c routes to over the veth pair.
        {"ip", "-n", server_ns_, "addr", "add", "169.254.169.254/32", "dev", "lo"},
        {"ip", "-n", server_ns_, "addr", "add", "fd00:ec2::254/128", "dev", "lo"},
        {"ip", "-n", client_ns_, "route", "add", "169.254.169.254/32", "via", "198.51.100.2"},
        {"ip", "-n", client_ns_, "route", "add", "fd00:ec2::254/128", "via", "2001:db8::2"},
    };
    ASSERT_FALSE(tool("ip").empty()) << "iproute2 (ip) is needed to make test namespaces";
    for (size_t i = 0; i < steps.size(); ++i) {
      steps[i][0] = tool("ip");
      auto r = runCommand(steps[i], "", 10);
      if (i < 2 && r.exit_code == 0) netns_.push_back(steps[i][3]);
      std::string cmd;
      for (const auto& w : steps[i]) cmd += w + " ";
      ASSERT_EQ(r.exit_code, 0) << cmd << ": " << r.err;
    }
    client_fd_ = ::open(("/run/netns/" + client_ns_).c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(client_fd_, 0);
  }
  ~Audit() override {
    if (client_fd_ >= 0) ::close(client_fd_);
  }
  std::string serverPath() const { return "/run/netns/" + server_ns_; }

  sys::CgroupHost host_;
  std::string prefix_;
  int counter_ = 0;
  std::vector<std::string> netns_;
  std::string client_ns_, server_ns_;
  int client_fd_ = -1;
};

TEST_F(Audit, ExecsAreRecordedWithPathArgvAndSandboxPid) {
  auto cg = makeCgroup();
  auto a = attach(cg, policy(NetMode::kNone));
  ASSERT_TRUE(a);
  a->beginExecution("ex-exec");
  int rc = runIn(cg, [] {
    const char* argv[] = {"sh", "-c", "/bin/true one two", nullptr};
    ::execv("/bin/sh", const_cast<char**>(argv));
    return 127;
  });
  EXPECT_EQ(rc, 0);
  // In a new pid namespace the exec'ing process is pid 1 as the sandbox sees it.
  rc = runIn(cg, [] {
    if (::unshare(CLONE_NEWPID) != 0) return 90;
    pid_t p = ::fork();
    if (p == 0) {
      const char* argv[] = {"true", "in-pidns", nullptr};
      ::execv("/bin/true", const_cast<char**>(argv));
      ::_exit(127);
    }
    int st = 0;
    ::waitpid(p, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 91;
  });
  EXPECT_EQ(rc, 0);
  auto s = a->endExecution();
  ASSERT_TRUE(s) << s.error().message();
  EXPECT_EQ(s->processes_started, 3u) << dump(*s);
  ASSERT_GE(s->processes.size(), 3u);
  EXPECT_EQ(s->processes[0].path, "/bin/sh");
  EXPECT_EQ(s->processes[0].argv, (std::vector<std::string>{"sh", "-c", "/bin/true one two"}));
  EXPECT_EQ(s->processes[1].path, "/bin/true");
  EXPECT_EQ(s->processes[1].argv, (std::vector<std::string>{"/bin/true", "one", "two"}));
  EXPECT_EQ(s->processes[2].argv, (std::vector<std::string>{"true", "in-pidns"}));
  EXPECT_EQ(s->processes[2].ns_pid, 1u) << "pid inside the sandbox's pid namespace";
  EXPECT_EQ(s->events_dropped, 0u);
}

TEST_F(Audit, ProcessesOutsideTheCgroupProduceNoEvents) {
  auto cg = makeCgroup();
  auto a = attach(cg, policy(NetMode::kNone));
  ASSERT_TRUE(a);
  Server server(AF_INET, "127.0.0.1");
  a->beginExecution("ex-outside");
  // The same work outside the cgroup: not recorded, not refused.
  pid_t p = ::fork();
  if (p == 0) {
    if (connectTo(AF_INET, "127.0.0.1", server.port) != 0) ::_exit(3);
    const char* argv[] = {"true", nullptr};
    ::execv("/bin/true", const_cast<char**>(argv));
    ::_exit(127);
  }
  int st = 0;
  ::waitpid(p, &st, 0);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "outside the cgroup nothing is refused";
  auto outside = a->endExecution();
  ASSERT_TRUE(outside);
  EXPECT_EQ(outside->processes_started, 0u) << dump(*outside);
  EXPECT_EQ(outside->connections_allowed + outside->connections_denied, 0u) << dump(*outside);
  // Positive control: inside, the same work is recorded (and host loopback is refused).
  a->beginExecution("ex-inside");
  uint16_t port = server.port;
  int rc = runIn(cg, [port] {
    if (connectTo(AF_INET, "127.0.0.1", port) != EPERM) return 3;
    const char* argv[] = {"true", nullptr};
    ::execv("/bin/true", const_cast<char**>(argv));
    return 127;
  });
  EXPECT_EQ(rc, 0);
  auto inside = a->endExecution();
  ASSERT_TRUE(inside);
  EXPECT_EQ(inside->processes_started, 1u) << dump(*inside);
  EXPECT_EQ(inside->connections_denied, 1u) << dump(*inside);
}

TEST_F(Audit, HostLoopbackTcpFollowsTheRules) {
  auto cg = makeCgroup();
  Server server(AF_INET, "127.0.0.1");
  Server other(AF_INET, "127.0.0.1");
  uint16_t port = server.port, other_port = other.port;
  auto a = attach(cg, policy(NetMode::kOpen));
  ASSERT_TRUE(a);

  // open: the supervisor's own loopback is a protected range.
  a->beginExecution("open");
  EXPECT_EQ(runIn(cg, [port] { return connectTo(AF_INET, "127.0.0.1", port); }), EPERM);
  auto s = a->endExecution();
  ASSERT_TRUE(s);
  auto* c = findConnection(*s, "127.0.0.1", port);
  ASSERT_NE(c, nullptr) << dump(*s);
  EXPECT_FALSE(c->allowed);
  EXPECT_EQ(c->rule_id, "protected:127.0.0.0/8");
  EXPECT_EQ(c->protocol, "tcp");
  EXPECT_NE(s->firstDenial().find("refused by protected range 127.0.0.0/8"), std::string::npos)
      << s->firstDenial();

  // allowlist with a rule for this port: allowed, and the event names rule 1.
  ASSERT_TRUE(a->updateNetwork(policy(
      NetMode::kAllowlist, {"deny udp 127.0.0.1", "allow tcp 127.0.0.1 " + std::to_string(port)})));
  a->beginExecution("allowlist-hit");
  EXPECT_EQ(runIn(cg, [port] { return connectTo(AF_INET, "127.0.0.1", port); }), 0);
  // The same allowlist misses another port: refused.
  EXPECT_EQ(runIn(cg, [other_port] { return connectTo(AF_INET, "127.0.0.1", other_port); }), EPERM);
  s = a->endExecution();
  ASSERT_TRUE(s);
  c = findConnection(*s, "127.0.0.1", port);
  ASSERT_NE(c, nullptr) << dump(*s);
  EXPECT_TRUE(c->allowed);
  EXPECT_EQ(c->rule_id, "rule:1");
  EXPECT_NE(c->rule_text.find("allow tcp 127.0.0.1/32"), std::string::npos) << c->rule_text;
  c = findConnection(*s, "127.0.0.1", other_port);
  ASSERT_NE(c, nullptr) << dump(*s);
  EXPECT_FALSE(c->allowed);

  // none: refused.
  ASSERT_TRUE(a->updateNetwork(policy(NetMode::kNone)));
  a->beginExecution("none");
  EXPECT_EQ(runIn(cg, [port] { return connectTo(AF_INET, "127.0.0.1", port); }), EPERM);
  s = a->endExecution();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->connections_denied, 1u) << dump(*s);
}

TEST_F(Audit, HostLoopbackUdpAndIpv6AreDecidedToo) {
  auto cg = makeCgroup();
  Server udp(AF_INET, "127.0.0.1", SOCK_DGRAM);
  Server udp6(AF_INET6, "::1", SOCK_DGRAM);
  Server tcp6(AF_INET6, "::1");
  uint16_t p4 = udp.port, p6 = udp6.port, t6 = tcp6.port;
  auto a = attach(cg, policy(NetMode::kOpen));
  ASSERT_TRUE(a);
  a->beginExecution("refused");
  EXPECT_EQ(runIn(cg, [p4] { return sendTo(AF_INET, "127.0.0.1", p4); }), EPERM);
  EXPECT_EQ(runIn(cg, [p6] { return sendTo(AF_INET6, "::1", p6); }), EPERM);
  EXPECT_EQ(runIn(cg, [t6] { return connectTo(AF_INET6, "::1", t6); }), EPERM);
  // A v4-mapped address is decided as the IPv4 address it reaches.
  EXPECT_EQ(runIn(cg, [p4] { return sendTo(AF_INET6, "::ffff:127.0.0.1", p4); }), EPERM);
  // A connected UDP socket goes through connect4.
  EXPECT_EQ(runIn(cg, [p4] { return connectTo(AF_INET, "127.0.0.1", p4, SOCK_DGRAM); }), EPERM);
  auto s = a->endExecution();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->connections_denied, 5u) << dump(*s);
  auto* c = findConnection(*s, "::1", p6);
  ASSERT_NE(c, nullptr) << dump(*s);
  EXPECT_EQ(c->protocol, "udp");
  EXPECT_EQ(c->rule_id, "protected:::1/128");
  EXPECT_FALSE(udp.received(50)) << "a refused datagram never arrives";

  ASSERT_TRUE(a->updateNetwork(
      policy(NetMode::kAllowlist, {"allow udp 127.0.0.1 " + std::to_string(p4), "allow any ::1"})));
  a->beginExecution("allowed");
  EXPECT_EQ(runIn(cg, [p4] { return sendTo(AF_INET, "127.0.0.1", p4, 5); }), 0);
  EXPECT_EQ(runIn(cg, [p6] { return sendTo(AF_INET6, "::1", p6); }), 0);
  EXPECT_EQ(runIn(cg, [t6] { return connectTo(AF_INET6, "::1", t6); }), 0);
  s = a->endExecution();
  ASSERT_TRUE(s);
  EXPECT_TRUE(udp.received());
  EXPECT_TRUE(udp6.received());
  c = findConnection(*s, "127.0.0.1", p4);
  ASSERT_NE(c, nullptr) << dump(*s);
  EXPECT_TRUE(c->allowed);
  EXPECT_EQ(c->rule_id, "rule:0");
  EXPECT_EQ(c->count, 1u) << "allowed datagrams to one destination are recorded once";
  c = findConnection(*s, "::1", t6);
  ASSERT_NE(c, nullptr) << dump(*s);
  EXPECT_EQ(c->rule_id, "rule:1");
}

TEST_F(Audit, ServerInATestNamespaceIsReachableOnlyWhenAllowed) {
  makeNetworks();
  if (HasFatalFailure()) return;
  Server tcp = serverIn(serverPath(), AF_INET, "198.51.100.2");
  Server tcp6 = serverIn(serverPath(), AF_INET6, "2001:db8::2");
  Server udp = serverIn(serverPath(), AF_INET, "198.51.100.2", SOCK_DGRAM);
  uint16_t pt = tcp.port, p6 = tcp6.port, pu = udp.port;
  auto cg = makeCgroup();
  auto a = attach(cg, policy(NetMode::kOpen));
  ASSERT_TRUE(a);
  int ns = client_fd_;

  a->beginExecution("open");
  EXPECT_EQ(runIn(
                cg, [pt] { return connectTo(AF_INET, "198.51.100.2", pt); }, ns),
            0);
  EXPECT_EQ(runIn(
                cg, [p6] { return connectTo(AF_INET6, "2001:db8::2", p6); }, ns),
            0);
  EXPECT_EQ(runIn(
                cg, [pu] { return sendTo(AF_INET, "198.51.100.2", pu); }, ns),
            0);
  // The sandbox's own loopback is always reachable.
  EXPECT_EQ(
      runIn(
          cg,
          [] {
            int s = ::socket(AF_INET, SOCK_STREAM, 0);
            sockaddr_in a{};
            a.sin_family = AF_INET;
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(s, 1) != 0)
              return 99;
            socklen_t len = sizeof a;
            ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
            return connectTo(AF_INET, "127.0.0.1", ntohs(a.sin_port));
          },
          ns),
      0);
  auto s = a->endExecution();
  ASSERT_TRUE(s);
  EXPECT_TRUE(udp.received());
  auto* c = findConnection(*s, "198.51.100.2", pt);
  ASSERT_NE(c, nullptr) << dump(*s);
  EXPECT_EQ(c->rule_id, "mode:open");
  EXPECT_EQ(s->connections_denied, 0u) << dump(*s);
  bool loopback = false;
  for (const auto& conn : s->connections) loopback = loopback || conn.rule_id == "loopback";
  EXPECT_TRUE(loopback) << dump(*s);

  ASSERT_TRUE(a->updateNetwork(policy(NetMode::kAllowlist, {"allow tcp 203.0.113.0/24 443"})));
  a->beginExecution("allowlist-miss");
  EXPECT_EQ(runIn(
                cg, [pt] { return connectTo(AF_INET, "198.51.100.2", pt); }, ns),
            EPERM);
  EXPECT_EQ(runIn(
                cg, [p6] { return connectTo(AF_INET6, "2001:db8::2", p6); }, ns),
            EPERM);
  EXPECT_EQ(runIn(
                cg, [pu] { return sendTo(AF_INET, "198.51.100.2", pu); }, ns),
            EPERM);
  s = a->endExecution();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->connections_denied, 3u) << dump(*s);
  c = findConnection(*s, "2001:db8::2", p6);
  ASSERT_NE(c, nullptr) << dump(*s);
  EXPECT_EQ(c->rule_id, "mode:allowlist");

  ASSERT_TRUE(a->updateNetwork(policy(NetMode::kNone)));
  a->beginExecution("none");
  EXPECT_EQ(runIn(
                cg, [pt] { return connectTo(AF_INET, "198.51.100.2", pt); }, ns),
            EPERM);
  s = a->endExecution();
  ASSERT_TRUE(s);
  c = findConnection(*s, "198.51.100.2", pt);
  ASSERT_NE(c, nullptr) << dump(*s);
  EXPECT_EQ(c->rule_id, "mode:none");
}

TEST_F(Audit, MetadataAddressesStayUnreachableInOpenMode) {
  makeNetworks();
  if (HasFatalFailure()) return;
  Server meta = serverIn(serverPath(), AF_INET, "169.254.169.254");
  Server meta6 = serverIn(serverPath(), AF_INET6, "fd00:ec2::254");
  uint16_t p = meta.port, p6 = meta6.port;
  auto cg = makeCgroup();
  int ns = client_fd_;
  auto a = attach(cg, policy(NetMode::kOpen));
  ASSERT_TRUE(a);
  a->beginExecution("metadata");
  EXPECT_EQ(runIn(
                cg, [p] { return connectTo(AF_INET, "169.254.169.254", p); }, ns),
            EPERM);
  EXPECT_EQ(runIn(
                cg, [p6] { return connectTo(AF_INET6, "fd00:ec2::254", p6); }, ns),
            EPERM);
  EXPECT_EQ(runIn(
                cg, [p] { return connectTo(AF_INET6, "::ffff:169.254.169.254", p); }, ns),
            EPERM);
  auto s = a->endExecution();
  ASSERT_TRUE(s);
  auto* c = findConnection(*s, "169.254.169.254", p);
  ASSERT_NE(c, nullptr) << dump(*s);
  EXPECT_EQ(c->rule_id, "protected:169.254.169.254/32");
  EXPECT_EQ(c->count, 2u) << "the v4-mapped attempt is the same destination: " << dump(*s);
  c = findConnection(*s, "fd00:ec2::254", p6);
  ASSERT_NE(c, nullptr) << dump(*s);
  EXPECT_EQ(c->rule_id, "protected:fd00:ec2::254/128");

  // Positive control: the address is reachable, so the refusal above was the policy's.
  ASSERT_TRUE(a->updateNetwork(policy(NetMode::kOpen, {"allow tcp 169.254.169.254 *"})));
  EXPECT_EQ(runIn(
                cg, [p] { return connectTo(AF_INET, "169.254.169.254", p); }, ns),
            0);
}

TEST_F(Audit, BytesAreCountedPerExecution) {
  makeNetworks();
  if (HasFatalFailure()) return;
  Server tcp = serverIn(serverPath(), AF_INET, "198.51.100.2");
  uint16_t port = tcp.port;
  auto cg = makeCgroup();
  auto a = attach(cg, policy(NetMode::kOpen));
  ASSERT_TRUE(a);
  std::atomic<size_t> got{0};
  std::thread reader([&] {
    int c = ::accept(tcp.fd, nullptr, nullptr);
    if (c < 0) return;
    char buf[65536];
    for (ssize_t n; (n = ::read(c, buf, sizeof buf)) > 0;) got += static_cast<size_t>(n);
    (void)!::write(c, buf, 1000);  // a reply of 1000 bytes
    ::close(c);
  });
  a->beginExecution("bytes");
  int rc = runIn(
      cg,
      [port] {
        int s = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(port);
        ::inet_pton(AF_INET, "198.51.100.2", &addr.sin_addr);
        if (::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return errno;
        static char chunk[100000];
        size_t sent = 0;
        while (sent < sizeof chunk) {
          ssize_t n = ::write(s, chunk + sent, sizeof chunk - sent);
          if (n <= 0) return 50;
          sent += static_cast<size_t>(n);
        }
        ::shutdown(s, SHUT_WR);
        char buf[2000];
        size_t back = 0;
        for (ssize_t n; (n = ::read(s, buf, sizeof buf)) > 0;) back += static_cast<size_t>(n);
        return back == 1000 ? 0 : 51;
      },
      client_fd_);
  reader.join();
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(got.load(), 100000u);
  auto s = a->endExecution();
  ASSERT_TRUE(s);
  // cgroup_skb sees IP packets: payload plus headers.
  EXPECT_GE(s->bytes_sent, 100000u) << dump(*s);
  EXPECT_LT(s->bytes_sent, 130000u) << dump(*s);
  EXPECT_GE(s->bytes_received, 1000u) << dump(*s);
  EXPECT_GT(s->packets_sent, 0u);
}

TEST_F(Audit, SyscallCountsOnlyWhileASandboxAsks) {
  auto cg = makeCgroup();
  EXPECT_FALSE(engine()->syscallCounterAttached());
  AttachOptions extra;
  extra.count_syscalls = true;
  auto a = attach(cg, policy(NetMode::kNone), extra);
  ASSERT_TRUE(a);
  EXPECT_TRUE(engine()->syscallCounterAttached());
  a->beginExecution("syscalls");
  EXPECT_EQ(runIn(cg,
                  [] {
                    for (int i = 0; i < 20000; ++i) ::getppid();
                    return 0;
                  }),
            0);
  auto s = a->endExecution();
  ASSERT_TRUE(s);
  ASSERT_TRUE(s->syscalls_counted);
  EXPECT_GE(s->syscalls["getppid"], 20000u) << dump(*s);
  EXPECT_TRUE(s->toJson().contains("syscalls"));
  a.reset();
  EXPECT_FALSE(engine()->syscallCounterAttached()) << "the last user detaches the host-wide hook";
}

TEST_F(Audit, AFloodShowsCountedDropsAndFailsClosed) {
  // A one-page ring holds a few dozen events: a burst of refused datagrams overflows it.
  auto small = AuditEngine::load({.ring_bytes = static_cast<uint32_t>(::sysconf(_SC_PAGESIZE)),
                                  .drop_check_interval = std::chrono::milliseconds(20)});
  ASSERT_TRUE(small) << small.error().message();
  auto cg = makeCgroup();
  std::atomic<uint64_t> reported{0};
  AttachOptions o;
  o.cgroup_v2_path = cg.v2Path();
  o.sandbox_id = cg.name();
  o.network = policy(NetMode::kNone);
  o.fail_closed = true;
  o.on_drops = [&](uint64_t d) { reported = d; };
  auto a = (*small)->attach(o);
  ASSERT_TRUE(a) << a.error().message();
  (*a)->beginExecution("flood");
  EXPECT_EQ(runIn(cg, [] { return sendTo(AF_INET, "192.0.2.1", 9, 20000); }), EPERM);
  auto s = (*a)->endExecution();
  ASSERT_TRUE(s);
  EXPECT_GT(s->events_dropped, 0u) << dump(*s);
  EXPECT_EQ(s->connections_denied + s->events_dropped, 20000u)
      << "every refusal is either recorded or counted as dropped: " << dump(*s);
  EXPECT_TRUE(s->failed()) << "fail_closed: drops fail the execution";
  EXPECT_TRUE(s->toJson()["failed"].get<bool>());
  for (int i = 0; i < 50 && reported.load() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_GT(reported.load(), 0u) << "on_drops is told while the execution runs";
}

TEST_F(Audit, WithoutAReaderThreadTheCallerPumpsTheRing) {
  // `airlock run`'s mode: no thread; the caller polls readableFd() and calls pump() while it
  // waits. 2,000 refused datagrams, ten at a time, against a ring of 16 pages
  // (~700 records): it overflows unless someone reads it while the flood runs.
  auto own = AuditEngine::load(
      {.ring_bytes = 16 * static_cast<uint32_t>(::sysconf(_SC_PAGESIZE)), .reader_thread = false});
  ASSERT_TRUE(own) << own.error().message();
  ASSERT_GE((*own)->readableFd(), 0);
  EXPECT_EQ(engine()->readableFd(), -1)
      << "an engine with its own reader thread has nothing for the caller to poll";
  auto cg = makeCgroup();
  AttachOptions o;
  o.cgroup_v2_path = cg.v2Path();
  o.sandbox_id = cg.name();
  o.network = policy(NetMode::kNone);
  auto a = (*own)->attach(o);
  ASSERT_TRUE(a) << a.error().message();
  auto flood = [] {
    for (int i = 0; i < 200; ++i) {
      if (int e = sendTo(AF_INET, "192.0.2.1", 9, 10); e != EPERM) return e;
      ::usleep(500);
    }
    return EPERM;
  };

  // Positive control: nobody pumps, and the ring cannot hold the records.
  (*a)->beginExecution("unpumped");
  ASSERT_EQ(runIn(cg, flood), EPERM);
  auto unpumped = (*a)->endExecution();
  ASSERT_TRUE(unpumped);
  EXPECT_GT(unpumped->events_dropped, 0u) << dump(*unpumped);
  EXPECT_EQ(unpumped->connections_denied + unpumped->events_dropped, 2000u) << dump(*unpumped);

  // The same flood while a caller waits the way AgentClient does.
  (*a)->beginExecution("pumped");
  std::atomic<bool> done{false};
  std::thread caller([&] {
    while (!done.load()) {
      pollfd p{(*own)->readableFd(), POLLIN, 0};
      if (::poll(&p, 1, 10) > 0) (*own)->pump();
    }
  });
  int flooded = runIn(cg, flood);
  done = true;
  caller.join();
  ASSERT_EQ(flooded, EPERM);
  auto pumped = (*a)->endExecution();
  ASSERT_TRUE(pumped);
  EXPECT_EQ(pumped->events_dropped, 0u) << dump(*pumped);
  EXPECT_EQ(pumped->connections_denied, 2000u) << dump(*pumped);
}

TEST_F(Audit, EventsAndExecutionsGoToTheAuditLog) {
  airlock::testing::TempDir dir;
  auto log = AuditLog::open({.path = dir.file("audit.jsonl")});
  ASSERT_TRUE(log);
  auto cg = makeCgroup();
  AttachOptions extra;
  extra.log = log->get();
  extra.tenant = "acme";
  auto a = attach(cg, policy(NetMode::kNone), extra);
  ASSERT_TRUE(a);
  a->beginExecution("ex-log");
  EXPECT_EQ(runIn(cg,
                  [] {
                    connectTo(AF_INET, "192.0.2.1", 80);
                    const char* argv[] = {"true", nullptr};
                    ::execv("/bin/true", const_cast<char**>(argv));
                    return 127;
                  }),
            0);
  ASSERT_TRUE(a->endExecution());
  std::ifstream f(dir.file("audit.jsonl"));
  std::map<std::string, nlohmann::json> by_type;
  for (std::string line; std::getline(f, line);) {
    auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["schema"], kAuditSchemaVersion);
    EXPECT_EQ(j["sandbox"], cg.name());
    EXPECT_EQ(j["tenant"], "acme");
    EXPECT_EQ(j["execution"], "ex-log");
    by_type[j["type"]] = j;
  }
  ASSERT_TRUE(by_type.count("exec"));
  EXPECT_EQ(by_type["exec"]["path"], "/bin/true");
  ASSERT_TRUE(by_type.count("net"));
  EXPECT_EQ(by_type["net"]["verdict"], "deny");
  EXPECT_EQ(by_type["net"]["rule"], "mode:none");
  EXPECT_EQ(by_type["net"]["address"], "192.0.2.1");
  ASSERT_TRUE(by_type.count("execution"));
  EXPECT_EQ(by_type["execution"]["summary"]["connections_denied"], 1);
}

TEST_F(Audit, DetachRemovesEveryAttachment) {
  auto cg = makeCgroup();
  Server server(AF_INET, "127.0.0.1");
  uint16_t port = server.port;
  {
    auto a = attach(cg, policy(NetMode::kNone));
    ASSERT_TRUE(a);
    EXPECT_EQ(runIn(cg, [port] { return connectTo(AF_INET, "127.0.0.1", port); }), EPERM);
    auto twice = engine()->attach({.cgroup_v2_path = cg.v2Path(), .sandbox_id = "again"});
    ASSERT_FALSE(twice);
    EXPECT_NE(twice.error().message().find("already attached"), std::string::npos);
  }
  EXPECT_EQ(runIn(cg, [port] { return connectTo(AF_INET, "127.0.0.1", port); }), 0)
      << "after detach nothing decides for the cgroup";
}

// The programs are attached once, to the directory every sandbox's cgroup sits in: they run for
// every cgroup below it and must decide only for the sandboxes registered with enforcement.
TEST_F(Audit, ProgramsSitOnTheSandboxesParentAndDecideOnlyForEnforcedSandboxes) {
  auto enforced = makeCgroup(), unregistered = makeCgroup(), unenforced = makeCgroup();
  Server server(AF_INET, "127.0.0.1");
  uint16_t port = server.port;
  auto connect = [port] { return connectTo(AF_INET, "127.0.0.1", port); };
  auto a = attach(enforced, policy(NetMode::kNone));
  auto counted = engine()->attach({.cgroup_v2_path = unenforced.v2Path(),
                                   .sandbox_id = unenforced.name(),
                                   .network = std::nullopt});
  ASSERT_TRUE(a);
  ASSERT_TRUE(counted) << counted.error().message();
  EXPECT_FALSE((*counted)->enforcesNetwork());
  EXPECT_EQ(runIn(enforced, connect), EPERM) << "positive control: mode none refuses loopback";
  EXPECT_EQ(runIn(unregistered, connect), 0) << "a cgroup with no sandbox registered was decided";
  (*counted)->beginExecution("counted");
  EXPECT_EQ(runIn(unenforced, connect), 0) << "a sandbox without enforcement was decided";
  auto summary = (*counted)->endExecution();
  ASSERT_TRUE(summary) << summary.error().message();
  EXPECT_GT(summary->packets_sent, 0u) << "its bytes are still counted: " << dump(*summary);
  EXPECT_EQ(summary->connections_allowed + summary->connections_denied, 0u)
      << "nothing is recorded for a sandbox the programs do not decide for: " << dump(*summary);

  ASSERT_FALSE(tool("bpftool").empty());
  const std::string parent = enforced.v2Path().substr(0, enforced.v2Path().rfind('/'));
  auto on_parent = runCommand({tool("bpftool"), "cgroup", "show", parent}, "", 10);
  EXPECT_EQ(on_parent.exit_code, 0) << on_parent.err;
  for (const char* program :
       {"connect4", "connect6", "sendmsg4", "sendmsg6", "count_egress", "count_ingress"})
    EXPECT_NE(on_parent.out.find(program), std::string::npos) << program << "\n" << on_parent.out;
  auto on_sandbox = runCommand({tool("bpftool"), "cgroup", "show", enforced.v2Path()}, "", 10);
  EXPECT_EQ(on_sandbox.exit_code, 0) << on_sandbox.err;
  EXPECT_EQ(on_sandbox.out.find("connect4"), std::string::npos)
      << "programs attached to the sandbox itself: " << on_sandbox.out;
}

// Attached to the v2 root's children's parent, the programs would run for every socket on the
// host: a cgroup directly under the root is refused.
TEST_F(Audit, ACgroupDirectlyUnderTheV2RootIsRefused) {
  const std::string dir = host_.v2_mount + "/airlock-test-top-" + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0) << dir << ": " << std::strerror(errno);
  auto a = engine()->attach({.cgroup_v2_path = dir, .sandbox_id = "top"});
  ::rmdir(dir.c_str());
  ASSERT_FALSE(a);
  EXPECT_NE(a.error().message().find("directly under the cgroup v2 root"), std::string::npos)
      << a.error().message();
}

TEST_F(Audit, AttachRefusesWhatIsNotACgroupV2Directory) {
  auto bad = engine()->attach({.cgroup_v2_path = "/tmp", .sandbox_id = "x"});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("not a cgroup v2 directory"), std::string::npos);
  auto missing = engine()->attach({.cgroup_v2_path = "/sys/fs/cgroup/nope", .sandbox_id = "x"});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message().find("/sys/fs/cgroup/nope"), std::string::npos);
}

// ---- The pinned engine (engine_objects.h): shared by airlock processes through bpffs ----------

// Each test pins under its own root and lock directory, and unpins everything it made.
class AuditPinned : public Audit {
 protected:
  void SetUp() override {
    Audit::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    root_ = "/sys/fs/bpf/airlock-test-" + std::to_string(::getpid());
  }
  void TearDown() override {
    auto gone = unpinUnusedEngines(root_, locks_.path());
    EXPECT_TRUE(gone) << gone.error().message();
    ::rmdir(root_.c_str());
    EXPECT_FALSE(std::filesystem::exists(root_)) << "a test left pins behind";
    Audit::TearDown();
  }
  EngineOptions pinnedOptions() const {
    EngineOptions o;
    o.pin_root = root_;
    o.lock_dir = locks_.path();
    return o;
  }
  std::shared_ptr<AuditEngine> loadPinned() {
    auto e = AuditEngine::load(pinnedOptions());
    EXPECT_TRUE(e) << e.error().message();
    return e ? *e : nullptr;
  }
  // Keys in a pinned map of the engine's version (opened the way another process would).
  size_t keysIn(const AuditEngine& engine, const char* map) const {
    std::string path = root_ + "/" + engine.version() + "/" + map;
    int fd = bpf_obj_get(path.c_str());
    EXPECT_GE(fd, 0) << path;
    size_t n = 0;
    std::vector<uint8_t> key(64), next(64);
    const void* prev = nullptr;
    while (bpf_map_get_next_key(fd, prev, next.data()) == 0) {
      key = next;
      prev = key.data();
      ++n;
    }
    ::close(fd);
    return n;
  }
  std::unique_ptr<SandboxAudit> attachTo(AuditEngine& engine, const sys::SandboxCgroup& cg,
                                         NetPolicy net) {
    auto a = engine.attach(
        {.cgroup_v2_path = cg.v2Path(), .sandbox_id = cg.name(), .network = std::move(net)});
    EXPECT_TRUE(a) << a.error().message();
    return a ? std::move(*a) : nullptr;
  }

  airlock::testing::TempDir locks_;
  std::string root_;
};

TEST_F(AuditPinned, TheSecondEngineOpensThePinsAndEachReadsItsOwnSandboxes) {
  auto first = loadPinned();
  ASSERT_TRUE(first);
  EXPECT_TRUE(first->pinned());
  EXPECT_FALSE(first->openedFromPins()) << "nothing was pinned yet: the first engine loads";
  auto second = loadPinned();
  ASSERT_TRUE(second);
  EXPECT_TRUE(second->openedFromPins());
  EXPECT_EQ(second->version(), first->version());

  auto cg1 = makeCgroup(), cg2 = makeCgroup();
  auto a1 = attachTo(*first, cg1, policy(NetMode::kNone));
  auto a2 = attachTo(*second, cg2, policy(NetMode::kNone));
  ASSERT_TRUE(a1 && a2);
  EXPECT_NE(a1->slot(), a2->slot()) << "two processes' sandboxes share a slot";
  a1->beginExecution("one");
  a2->beginExecution("two");
  auto run = [](const char* word) {
    return [word] {
      const char* argv[] = {"true", word, nullptr};
      ::execv("/bin/true", const_cast<char**>(argv));
      return 127;
    };
  };
  EXPECT_EQ(runIn(cg1, run("first-engine")), 0);
  EXPECT_EQ(runIn(cg2, run("second-engine")), 0);
  // The shared policy decides for both: loopback of the host is refused in mode none.
  Server server(AF_INET, "127.0.0.1");
  uint16_t port = server.port;
  EXPECT_EQ(runIn(cg2, [port] { return connectTo(AF_INET, "127.0.0.1", port); }), EPERM);
  auto s1 = a1->endExecution();
  auto s2 = a2->endExecution();
  ASSERT_TRUE(s1 && s2);
  std::string d1 = dump(*s1), d2 = dump(*s2);
  EXPECT_NE(d1.find("first-engine"), std::string::npos) << d1;
  EXPECT_EQ(d1.find("second-engine"), std::string::npos)
      << "an event reached the wrong process: " << d1;
  EXPECT_NE(d2.find("second-engine"), std::string::npos) << d2;
  EXPECT_EQ(d2.find("first-engine"), std::string::npos) << d2;
  EXPECT_EQ(s2->connections_denied, 1u) << d2;
}

// A process killed with -9 leaves its sandbox's cgroup entry, rules and slot state in the shared
// maps. The next process to attach that cgroup (a restarted serve adopting the sandbox) purges
// them; a live owner's cgroup is refused.
TEST_F(AuditPinned, ADeadProcesssSandboxCanBeAttachedAgainAndItsRulesAreGone) {
  auto live = loadPinned();  // pins the version, so the child only opens it
  ASSERT_TRUE(live);
  auto cg = makeCgroup();
  int ready[2];
  ASSERT_EQ(::pipe2(ready, O_CLOEXEC), 0);
  pid_t child = ::fork();
  if (child == 0) {
    auto e = AuditEngine::load(pinnedOptions());
    if (!e) ::_exit(2);
    auto a = (*e)->attach({.cgroup_v2_path = cg.v2Path(),
                           .sandbox_id = "doomed",
                           .network = policy(NetMode::kAllowlist, {"allow tcp 203.0.113.0/24 443",
                                                                   "deny udp 198.51.100.7 53"})});
    if (!a) ::_exit(3);
    char c = 'r';
    (void)!::write(ready[1], &c, 1);
    ::pause();
    ::_exit(0);
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1) << "the child could not attach";
  ::close(ready[0]);
  // While the owner lives, its cgroup is its own.
  auto refused = live->attach({.cgroup_v2_path = cg.v2Path(), .sandbox_id = "thief"});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message().find("already attached"), std::string::npos)
      << refused.error().message();
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  EXPECT_EQ(keysIn(*live, "rules_v4"), 2u) << "positive control: the dead process's rules remain";
  EXPECT_EQ(keysIn(*live, "audited_cgroups"), 1u);

  auto adopted = attachTo(*live, cg, policy(NetMode::kNone));
  ASSERT_TRUE(adopted) << "the dead process's cgroup could not be attached again";
  EXPECT_EQ(keysIn(*live, "rules_v4"), 0u) << "the dead process's rules were not purged";
  EXPECT_EQ(keysIn(*live, "audited_cgroups"), 1u);
  Server server(AF_INET, "127.0.0.1");
  uint16_t port = server.port;
  EXPECT_EQ(runIn(cg, [port] { return connectTo(AF_INET, "127.0.0.1", port); }), EPERM);
  adopted.reset();
  EXPECT_EQ(keysIn(*live, "audited_cgroups"), 0u);
}

TEST_F(AuditPinned, VersionsNoProcessUsesAreUnpinned) {
  // A version of an older airlock: one pinned map, and a process holding its users lock.
  ASSERT_EQ(::mkdir(root_.c_str(), 0700) == 0 || errno == EEXIST, true);
  const std::string old_dir = root_ + "/0000000000000000";
  ASSERT_EQ(::mkdir(old_dir.c_str(), 0700), 0);
  int map = bpf_map_create(BPF_MAP_TYPE_ARRAY, "old", 4, 4, 1, nullptr);
  ASSERT_GE(map, 0);
  ASSERT_EQ(bpf_obj_pin(map, (old_dir + "/slot_config").c_str()), 0);
  ::close(map);
  int users =
      ::open(locks_.file("0000000000000000.users").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(users, 0);
  ASSERT_EQ(::flock(users, LOCK_SH), 0);

  auto engine = loadPinned();  // loads a new version: unpins what nobody uses
  ASSERT_TRUE(engine);
  EXPECT_TRUE(std::filesystem::exists(old_dir)) << "a version in use was unpinned";
  ::close(users);  // its last user is gone
  auto gone = unpinUnusedEngines(root_, locks_.path(), engine->version());
  ASSERT_TRUE(gone) << gone.error().message();
  EXPECT_EQ(*gone, std::vector<std::string>{"0000000000000000"});
  EXPECT_FALSE(std::filesystem::exists(old_dir));
  // The live engine's version stays while it is used, even when not named as kept.
  auto kept = unpinUnusedEngines(root_, locks_.path());
  ASSERT_TRUE(kept);
  EXPECT_TRUE(kept->empty());
  EXPECT_TRUE(std::filesystem::exists(root_ + "/" + engine->version()));
  engine.reset();
  // TearDown unpins it: its exec hook goes with the pin.
}

// A pinned engine's links on the parent are pinned too: they outlive every process, and when the
// parent is removed and made again (a new cgroup id) the next process attaches them anew. The
// test uses a parent of its own, which it can remove; the shared one may hold other sandboxes.
TEST_F(AuditPinned, TheMostRecentlyUsedOtherVersionStaysPinned) {
  // Two versions of other airlocks, neither in use; B was used after A. A load of this version
  // unpins A and keeps B, so two versions taking turns do not unpin each other's engine.
  ASSERT_EQ(::mkdir(root_.c_str(), 0700) == 0 || errno == EEXIST, true);
  auto pinOld = [&](const std::string& version, time_t used) {
    const std::string dir = root_ + "/" + version;
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    int map = bpf_map_create(BPF_MAP_TYPE_ARRAY, "old", 4, 4, 1, nullptr);
    ASSERT_GE(map, 0);
    ASSERT_EQ(bpf_obj_pin(map, (dir + "/slot_config").c_str()), 0);
    ::close(map);
    const std::string users = locks_.file(version + ".users");
    int fd = ::open(users.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    const timespec times[2] = {{used, 0}, {used, 0}};
    ASSERT_EQ(::futimens(fd, times), 0);
    ::close(fd);
  };
  const time_t now = ::time(nullptr);
  pinOld("00000000000000aa", now - 3600);
  pinOld("00000000000000bb", now - 60);

  auto engine = loadPinned();
  ASSERT_TRUE(engine);
  EXPECT_FALSE(std::filesystem::exists(root_ + "/00000000000000aa"))
      << "an older unused version stayed";
  EXPECT_TRUE(std::filesystem::exists(root_ + "/00000000000000bb"))
      << "the most recently used other version was unpinned";
  // `airlock audit unload` keeps nothing that is unused.
  auto gone = unpinUnusedEngines(root_, locks_.path());
  ASSERT_TRUE(gone) << gone.error().message();
  EXPECT_EQ(*gone, std::vector<std::string>{"00000000000000bb"});
  EXPECT_TRUE(std::filesystem::exists(root_ + "/" + engine->version())) << "in use";
  engine.reset();
}

TEST_F(AuditPinned, TheParentsLinksArePinnedAndARecreatedParentGetsThemAgain) {
  const std::string parent = host_.v2_mount + "/airlock-test-parent-" + std::to_string(::getpid());
  const std::string child = parent + "/sandbox";
  auto make = [&] {
    return ::mkdir(parent.c_str(), 0755) == 0 && ::mkdir(child.c_str(), 0755) == 0;
  };
  auto remove = [&] {
    ::rmdir(child.c_str());
    ::rmdir(parent.c_str());
  };
  auto idOf = [](const std::string& dir) {
    struct stat st {};
    return ::stat(dir.c_str(), &st) == 0 ? uint64_t{st.st_ino} : 0;
  };
  Server server(AF_INET, "127.0.0.1");
  uint16_t port = server.port;
  auto connect = [port] { return connectTo(AF_INET, "127.0.0.1", port); };
  auto pinsOf = [&](const std::string& version, uint64_t id) {
    char hex[17];
    std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(id));
    const std::string prefix = std::string("parent-") + hex + "-";
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(root_ + "/" + version))
      if (e.path().filename().string().starts_with(prefix)) ++n;
    return n;
  };
  ASSERT_TRUE(make()) << parent << ": " << std::strerror(errno);
  std::string version;
  {
    auto engine = loadPinned();
    ASSERT_TRUE(engine);
    version = engine->version();
    auto a = engine->attach(
        {.cgroup_v2_path = child, .sandbox_id = "first", .network = policy(NetMode::kNone)});
    ASSERT_TRUE(a) << a.error().message();
    EXPECT_EQ(runInDir(child, connect), EPERM) << "positive control: mode none refuses loopback";
    EXPECT_EQ(pinsOf(version, idOf(parent)), 6);
  }
  // No process holds the links now: the pins keep them on the parent.
  auto shown = runCommand({tool("bpftool"), "cgroup", "show", parent}, "", 10);
  EXPECT_NE(shown.out.find("connect4"), std::string::npos) << shown.out << shown.err;

  remove();
  ASSERT_TRUE(make()) << parent << ": " << std::strerror(errno);
  {
    auto engine = loadPinned();
    ASSERT_TRUE(engine);
    auto a = engine->attach(
        {.cgroup_v2_path = child, .sandbox_id = "second", .network = policy(NetMode::kNone)});
    ASSERT_TRUE(a) << a.error().message();
    EXPECT_EQ(pinsOf(version, idOf(parent)), 6);
    EXPECT_EQ(runInDir(child, connect), EPERM) << "the recreated parent got no programs";
  }
  remove();
}

}  // namespace
}  // namespace airlock::audit
