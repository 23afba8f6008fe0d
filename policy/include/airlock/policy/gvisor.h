// The gVisor backend's table of a profile, [profiles.<name>.gvisor] (docs/gvisor.md), and the
// runsc flags an operator may add. Header-only: the gvisor plugin checks its config against the
// same list the policy validator uses.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace airlock::policy {

struct Gvisor {
  std::string runsc = "/usr/bin/runsc";  // absolute path of the runsc binary
  std::string platform = "ptrace";       // runsc --platform: ptrace, systrap or kvm
  // The writable layer over the sandbox's read-write mounts: "none", "memory" (in the sentry's
  // memory, counted against limits.memory_mb) or "disk" (a file in the sandbox's scratch dir).
  std::string overlay = "none";
  std::vector<std::string> flags;  // extra runsc flags, each allowed by gvisorFlagAllowed
};

// Flags an operator may add: a name ("--strace") or a name taking a value ("--dcache="). The
// rest either weaken the sandbox (--network=host, --host-uds, --profile, --net-raw) or are set
// by the backend itself (--root, --platform, --network, --overlay2, --ignore-cgroups).
inline constexpr std::array<std::string_view, 15> kGvisorFlags = {
    // Diagnostics: traces go to runsc's own log, never into the sandbox.
    "--strace", "--strace-syscalls=", "--strace-log-size=", "--watchdog-action=",
    // Performance knobs that move no boundary.
    "--cpu-num-from-quota",
    "--num-network-channels=", "--gso=", "--software-gso=", "--tx-checksum-offload",
    "--rx-checksum-offload", "--dcache=", "--file-access=", "--file-access-mounts=",
    "--ref-leak-mode=", "--net-disconnect-ok"};

inline bool gvisorFlagAllowed(std::string_view flag) {
  for (std::string_view allowed : kGvisorFlags) {
    if (allowed.ends_with('=') ? flag.starts_with(allowed) && flag.size() > allowed.size()
                               : flag == allowed)
      return true;
  }
  return false;
}

// "--strace, --strace-syscalls=VALUE, ...": for error messages.
inline std::string gvisorFlagList() {
  std::string list;
  for (std::string_view allowed : kGvisorFlags) {
    if (!list.empty()) list += ", ";
    list += allowed;
    if (allowed.ends_with('=')) list += "VALUE";
  }
  return list;
}

}  // namespace airlock::policy
