// What an execution looks like from inside: no_new_privs, seccomp, Landlock, rlimits, and (as
// root) the uid drop and capability sets. Each restriction has a positive control.
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>

#include "agent_harness.h"
#include "test_support.h"

namespace airlock::agent::testing {
namespace {

namespace proto = airlock::protocol;
using ::airlock::testing::TempDir;
using ::testing::HasSubstr;

std::string bpf(std::initializer_list<sock_filter> insns) {
  std::string s;
  for (const auto& i : insns) s.append(reinterpret_cast<const char*>(&i), sizeof(i));
  return s;
}

std::string allowAll() { return bpf({BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)}); }

// x86-64 only: mkdir and mkdirat fail with EPERM, everything else is allowed.
std::string denyMkdir() {
  return bpf({
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mkdir, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mkdirat, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
  });
}

ExecResult runIn(const proto::Configure& c, const std::string& script,
                 AgentProcess* reuse = nullptr) {
  AgentProcess local;
  AgentProcess& agent = reuse != nullptr ? *reuse : local;
  auto ok = agent.configure(c);
  EXPECT_EQ(ok.first.type, proto::MsgType::kOk)
      << (ok.first.type == proto::MsgType::kError ? proto::decodeError(ok.second)->message : "");
  return agent.run(2, shell(script));
}

TEST(AgentConfinement, NoNewPrivsAndSeccompAreInForce) {
  auto c = AgentProcess::defaultConfigure();
  c.seccomp_bpf = allowAll();
  auto r = runIn(c, "cat /proc/self/status");
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(procStatusField(r.out, "NoNewPrivs"), "1");
  EXPECT_EQ(procStatusField(r.out, "Seccomp"), "2");
  EXPECT_EQ(procStatusField(r.out, "CapEff"), "0000000000000000");
  EXPECT_EQ(procStatusField(r.out, "CapAmb"), "0000000000000000");
}

TEST(AgentConfinement, SeccompFilterIsEnforced) {
  TempDir dir;
  chmod(dir.path().c_str(), 0777);
  auto c = AgentProcess::defaultConfigure();
  c.writable_paths = {dir.path()};
  auto control = runIn(c, "mkdir " + dir.file("control") + " && echo made");
  ASSERT_TRUE(control.exited);
  EXPECT_EQ(control.out, "made\n") << control.err;

  c.seccomp_bpf = denyMkdir();
  auto r = runIn(c, "mkdir " + dir.file("blocked") + " && echo made");
  ASSERT_TRUE(r.exited);
  EXPECT_NE(r.exited->exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("Operation not permitted"));
  EXPECT_NE(access(dir.file("blocked").c_str(), F_OK), 0);
}

TEST(AgentConfinement, RlimitsAndNoCoreDumps) {
  auto c = AgentProcess::defaultConfigure();
  c.rlimits = {{RLIMIT_NOFILE, 64, 64}};
  auto r = runIn(c, "ulimit -n; ulimit -c");
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.out, "64\n0\n");
}

bool landlockAvailable() {
  long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, 1u /* VERSION */);
  return abi > 0;
}

void expectLandlockConfinesWrites(uint32_t uid, uint32_t gid) {
  TempDir allowed, denied;
  chmod(allowed.path().c_str(), 0777);
  chmod(denied.path().c_str(), 0777);
  auto c = AgentProcess::defaultConfigure();
  c.uid = uid;
  c.gid = gid;
  c.writable_paths = {allowed.path()};
  std::string script = "echo a > " + allowed.file("f") + " && echo allowed-ok; echo d > " +
                       denied.file("f") + " && echo denied-ok";

  c.landlock = false;  // positive control: both writes work without Landlock
  auto control = runIn(c, script);
  ASSERT_TRUE(control.exited);
  EXPECT_EQ(control.out, "allowed-ok\ndenied-ok\n") << control.err;
  unlink(allowed.file("f").c_str());
  unlink(denied.file("f").c_str());

  c.landlock = true;
  auto r = runIn(c, script);
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.out, "allowed-ok\n") << r.err;
  EXPECT_THAT(r.err, HasSubstr("Permission denied"));
  EXPECT_NE(access(denied.file("f").c_str(), F_OK), 0);
}

TEST(AgentConfinement, LandlockConfinesWritesToWritablePaths) {
  AIRLOCK_REQUIRE(landlockAvailable(), "the kernel has no Landlock");
  expectLandlockConfinesWrites(getuid(), getgid());
}

