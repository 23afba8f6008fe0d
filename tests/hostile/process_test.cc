// Processes and signals (docs/security-tests.md): kill(-1) and pid guessing stay inside, a daemon
// that ignores SIGTERM is gone when the run ends, 10,000 zombies are reaped by the agent.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include "hostile_support.h"

namespace airlock::hostile {
namespace {

using airlock::testing::TempDir;

// Class: Lateral/HostDoS. kill(-1, SIGKILL) and SIGKILL to guessed pids (including the test's and
// the canaries' host pids) reach nothing outside. Canaries: `sleep` as root and as uid 65534,
// children of the test. Control: the test itself can kill them.
TEST_F(HostileTest, Lateral_KillAllStaysInside) {
  const std::string token = uniqueToken();
  pid_t canary_root = spawnBackground({"/bin/sleep", "1000." + token + "1"});
  pid_t canary_nobody = spawnBackground({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                                         "--clear-groups", "/bin/sleep", "1000." + token + "2"});
  ASSERT_GT(canary_root, 0);
  ASSERT_GT(canary_nobody, 0);
  usleep(100000);
  ASSERT_TRUE(processAlive(canary_root) && processAlive(canary_nobody));

  auto run = runSandbox("python", probe("kill_all.py"),
                        {.args = {std::to_string(getpid()), std::to_string(canary_root),
                                  std::to_string(canary_nobody), std::to_string(getppid())}});
  bool root_alive = processAlive(canary_root);
  bool nobody_alive = processAlive(canary_nobody);

  // Control: signals from the test do reach the canaries.
  kill(canary_root, SIGKILL);
  kill(canary_nobody, SIGKILL);
  int st_root = 0, st_nobody = 0;
  ASSERT_EQ(waitpid(canary_root, &st_root, 0), canary_root);
  ASSERT_EQ(waitpid(canary_nobody, &st_nobody, 0), canary_nobody);
  EXPECT_TRUE(WIFSIGNALED(st_root) && WTERMSIG(st_root) == SIGKILL) << "control: root canary";
  EXPECT_TRUE(WIFSIGNALED(st_nobody) && WTERMSIG(st_nobody) == SIGKILL) << "control: canary";

  EXPECT_TRUE(root_alive) << "[Lateral] the root canary died during the sandbox run";
  EXPECT_TRUE(nobody_alive) << "[Lateral] the uid-65534 canary died during the sandbox run";
  expectOutcome(run, "exited", 0);
  auto res = parseProbeJson(run.out(), "sandbox");
  EXPECT_LT(res.value("hits", 1000), 10)
      << "[Lateral] the sandbox could signal many pids: " << run.out();
}

// Class: HostDoS. A double-forked session leader that ignores SIGTERM/SIGHUP is gone once the run
// is over (and the run does not wait for it). Control: the same probe bare leaves it running.
TEST_F(HostileTest, HostDoS_DaemonGoneAfterRun) {
  const std::string code = probe("daemon.py");
  {
    const std::string token = uniqueToken();
    auto bare = runBarePython(code, {token});
    ASSERT_EQ(bare.out, "spawned\n") << bare.err;
    usleep(200000);
    auto found = findProcesses("1000." + token);
    EXPECT_EQ(found.size(), 1u) << "control: the bare daemon is not visible by its token";
    killAndForget(found);
    EXPECT_TRUE(findProcesses("1000." + token).empty());
  }
  const std::string token = uniqueToken();
  auto t0 = std::chrono::steady_clock::now();
  auto run = runSandbox("python", code, {.flags = {"--timeout", "20"}, .args = {token}});
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto left = findProcesses("1000." + token);
  killAndForget(left);  // never leave it behind, even when the case fails
  EXPECT_TRUE(left.empty()) << "[HostDoS] the sandbox daemon survived the run on the host ("
                            << left.size() << " process(es), killed by the test)";
  expectOutcome(run, "exited", 0);
  EXPECT_EQ(run.out(), "spawned\n") << run.describe();
  EXPECT_LT(secs, 15) << "the run waited for the daemon instead of ending with the program";
}

// Class: HostDoS. 10,000 zombies reparented to the sandbox's init at once: the agent reaps them,
// the run completes normally, nothing is left on the host. Control: the probe makes real zombies
// (50, bare, reaped by the host's init).
TEST_F(HostileTest, HostDoS_TenThousandZombiesReaped) {
  const std::string code = probe("zombies.py");
  auto bare = runBarePython(code, {"50"});
  auto bres = parseProbeJson(bare.out, "control");
  ASSERT_EQ(bres.value("zombies_seen", -1), 50) << "control: " << bare.out << bare.err;

  TempDir dir;
  // Generous: 10,000 forks of Python took 58-62 s on a PVM guest, where page-table changes trap
  // to the host, and a 60 s limit failed there. The time is not what is tested.
  // Under gVisor's ptrace platform each fork costs ~15 ms and each live task host threads:
  // 1,000 zombies make the same point there, and in a microVM under emulation (TCG), where
  // every fork's page-table copy is emulated.
  const int n = airlock::testing::underGvisor() || airlock::testing::underMicrovm() ? 1000 : 10000;
  auto policy = writePolicy(dir, "pids = " + std::to_string(n + 2000) + "\ntimeout_s = 150");
  auto run =
      runSandbox("python", code, {.flags = {"--policy", policy}, .args = {std::to_string(n)}});
  expectOutcome(run, "exited", 0);
  auto res = parseProbeJson(run.out(), "sandbox");
  EXPECT_EQ(res.value("forked", -1), n) << run.out();
  EXPECT_GE(res.value("zombies_seen", -1), n - n / 100)
      << "the probe did not hold the zombies: " << run.out();
  EXPECT_EQ(res.value("left_after_reap", -1), 0)
      << "[HostDoS] the sandbox init did not reap orphaned zombies: " << run.out();
}

}  // namespace
}  // namespace airlock::hostile
