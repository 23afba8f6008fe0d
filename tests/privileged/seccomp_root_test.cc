// Positive controls for the seccomp profile: as real root each call succeeds without the filter,
// so the EPERM under the filter is the filter's doing, not a missing privilege.
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>

#include "supervisor/sys/seccomp_filter.h"
#include "test_support.h"

namespace airlock::sys {
namespace {

// errno of `call` in a forked child, with the default filter installed first when `filtered`.
int childErrno(bool filtered, const std::function<long()>& call) {
  auto bpf = compileSeccompFilter({});
  EXPECT_TRUE(bpf);
  pid_t pid = ::fork();
  if (pid == 0) {
    if (filtered) {
      sock_fprog prog{static_cast<unsigned short>(bpf->size() / sizeof(sock_filter)),
                      reinterpret_cast<sock_filter*>(bpf->data())};
      if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ::_exit(250);
      if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) ::_exit(251);
    }
    ::_exit(call() < 0 ? errno : 0);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  EXPECT_TRUE(WIFEXITED(st));
  return WEXITSTATUS(st);
}

TEST(SeccompAsRoot, NamespacesAllowedBareRefusedFiltered) {
  AIRLOCK_REQUIRE_ROOT();
  auto unshare_ns = [] { return static_cast<long>(::unshare(CLONE_NEWNS | CLONE_NEWUSER)); };
  EXPECT_EQ(childErrno(false, unshare_ns), 0) << "positive control";
  EXPECT_EQ(childErrno(true, unshare_ns), EPERM);
  auto clone_ns = [] {
    long pid = ::syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, nullptr, nullptr, nullptr, 0);
    if (pid == 0) ::_exit(0);
    if (pid > 0) ::waitpid(static_cast<pid_t>(pid), nullptr, 0);
    return pid < 0 ? -1L : 0L;
  };
  EXPECT_EQ(childErrno(false, clone_ns), 0) << "positive control";
  EXPECT_EQ(childErrno(true, clone_ns), EPERM);
}

TEST(SeccompAsRoot, DeviceNodesAllowedBareRefusedFiltered) {
  AIRLOCK_REQUIRE_ROOT();
  airlock::testing::TempDir tmp;
  std::string a = tmp.file("null-a"), b = tmp.file("null-b");
  EXPECT_EQ(
      childErrno(
          false,
          [&] { return static_cast<long>(::mknod(a.c_str(), S_IFCHR | 0600, makedev(1, 3))); }),
      0)
      << "positive control";
  EXPECT_EQ(
      childErrno(
          true,
          [&] { return static_cast<long>(::mknod(b.c_str(), S_IFCHR | 0600, makedev(1, 3))); }),
      EPERM);
  EXPECT_EQ(::access(b.c_str(), F_OK), -1);
}

TEST(SeccompAsRoot, MountAllowedBareRefusedFiltered) {
  AIRLOCK_REQUIRE_ROOT();
  auto private_mount = [] {
    // In a private mount namespace of the child only.
    if (::unshare(CLONE_NEWNS) != 0) return -1L;
    return static_cast<long>(::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr));
  };
  EXPECT_EQ(childErrno(false, private_mount), 0) << "positive control";
  EXPECT_EQ(childErrno(true, private_mount), EPERM);
}

}  // namespace
}  // namespace airlock::sys