TEST(AgentConfinement, LandlockScopesSignalsAwayFromTheAgent) {
  long abi = syscall(SYS_landlock_create_ruleset, nullptr, 0, 1u);
  AIRLOCK_REQUIRE(abi >= 6, "Landlock ABI " << abi << " has no signal scoping (needs 6)");
  AgentProcess agent;
  std::string probe = "kill -0 " + std::to_string(agent.pid()) + " && echo reached";
  auto c = AgentProcess::defaultConfigure();
  c.landlock = true;
  auto r = runIn(c, probe, &agent);
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.out, "") << "sandboxed code could signal the agent";

  AgentProcess control_agent;
  c.landlock = false;
  auto control = runIn(c, "kill -0 " + std::to_string(control_agent.pid()) + " && echo reached",
                       &control_agent);
  ASSERT_TRUE(control.exited);
  EXPECT_EQ(control.out, "reached\n");
}

TEST(AgentConfinementRoot, DropsToUid1000WithNoCapabilities) {
  AIRLOCK_REQUIRE_ROOT();
  auto c = AgentProcess::defaultConfigure();
  c.uid = 1000;
  c.gid = 1000;
  c.seccomp_bpf = allowAll();
  auto r = runIn(c, "cat /proc/self/status");
  ASSERT_TRUE(r.exited);
  ASSERT_EQ(r.exited->exit_code, 0) << r.err;
  EXPECT_EQ(procStatusField(r.out, "Uid"), "1000\t1000\t1000\t1000");
  EXPECT_EQ(procStatusField(r.out, "Gid"), "1000\t1000\t1000\t1000");
  EXPECT_EQ(procStatusField(r.out, "Groups"), "");
  EXPECT_EQ(procStatusField(r.out, "CapEff"), "0000000000000000");
  EXPECT_EQ(procStatusField(r.out, "CapPrm"), "0000000000000000");
  EXPECT_EQ(procStatusField(r.out, "CapInh"), "0000000000000000");
  EXPECT_EQ(procStatusField(r.out, "CapBnd"), "0000000000000000");
  EXPECT_EQ(procStatusField(r.out, "NoNewPrivs"), "1");
  EXPECT_EQ(procStatusField(r.out, "Seccomp"), "2");
}

TEST(AgentConfinementRoot, Uid0KeepsOnlyKeepCaps) {
  AIRLOCK_REQUIRE_ROOT();
  auto c = AgentProcess::defaultConfigure();
  c.uid = 0;
  c.gid = 0;
  c.keep_caps = 1ull << 10;  // CAP_NET_BIND_SERVICE
  auto r = runIn(c, "cat /proc/self/status");
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(procStatusField(r.out, "CapBnd"), "0000000000000400");
  EXPECT_EQ(procStatusField(r.out, "CapEff"), "0000000000000400");
}

TEST(AgentConfinementRoot, FileOperationsUseTheSandboxUsersPermissions) {
  AIRLOCK_REQUIRE_ROOT();
  TempDir closed, open;
  chmod(closed.path().c_str(), 0755);
  chmod(open.path().c_str(), 0777);
  AgentProcess agent;
  auto c = AgentProcess::defaultConfigure();
  c.uid = 1000;
  c.gid = 1000;
  ASSERT_EQ(agent.configure(c).first.type, proto::MsgType::kOk);

  agent.send(5, proto::FileWrite{closed.file("f"), 0644, "x", true, true});
  auto denied = agent.nextFor(5);
  ASSERT_TRUE(denied);
  ASSERT_EQ(denied->first.type, proto::MsgType::kError);
  EXPECT_EQ(proto::decodeError(denied->second)->errnum, EACCES);

  agent.send(6, proto::FileWrite{open.file("f"), 0644, "x", true, true});
  auto ok = agent.nextFor(6);
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->first.type, proto::MsgType::kOk);
  struct stat st {};
  ASSERT_EQ(stat(open.file("f").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 1000u);
  EXPECT_EQ(st.st_gid, 1000u);

  closed.write("secret", "s", 0600);
  agent.send(7, proto::FileRead{closed.file("secret"), 0});
  auto r = agent.nextFor(7);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->first.type, proto::MsgType::kError);
  EXPECT_EQ(proto::decodeError(r->second)->errnum, EACCES);
}

TEST(AgentConfinementRoot, LandlockAsTheSandboxUser) {
  AIRLOCK_REQUIRE_ROOT();
  AIRLOCK_REQUIRE(landlockAvailable(), "the kernel has no Landlock");
  expectLandlockConfinesWrites(1000, 1000);
}

}  // namespace
}  // namespace airlock::agent::testing
