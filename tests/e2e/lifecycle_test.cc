// What happens to a sandbox when `airlock run` itself is stopped: by a signal it can handle, or
// by kill -9, after which the next run must reclaim everything.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "test_support.h"

extern char** environ;

namespace airlock::testing {
namespace {

// Host pid of the process whose command line contains token, or -1.
pid_t findProcess(const std::string& token) {
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(e.path() / "cmdline");
    std::string cmd((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (cmd.find(token) != std::string::npos && cmd.find("airlock") == std::string::npos)
      return std::stoi(name);
  }
  return -1;
}

pid_t spawnAirlock(const std::vector<std::string>& args) {
  std::vector<std::string> argv{airlockBinary()};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> a;
  for (auto& s : argv) a.push_back(s.data());
  a.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  posix_spawn(&pid, a[0], &fa, nullptr, a.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

pid_t waitForProcess(const std::string& token) {
  for (int i = 0; i < 200; ++i) {
    if (pid_t p = findProcess(token); p > 0) return p;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return -1;
}

class Lifecycle : public ::testing::Test {
 protected:
  void SetUp() override {
    AIRLOCK_REQUIRE_ROOT();
    before_ = snapshotHostResources();
  }
  HostResources before_;
};

TEST_F(Lifecycle, SigtermRemovesTheSandbox) {
  std::string token = "31.4159" + std::to_string(getpid());
  pid_t airlock = spawnAirlock({"run", "--lang", "shell", "-c", "exec sleep " + token});
  ASSERT_GT(airlock, 0);
  pid_t inner = waitForProcess(token);
  ASSERT_GT(inner, 0) << "the sandboxed sleep never appeared";
  EXPECT_NE(snapshotHostResources(), before_) << "probe sees no sandbox while one runs";
  kill(airlock, SIGTERM);
  int status = 0;
  waitpid(airlock, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM);
  EXPECT_EQ(findProcess(token), -1);
  EXPECT_EQ(snapshotHostResources(), before_);
}

TEST_F(Lifecycle, KillNineLeavesNothingAfterTheNextRun) {
  std::string token = "27.1828" + std::to_string(getpid());
  pid_t airlock = spawnAirlock({"run", "--lang", "shell", "-c", "exec sleep " + token});
  ASSERT_GT(airlock, 0);
  ASSERT_GT(waitForProcess(token), 0);
  kill(airlock, SIGKILL);
  waitpid(airlock, nullptr, 0);
  // The agent sees its channel close and kills the sandbox; PID 1's exit ends the namespace.
  for (int i = 0; i < 200 && findProcess(token) > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  EXPECT_EQ(findProcess(token), -1) << "sandboxed process outlived its supervisor";
  auto r = runAirlock({"run", "--lang", "shell", "-c", "true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // The killed run's agent was its child: it is now a zombie of the host's init, which reaps
  // on its own schedule (up to a few seconds here). Wait for that, not for anything of ours.
  for (int i = 0; i < 100 && snapshotHostResources() != before_; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(snapshotHostResources(), before_) << "the orphan's cgroup was not reclaimed";
  // An orphan's lock file is one nobody holds; tests running beside this one hold theirs.
  std::vector<std::string> orphans;
  if (std::filesystem::exists("/run/airlock/sandboxes"))
    for (const auto& e : std::filesystem::directory_iterator("/run/airlock/sandboxes")) {
      if (e.path().extension() != ".lock") continue;
      int fd = ::open(e.path().c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
      if (fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) == 0) orphans.push_back(e.path());
      if (fd >= 0) ::close(fd);
    }
  EXPECT_TRUE(orphans.empty()) << "an orphan's lock file is left: " << orphans.front();
}

}  // namespace
}  // namespace airlock::testing
