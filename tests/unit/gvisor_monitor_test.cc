// gVisor's runtime monitoring as the gvisor backend reads it (plugins/isolation/gvisor/monitor.h):
// packets built here byte by byte in gVisor's wire format (a header and a protobuf), through a
// real SOCK_SEQPACKET sink with its handshake. The real runsc talks to it in gvisor_tests.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "monitor.h"
#include "test_support.h"

namespace airlock::isolation::gvisor {
namespace {

// Protobuf encoding, just enough to write gVisor's messages.
std::string varint(uint64_t v) {
  std::string out;
  do {
    uint8_t b = v & 0x7f;
    v >>= 7;
    out.push_back(static_cast<char>(v != 0 ? b | 0x80 : b));
  } while (v != 0);
  return out;
}
std::string num(uint32_t field, uint64_t v) { return varint(field << 3) + varint(v); }
std::string bytes(uint32_t field, const std::string& b) {
  return varint((field << 3) | 2) + varint(b.size()) + b;
}
std::string packet(uint16_t type, uint32_t dropped, const std::string& body) {
  std::string h(8, '\0');
  uint16_t size = 8;
  std::memcpy(h.data(), &size, 2);
  std::memcpy(h.data() + 2, &type, 2);
  std::memcpy(h.data() + 4, &dropped, 4);
  return h + body;
}
std::string context(int32_t tgid, uint32_t euid, const std::string& comm) {
  return bytes(1, num(1, 1700000000123456789ull) + num(2, tgid) + num(4, tgid) +
                      bytes(7, num(2, euid)) + bytes(9, comm));
}
std::string exitOk(int64_t result) { return bytes(2, result != 0 ? num(1, result) : ""); }
std::string exitErr(int64_t err) {
  return bytes(2, num(1, static_cast<uint64_t>(-1)) + num(2, err));
}
std::string sockaddrIn(const char* ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  return std::string(reinterpret_cast<const char*>(&a), sizeof a);
}
std::string sockaddrIn6(const char* ip, uint16_t port) {
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_port = htons(port);
  inet_pton(AF_INET6, ip, &a.sin6_addr);
  return std::string(reinterpret_cast<const char*>(&a), sizeof a);
}

TEST(GvisorMonitor, PodInitConfigNamesTheSinkAndOnlyExitPoints) {
  auto j = nlohmann::json::parse(podInitConfig("/run/x/monitor.sock"));
  EXPECT_EQ(j["trace_session"]["name"], "Default");
  EXPECT_EQ(j["trace_session"]["sinks"][0]["name"], "remote");
  EXPECT_EQ(j["trace_session"]["sinks"][0]["config"]["endpoint"], "/run/x/monitor.sock");
  EXPECT_FALSE(j["trace_session"]["sinks"][0].contains("ignore_setup_error"))
      << "a sandbox must never run unmonitored";
  std::set<std::string> points;
  for (const auto& p : j["trace_session"]["points"]) points.insert(p["name"]);
  EXPECT_EQ(points, (std::set<std::string>{"syscall/execve/exit", "syscall/execveat/exit",
                                           "syscall/socket/exit", "syscall/connect/exit"}));
}

TEST(GvisorMonitor, DecodesExecveWithContextAndCapsItsArguments) {
  std::string body = context(7, 1000, "sh") + exitOk(0) + num(3, 59) +
                     bytes(6, "/usr/bin/python3") + bytes(7, "python3") + bytes(7, "-c") +
                     bytes(7, "print(1)") + num(99, 5) /* unknown: skipped */;
  auto r = decodeRecord(packet(11, 0, body));
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->type, 11);
  EXPECT_EQ(r->tgid, 7);
  EXPECT_EQ(r->euid, 1000u);
  EXPECT_EQ(r->comm, "sh");
  EXPECT_TRUE(r->exit);
  EXPECT_EQ(r->errno_value, 0);
  EXPECT_EQ(r->pathname, "/usr/bin/python3");
  EXPECT_EQ(r->argv, (std::vector<std::string>{"python3", "-c", "print(1)"}));

