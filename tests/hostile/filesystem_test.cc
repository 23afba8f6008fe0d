// Filesystem and paths (docs/security-tests.md): host secrets are not reachable through absolute
// paths, /proc/<pid>/root, cwd or ../.. walks, even from obfuscated code. Control for each: the
// same probe, bare on the host as root, reads the file.
#include <gtest/gtest.h>
#include <unistd.h>

#include "hostile_support.h"

namespace airlock::hostile {
namespace {

using airlock::testing::readFile;

// The first line of the host's /etc/shadow: it must never appear in any sandbox output.
std::string shadowFirstLine() {
  std::string s = readFile("/etc/shadow");
  return s.substr(0, s.find('\n'));
}

bool refusedRead(const std::string& r) { return r == "ENOENT" || r == "EACCES" || r == "EPERM"; }

// Class: HostLeak. /etc/shadow and every escape route towards the host's copy.
TEST_F(HostileTest, HostLeak_ShadowAndPathEscapes) {
  const std::string secret = shadowFirstLine();
  ASSERT_FALSE(secret.empty()) << "the host has no readable /etc/shadow to protect";
  const std::string code = probe("read_paths.py");
  const std::string test_pid = std::to_string(getpid());
  const std::vector<std::string> paths = {
      "/etc/shadow",
      "/etc/gshadow",
      "/proc/1/root/etc/shadow",
      "/proc/self/root/etc/shadow",
      "/proc/self/cwd/../../../../../etc/shadow",
      "/proc/1/cwd/../../../../etc/shadow",
      "/home/user/../../../../../../etc/shadow",
      "../../../../../../../../etc/shadow",
      "/tmp/../../etc/shadow",
      "/proc/" + test_pid + "/root/etc/shadow",  // the test's host pid, guessed from inside
      "/proc/2/root/etc/shadow",
      "/root/.bash_history",
  };
  // Control: bare, as host root, the probe reads the shadow file through several routes.
  // (/proc/1/root is EACCES here even for root: the host's init holds more capabilities.)
  auto control = runBarePython(code, {"/etc/shadow", "/proc/" + test_pid + "/root/etc/shadow",
                                      "/proc/self/root/etc/shadow", "/tmp/../../etc/shadow"});
  auto cres = parseProbeJson(control.out, "control");
  for (const auto& item : cres.items())
    EXPECT_EQ(item.value(), "OK:" + secret) << "control: bare read of " << item.key();

  auto run = runSandbox("python", code, {.args = paths});
  expectOutcome(run, "exited", 0);
  auto res = parseProbeJson(run.out(), "sandbox");
  for (const auto& p : paths) {
    std::string r = res.value(p, "<missing>");
    if (p.find("shadow") != std::string::npos || p.find("/root/") != std::string::npos) {
      EXPECT_TRUE(refusedRead(r)) << "[HostLeak] " << p << " inside the sandbox: " << r;
    }
  }
  EXPECT_EQ(run.proc.out.find(secret), std::string::npos) << "[HostLeak] host shadow leaked";

  // The same from a shell, with a symlink planted in the workspace.
  auto sh = runSandbox("shell",
                       "ln -s /etc/shadow /home/user/s 2>/dev/null; cat /home/user/s; "
                       "cat /etc/shadow /proc/1/root/etc/shadow; "
                       "cd /home/user && cat ../../../../etc/shadow; echo end");
  expectOutcome(sh, "exited", 0);
  EXPECT_EQ(sh.proc.out.find(secret), std::string::npos) << "[HostLeak] " << sh.describe();
}

// Class: HostLeak. Obfuscated code (base64 → exec) that a reviewer would miss is contained by
// isolation. Control: the same payload bare prints the secret.
TEST_F(HostileTest, HostLeak_ObfuscatedShadowRead) {
  const std::string secret = shadowFirstLine();
  ASSERT_FALSE(secret.empty());
  // base64 of: print(open('/etc/shadow').read())
  const std::string py =
      "import base64\nexec(base64.b64decode('cHJpbnQob3BlbignL2V0Yy9zaGFkb3cnKS5yZWFkKCkp'))\n";
  auto control = runBarePython(py);
  ASSERT_NE(control.out.find(secret), std::string::npos) << "control: " << control.err;

  auto run = runSandbox("python", py);
  expectOutcome(run, "exited", 1);  // PermissionError/FileNotFoundError: an uncaught exception
  EXPECT_EQ(run.proc.out.find(secret), std::string::npos) << "[HostLeak] " << run.describe();

  // base64 of: cat /etc/shadow /proc/1/root/etc/shadow
  const std::string sh =
      "eval \"$(echo Y2F0IC9ldGMvc2hhZG93IC9wcm9jLzEvcm9vdC9ldGMvc2hhZG93 | base64 -d)\"";
  auto bare_sh = airlock::testing::runCommand({"/bin/sh", "-c", sh});
  ASSERT_NE(bare_sh.out.find(secret), std::string::npos) << "control: " << bare_sh.err;
  auto run_sh = runSandbox("shell", sh);
  EXPECT_FALSE(run_sh.proc.timed_out) << run_sh.describe();
  ASSERT_TRUE(run_sh.parsed()) << run_sh.describe();
  EXPECT_EQ(run_sh.status(), "exited") << run_sh.describe();
  EXPECT_NE(run_sh.proc.exit_code, 0) << "cat should fail inside: " << run_sh.describe();
  EXPECT_EQ(run_sh.proc.out.find(secret), std::string::npos) << "[HostLeak] " << run_sh.describe();
}

}  // namespace
}  // namespace airlock::hostile
