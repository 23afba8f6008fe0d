// Which audit and enforcement hooks this host supports, found by loading and attaching airlock's
// own programs one at a time (for `airlock doctor`). Attachments last microseconds; the cgroup
// ones go to a temporary empty cgroup v2 directory that is removed again.
#pragma once

#include <string>
#include <vector>

namespace airlock::audit {

struct HookSupport {
  std::string hook;  // "cgroup/connect4", "raw_tp/sched_process_exec", ...
  bool ok = false;
  bool used = true;         // false: probed for information only (BPF LSM, fentry)
  std::string detail;       // "loads and attaches" or the kernel's / libbpf's refusal
  std::string consequence;  // what airlock loses without it
};

// v2_mount: where cgroup2 is mounted ("" when it is not: cgroup hooks are reported missing).
std::vector<HookSupport> probeHooks(const std::string& v2_mount);

}  // namespace airlock::audit
