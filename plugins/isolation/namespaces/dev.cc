#include "dev.h"

#include <sys/mount.h>
#include <sys/stat.h>

#include <string>

namespace airlock::isolation {
namespace {

constexpr const char* kDevices[] = {"null", "zero", "full", "random", "urandom", "tty"};

}  // namespace

void planDev(const RootLayout& layout, Plan& plan, RootPart part) {
  constexpr Stage s = Stage::kDev;
  const std::string dev = layout.root + "/dev";
  const bool shared = part != RootPart::kPerSandbox;
  const bool own = part != RootPart::kShared;
  if (shared) {
    plan.mount(s, "tmpfs", dev, MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755", "/dev");
    for (const char* name : kDevices) {
      std::string host = std::string("/dev/") + name;
      struct stat st;
      if (::stat(host.c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) continue;
      plan.mkfile(s, dev + "/" + name, host);
      plan.bind(s, host, dev + "/" + name, false, host);
    }
    plan.mkdir(s, dev + "/pts", 0755, "/dev/pts");
    plan.symlink(s, "pts/ptmx", dev + "/ptmx", "/dev/ptmx");
    plan.mkdir(s, dev + "/shm", 0755, "/dev/shm");
    plan.symlink(s, "/proc/self/fd", dev + "/fd", "/dev/fd");
    plan.symlink(s, "/proc/self/fd/0", dev + "/stdin", "/dev/stdin");
    plan.symlink(s, "/proc/self/fd/1", dev + "/stdout", "/dev/stdout");
    plan.symlink(s, "/proc/self/fd/2", dev + "/stderr", "/dev/stderr");
    plan.setAttr(s, dev, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, false, "/dev");
  }
  if (own) {
    // A private pty instance: the sandbox never sees (or TIOCSTIs into) the host's terminals.
    plan.mount(s, "devpts", dev + "/pts", MS_NOSUID | MS_NOEXEC,
               "newinstance,ptmxmode=0666,mode=0620", "/dev/pts");
    plan.mount(s, "tmpfs", dev + "/shm", MS_NOSUID | MS_NODEV, "size=64m,mode=1777", "/dev/shm");
  }
}

}  // namespace airlock::isolation
