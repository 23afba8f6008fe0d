#include "proc_mask.h"

#include <sys/mount.h>
#include <sys/stat.h>

#include <set>
#include <string>

namespace airlock::isolation {
namespace {

// Kernel memory, keyrings, magic sysrq and timer/scheduler internals (moby's masked paths).
constexpr const char* kMaskedFiles[] = {
    "kcore", "keys", "sysrq-trigger", "timer_list", "sched_debug", "latency_stats", "timer_stats"};
constexpr const char* kMaskedDirs[] = {"acpi", "scsi"};
// Host-wide tunables; bubblewrap leaves /proc/sys writable (core_pattern!), we do not.
constexpr const char* kReadOnlyDirs[] = {"sys", "bus", "fs", "irq"};

// Which of these /proc entries the kernel has: fixed for the boot, so asked once per process
// instead of 13 lstat calls per sandbox.
bool hostHas(const std::string& name) {
  static const std::set<std::string> present = [] {
    std::set<std::string> out;
    auto probe = [&](const char* n) {
      struct stat st;
      if (::lstat((std::string("/proc/") + n).c_str(), &st) == 0) out.insert(n);
    };
    for (const char* n : kMaskedFiles) probe(n);
    for (const char* n : kMaskedDirs) probe(n);
    for (const char* n : kReadOnlyDirs) probe(n);
    return out;
  }();
  return present.count(name) != 0;
}

}  // namespace

void planProc(const RootLayout& layout, Plan& plan) {
  constexpr Stage s = Stage::kProc;
  const std::string proc = layout.root + "/proc";
  // Needs CAP_SYS_ADMIN over the new pid namespace; the child is its PID 1, so this /proc shows
  // only the sandbox's processes. Must precede pivot_root: the kernel only allows it while a
  // fully visible /proc (the host's) is in this mount namespace.
  plan.mount(s, "proc", proc, MS_NOSUID | MS_NODEV | MS_NOEXEC, "", "/proc");
  for (const char* f : kMaskedFiles) {
    if (hostHas(f)) plan.bind(s, "/dev/null", proc + "/" + f, false, std::string("/proc/") + f);
  }
  for (const char* d : kMaskedDirs) {
    if (hostHas(d))
      plan.mount(s, "tmpfs", proc + "/" + d, MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                 "size=4k,mode=0555", std::string("/proc/") + d);
  }
  for (const char* d : kReadOnlyDirs) {
    if (!hostHas(d)) continue;
    std::string path = proc + "/" + d;
    std::string subject = std::string("/proc/") + d;
    plan.bind(s, path, path, true, subject);
    plan.setAttr(s, path,
                 MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, true,
                 subject);
  }
}

}  // namespace airlock::isolation
