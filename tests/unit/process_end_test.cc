// sys/process_end.h: a sandbox's PID 1 ends at teardown even when nothing else killed it, and
// the wait for it is bounded.
#include "supervisor/sys/process_end.h"

#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <future>

#include <gtest/gtest.h>

namespace airlock::sys {
namespace {

// A child that would run for 1000 s: what PID 1 is when the cgroup's kill did not reach it.
pid_t sleeper() {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sleep", "sleep", "1000", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

TEST(ProcessEnd, APid1NobodyKilledIsKilledAndReapedWithinTheBound) {
  const pid_t pid = sleeper();
  ASSERT_GT(pid, 0);
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  ASSERT_GE(pidfd, 0);
  // The control: the child really runs on until someone ends it.
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), 0);
  // On a thread, so that a wait that never ends fails this test instead of hanging it.
  auto ended = std::async(std::launch::async,
                          [&] { return killAndAwaitExit(pidfd, true, std::chrono::seconds(5)); });
  const auto t0 = std::chrono::steady_clock::now();
  if (ended.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ::kill(pid, SIGKILL);  // unblocks the wait so the test can fail and end
    ended.wait();
    FAIL() << "the wait for PID 1 did not end";
  }
  auto r = ended.get();
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  // Reaped: no zombie left, the pid is no child of ours any more.
  errno = 0;
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
  ::close(pidfd);
}

TEST(ProcessEnd, AnAlreadyExitedPid1IsReapedAndNotAnError) {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ASSERT_GT(pid, 0);
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  ASSERT_GE(pidfd, 0);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT), 0);  // a zombie
  auto r = killAndAwaitExit(pidfd, true, std::chrono::seconds(1));
  EXPECT_TRUE(r) << r.error().message();
  errno = 0;
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
  ::close(pidfd);
}

}  // namespace
}  // namespace airlock::sys