  std::string many = context(7, 0, "sh") + exitOk(0);
  for (int i = 0; i < 100; ++i) many += bytes(7, std::string(10000, 'a'));
  auto big = decodeRecord(packet(11, 0, many));
  ASSERT_TRUE(big);
  EXPECT_EQ(big->argc, 100u);
  EXPECT_EQ(big->argv.size(), 64u);
  EXPECT_EQ(big->argv[0].size(), 4096u);
}

TEST(GvisorMonitor, MalformedPacketsAreErrorsNotCrashes) {
  EXPECT_FALSE(decodeRecord("abc"));
  std::string bad_header = packet(11, 0, "");
  bad_header[0] = 100;  // header longer than the packet
  EXPECT_FALSE(decodeRecord(bad_header));
  // A length that runs past the end, a varint that never ends, a group wire type.
  EXPECT_FALSE(decodeRecord(packet(11, 0, varint((6 << 3) | 2) + varint(1000) + "x")));
  EXPECT_FALSE(decodeRecord(packet(11, 0, std::string(12, '\xff'))));
  EXPECT_FALSE(decodeRecord(packet(11, 0, varint((6 << 3) | 3))));
  for (int cut = 0; cut < 40; ++cut) {
    std::string body = context(3, 0, "x") + bytes(6, "/bin/true");
    (void)decodeRecord(packet(11, 0, body.substr(0, static_cast<size_t>(cut))));
  }
}

TEST(GvisorMonitor, InetAddresses) {
  uint32_t family = 0;
  uint8_t addr[16];
  uint16_t port = 0;
  ASSERT_TRUE(decodeInetAddress(sockaddrIn("198.51.100.7", 8443), family, addr, port));
  EXPECT_EQ(family, 4u);
  EXPECT_EQ(port, 8443);
  EXPECT_EQ(addr[0], 198);
  EXPECT_EQ(addr[3], 7);
  ASSERT_TRUE(decodeInetAddress(sockaddrIn6("2001:db8::1", 53), family, addr, port));
  EXPECT_EQ(family, 6u);
  EXPECT_EQ(port, 53);
  EXPECT_EQ(addr[0], 0x20);
  EXPECT_EQ(addr[15], 1);
  sockaddr_un u{};
  u.sun_family = AF_UNIX;
  EXPECT_FALSE(
      decodeInetAddress(std::string(reinterpret_cast<char*>(&u), sizeof u), family, addr, port));
  EXPECT_FALSE(decodeInetAddress(sockaddrIn("1.2.3.4", 1).substr(0, 5), family, addr, port));
}

// runsc's side of the sink: connect, handshake, packets.
class FakeRunsc {
 public:
  explicit FakeRunsc(const std::string& path) {
    fd_ = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    ok_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
          ::send(fd_, "\x08\x01", 2, 0) == 2;
  }
  ~FakeRunsc() { ::close(fd_); }
  bool ok() const { return ok_; }
  std::string reply() {
    char buf[16];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  }
  void send(const std::string& p) {
    ASSERT_EQ(::send(fd_, p.data(), p.size(), 0), static_cast<ssize_t>(p.size()));
  }
  void close() {
    ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
};

struct Seen {
  uint32_t kind;
  std::string path;
  std::vector<std::string> argv;
  uint32_t family;
  uint16_t port;
  uint8_t protocol;
  int32_t err;
  uint32_t lost;
  uint32_t pid;
};

TEST(GvisorMonitor, SinkHandshakesThenTurnsPacketsIntoEvents) {
  airlock::testing::TempDir dir;
  auto sink = MonitorSink::listen(dir.file("m.sock"));
  ASSERT_TRUE(sink) << sink.error().message();
  FakeRunsc runsc(dir.file("m.sock"));
  ASSERT_TRUE(runsc.ok());
  ASSERT_TRUE(sink->accept(std::chrono::steady_clock::now() + std::chrono::seconds(5)));
  EXPECT_EQ(runsc.reply(), "\x08\x01");
  EXPECT_TRUE(sink->connected());
  EXPECT_GE(sink->eventsFd(), 0);

  // python3 (tgid 9) opens a UDP and a TCP socket and connects both; a failed exec is not one;
  // a connect through an fd of unknown origin is taken as TCP; AF_UNIX connects are not network.
  runsc.send(packet(
      11, 0,
      context(9, 1000, "sh") + exitOk(0) + bytes(6, "/usr/bin/python3") + bytes(7, "python3")));
  runsc.send(packet(11, 0, context(9, 1000, "sh") + exitErr(2) + bytes(6, "/nope")));
  runsc.send(packet(12, 0,
                    context(9, 1000, "python3") + exitOk(3) + num(4, AF_INET) +
                        num(5, SOCK_DGRAM | SOCK_CLOEXEC)));
  runsc.send(packet(
      12, 0, context(9, 1000, "python3") + exitOk(4) + num(4, AF_INET6) + num(5, SOCK_STREAM)));
  runsc.send(packet(10, 0,
                    context(9, 1000, "python3") + exitOk(0) + num(4, 3) +
                        bytes(6, sockaddrIn("198.51.100.1", 53))));
  runsc.send(packet(10, 0,
                    context(9, 1000, "python3") + exitErr(111) + num(4, 4) +
                        bytes(6, sockaddrIn6("2001:db8::1", 443))));
  runsc.send(packet(10, 0,
                    context(12, 1000, "curl") + exitErr(115) + num(4, 5) +
                        bytes(6, sockaddrIn("203.0.113.9", 80))));
  sockaddr_un u{};
  u.sun_family = AF_UNIX;
  runsc.send(packet(10, 0,
                    context(9, 1000, "python3") + exitOk(0) + num(4, 6) +
                        bytes(6, std::string(reinterpret_cast<char*>(&u), sizeof u))));
  // The sink lost 3 events (its socket was full), then a malformed packet.
  runsc.send(packet(11, 3, context(9, 1000, "sh") + exitOk(0) + bytes(6, "/bin/true")));
  runsc.send(packet(11, 3, varint((6 << 3) | 2) + varint(50)));

  std::vector<Seen> seen;
  auto r = sink->read([&](const airlock_sandbox_event_v1& e) {
    Seen s{e.kind,     e.path ? e.path : "", {},     e.family, e.port,
           e.protocol, e.result_errno,       e.lost, e.pid};
    for (uint32_t i = 0; i < e.argc && e.argv != nullptr; ++i) s.argv.push_back(e.argv[i]);
    seen.push_back(std::move(s));
  });
  ASSERT_TRUE(r) << r.error().message();
  ASSERT_EQ(seen.size(), 6u);
  EXPECT_EQ(seen[0].kind, AIRLOCK_SANDBOX_EVENT_EXEC);
  EXPECT_EQ(seen[0].path, "/usr/bin/python3");
  EXPECT_EQ(seen[0].argv, std::vector<std::string>{"python3"});
  EXPECT_EQ(seen[0].pid, 9u);
  EXPECT_EQ(seen[1].kind, AIRLOCK_SANDBOX_EVENT_CONNECT);
  EXPECT_EQ(seen[1].family, 4u);
  EXPECT_EQ(seen[1].port, 53);
  EXPECT_EQ(seen[1].protocol, 17) << "the socket was UDP";
  EXPECT_EQ(seen[2].family, 6u);
  EXPECT_EQ(seen[2].protocol, 6);
  EXPECT_EQ(seen[2].err, 111);
  EXPECT_EQ(seen[3].protocol, 6) << "unknown socket: TCP";
  EXPECT_EQ(seen[3].err, 115);
  EXPECT_EQ(seen[4].kind, AIRLOCK_SANDBOX_EVENT_EXEC);
  EXPECT_EQ(seen[4].lost, 3u) << "the drops are reported with the next event";
  EXPECT_EQ(seen[5].kind, AIRLOCK_SANDBOX_EVENT_LOST);
  EXPECT_EQ(seen[5].lost, 1u);

  // Nothing waiting: returns at once. runsc gone: EOF, not an error.
  EXPECT_TRUE(sink->read([&](const airlock_sandbox_event_v1&) { ADD_FAILURE(); }));
  runsc.close();
  EXPECT_TRUE(sink->read([&](const airlock_sandbox_event_v1&) { ADD_FAILURE(); }));
}

TEST(GvisorMonitor, AHandshakeThatNeverComesOrIsWrongFails) {
  airlock::testing::TempDir dir;
  auto sink = MonitorSink::listen(dir.file("m.sock"));
  ASSERT_TRUE(sink);
  int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, dir.file("m.sock").c_str(), sizeof a.sun_path - 1);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  auto silent = sink->accept(std::chrono::steady_clock::now() + std::chrono::milliseconds(100));
  ASSERT_FALSE(silent);
  EXPECT_NE(silent.error().message().find("handshake"), std::string::npos);
  ::close(fd);

  auto sink2 = MonitorSink::listen(dir.file("m2.sock"));
  ASSERT_TRUE(sink2);
  fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  std::strncpy(a.sun_path, dir.file("m2.sock").c_str(), sizeof a.sun_path - 1);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::send(fd, "\x08\x00", 2, 0), 2);  // version 0
  auto zero = sink2->accept(std::chrono::steady_clock::now() + std::chrono::seconds(5));
  ASSERT_FALSE(zero);
  EXPECT_NE(zero.error().message().find("version 0"), std::string::npos) << zero.error().message();
  ::close(fd);

  EXPECT_FALSE(MonitorSink::listen("/tmp/" + std::string(120, 'x')));
}

}  // namespace
}  // namespace airlock::isolation::gvisor
