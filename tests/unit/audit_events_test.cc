// Ring-buffer records → events, and events → the per-execution summary.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cstring>

#include "airlock_wire.h"
#include "supervisor/audit/events.h"
#include "supervisor/audit/summary.h"

namespace airlock::audit {
namespace {

template <typename T>
std::span<const uint8_t> bytes(const T& v) {
  return {reinterpret_cast<const uint8_t*>(&v), sizeof v};
}

airlock_exec_event rawExec(const char* path, std::initializer_list<const char*> args,
                           uint32_t argc) {
  airlock_exec_event raw{};
  raw.header.type = AIRLOCK_EVENT_EXEC;
  raw.header.slot = 3;
  raw.header.pid = 4242;
  raw.header.ns_pid = 2;
  std::strcpy(raw.header.comm, "python3");
  raw.argc = argc;
  std::strcpy(raw.path, path);
  raw.path_len = static_cast<uint16_t>(std::strlen(path) + 1);
  size_t at = 0;
  for (const char* a : args) {
    std::memcpy(raw.argv + at, a, std::strlen(a) + 1);
    at += std::strlen(a) + 1;
  }
  raw.argv_len = static_cast<uint16_t>(at);
  return raw;
}

airlock_net_event rawNet(const char* addr, uint16_t port, bool allowed, uint32_t rule) {
  airlock_net_event raw{};
  raw.header.type = AIRLOCK_EVENT_NET;
  raw.header.slot = 3;
  raw.hook = AIRLOCK_HOOK_CONNECT4;
  raw.family = 2;
  raw.protocol = IPPROTO_TCP;
  raw.port = port;
  raw.verdict = allowed ? AIRLOCK_VERDICT_ALLOW : AIRLOCK_VERDICT_DENY;
  raw.rule = rule;
  if (::inet_pton(AF_INET, addr, raw.addr) != 1) {
    raw.family = 10;
    raw.hook = AIRLOCK_HOOK_CONNECT6;
    EXPECT_EQ(::inet_pton(AF_INET6, addr, raw.addr), 1) << addr;
  }
  return raw;
}

TEST(AuditEvents, ExecDecodesPathArgvAndPids) {
  auto raw = rawExec("/usr/bin/python3", {"python3", "-c", "print(1)"}, 3);
  auto ev = decodeEvent(bytes(raw));
  ASSERT_TRUE(ev) << ev.error().message();
  const auto& e = std::get<ExecEvent>(*ev);
  EXPECT_EQ(e.path, "/usr/bin/python3");
  EXPECT_EQ(e.argv, (std::vector<std::string>{"python3", "-c", "print(1)"}));
  EXPECT_FALSE(e.argv_truncated);
  EXPECT_EQ(e.origin.pid, 4242u);
  EXPECT_EQ(e.origin.ns_pid, 2u);
  EXPECT_EQ(e.origin.comm, "python3");
  EXPECT_EQ(e.origin.slot, 3u);
}

TEST(AuditEvents, ArgvHeadIsFlaggedWhenArgumentsWereLeftOut) {
  auto raw = rawExec("/bin/echo", {"echo", "a"}, 5);
  auto ev = decodeEvent(bytes(raw));
  ASSERT_TRUE(ev);
  EXPECT_TRUE(std::get<ExecEvent>(*ev).argv_truncated);
  // An argument cut by the buffer (no NUL at the end) is kept as far as it goes.
  airlock_exec_event full = rawExec("/bin/x", {}, 1);
  std::memset(full.argv, 'a', sizeof full.argv);
  full.argv_len = sizeof full.argv;
  auto cut = decodeEvent(bytes(full));
  ASSERT_TRUE(cut);
  const auto& e = std::get<ExecEvent>(*cut);
  ASSERT_EQ(e.argv.size(), 1u);
  EXPECT_EQ(e.argv[0].size(), sizeof full.argv);
  EXPECT_TRUE(e.argv_truncated);
}

TEST(AuditEvents, NetDecodesBothFamilies) {
  auto v4 = decodeEvent(bytes(rawNet("10.0.0.1", 443, false, AIRLOCK_RULE_PROTECTED_BASE + 1)));
  ASSERT_TRUE(v4);
  const auto& e4 = std::get<NetEvent>(*v4);
  EXPECT_EQ(e4.address, "10.0.0.1");
  EXPECT_EQ(e4.family, 4);
  EXPECT_EQ(e4.port, 443);
  EXPECT_FALSE(e4.allowed);
  EXPECT_STREQ(hookName(e4.hook), "connect4");
  auto v6 = decodeEvent(bytes(rawNet("fd00:ec2::254", 80, false, 0)));
  ASSERT_TRUE(v6);
  EXPECT_EQ(std::get<NetEvent>(*v6).address, "fd00:ec2::254");
  EXPECT_EQ(std::get<NetEvent>(*v6).family, 6);
}

TEST(AuditEvents, ShortAndUnknownRecordsAreErrors) {
  auto raw = rawExec("/bin/true", {"true"}, 1);
  auto shortened = bytes(raw).subspan(0, sizeof raw - 1);
  auto e = decodeEvent(shortened);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message().find("skeleton and wire header disagree"), std::string::npos);
  raw.header.type = 99;
  ASSERT_FALSE(decodeEvent(bytes(raw)));
  EXPECT_FALSE(decodeEvent(bytes(raw).subspan(0, 8)));
}

TEST(AuditSummary, CountsDeduplicatesAndNamesTheRefusingRule) {
  NetPolicy policy{NetMode::kAllowlist, {*NetRule::parse("allow tcp 192.0.2.0/24 443")}};
  AuditSummary s;
  s.add(std::get<ExecEvent>(*decodeEvent(bytes(rawExec("/bin/sh", {"sh", "-c", "x"}, 3)))));
  auto allowed = std::get<NetEvent>(*decodeEvent(bytes(rawNet("192.0.2.9", 443, true, 0))));
  auto denied = std::get<NetEvent>(
      *decodeEvent(bytes(rawNet("169.254.169.254", 80, false, AIRLOCK_RULE_PROTECTED_BASE + 5))));
  s.add(allowed, policy);
  s.add(allowed, policy);
  s.add(denied, policy);
  EXPECT_EQ(s.processes_started, 1u);
  EXPECT_EQ(s.connections_allowed, 2u);
  EXPECT_EQ(s.connections_denied, 1u);
  ASSERT_EQ(s.connections.size(), 2u);
  EXPECT_EQ(s.connections[0].count, 2u);
  EXPECT_EQ(s.connections[0].rule_id, "rule:0");
  EXPECT_EQ(s.connections[1].rule_id, "protected:169.254.169.254/32");
  EXPECT_NE(s.firstDenial().find("169.254.169.254:80/tcp refused by protected range"),
            std::string::npos)
      << s.firstDenial();
  auto j = s.toJson();
  EXPECT_EQ(j["processes"][0]["argv"][1], "-c");
  EXPECT_EQ(j["connections"][1]["verdict"], "deny");
  EXPECT_EQ(j["connections_denied"], 1);
  EXPECT_FALSE(j.contains("syscalls")) << "syscall counts appear only when they were counted";
  EXPECT_TRUE(j.contains("first_denial"));
}

TEST(AuditSummary, DropsFailTheExecutionOnlyWhenFailClosed) {
  AuditSummary s;
  s.events_dropped = 3;
  EXPECT_FALSE(s.failed());
  s.fail_closed = true;
  EXPECT_TRUE(s.failed());
  EXPECT_EQ(s.toJson()["failed"], true);
  s.events_dropped = 0;
  EXPECT_FALSE(s.failed());
}

TEST(AuditSummary, ListsAreCappedButCountersStayExact) {
  AuditSummary s;
  auto raw = rawExec("/bin/true", {"true"}, 1);
  auto e = std::get<ExecEvent>(*decodeEvent(bytes(raw)));
  for (size_t i = 0; i < kSummaryListCap + 10; ++i) s.add(e);
  EXPECT_EQ(s.processes_started, kSummaryListCap + 10);
  EXPECT_EQ(s.processes.size(), kSummaryListCap);
  EXPECT_TRUE(s.processes_truncated);
}

}  // namespace
}  // namespace airlock::audit
