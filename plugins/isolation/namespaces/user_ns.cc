#include "user_ns.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include <airlock/unique_fd.h>

namespace airlock::isolation {
namespace {

Result<void> writeProcFile(const std::string& path, const std::string& content) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return sysError("open", path);
  ssize_t n = ::write(fd.get(), content.data(), content.size());
  if (n < 0) return sysError("write(" + content.substr(0, content.size() - 1) + ")", path);
  if (static_cast<size_t>(n) != content.size()) return fail("short write", path);
  return {};
}

}  // namespace

Result<void> writeIdMapsFromParent(pid_t pid, const airlock_sandbox_spec_v1& spec) {
  std::string dir = "/proc/" + std::to_string(pid) + "/";
  std::string count = std::to_string(spec.id_count);
  // Needs CAP_SETUID/CAP_SETGID over the host range: the supervisor is root in the parent ns.
  auto uid = writeProcFile(dir + "uid_map",
                           "0 " + std::to_string(spec.host_uid_base) + " " + count + "\n");
  if (!uid) return uid;
  return writeProcFile(dir + "gid_map",
                       "0 " + std::to_string(spec.host_gid_base) + " " + count + "\n");
}

void planIdentity(Plan& plan) {
  plan.add({.stage = Stage::kIdentity, .kind = StepKind::kSetResGid}, "setresgid", "0");
  plan.add({.stage = Stage::kIdentity, .kind = StepKind::kSetGroups}, "setgroups", "[]");
  plan.add({.stage = Stage::kIdentity, .kind = StepKind::kSetResUid}, "setresuid", "0");
}

int identityInChild(const Step& step) {
  // Raw syscalls: glibc's set*id wrappers broadcast to every thread glibc thinks exists, and
  // after a raw clone3 its thread list is the supervisor's.
  long rc = -1;
  switch (step.kind) {
    case StepKind::kSetResGid:
      rc = ::syscall(SYS_setresgid, 0, 0, 0);
      break;
    case StepKind::kSetGroups:
      // The supervisor's supplementary groups would still grant access to host files.
      rc = ::syscall(SYS_setgroups, 0, nullptr);
      break;
    case StepKind::kSetResUid:
      rc = ::syscall(SYS_setresuid, 0, 0, 0);
      break;
    default:
      return EINVAL;
  }
  return rc == 0 ? 0 : errno;
}

}  // namespace airlock::isolation
