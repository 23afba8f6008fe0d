// The OCI bundle a gVisor sandbox boots from, written into the sandbox's own scratch directory:
//
//   <dir>/config.json   the runtime spec: the agent as the container's process, the mounts
//   <dir>/rootfs/       the root, read-only to the sandbox: mount points, the compat symlinks of
//                       a merged-/usr host (/bin → usr/bin) and the generated /etc files
//
// The root is the same view the namespaces backend builds (the host's system directories
// bound read-only, tmpfs at /home/user and /tmp), made of OCI mounts instead of mount(2) calls.
#pragma once

#include <string>
#include <vector>

#include <airlock/plugin_abi_v1.h>
#include <airlock/result.h>

#include "config.h"

namespace airlock::isolation::gvisor {

// Where the agent is bound inside the sandbox: runsc starts the container's process by path.
inline constexpr const char* kAgentPath = "/.airlock/agent";
// Where the statx compatibility shim is bound, named by the sandbox's /etc/ld.so.preload.
inline constexpr const char* kStatxCompatPath = "/.airlock/statx-compat.so";

struct BundleInputs {
  const airlock_sandbox_spec_v1* spec = nullptr;
  std::string agent_host_path;          // the agent binary on the host
  std::vector<std::string> agent_args;  // after argv[0]
  // compat/statx_compat.c built for this host, or "" (then coreutils' stat calls fail inside).
  std::string statx_compat_host_path;
  // The network namespace the sandbox's netstack takes its interfaces from, as runsc opens it
  // (runsc runs in it: "/proc/self/ns/net"), or "" for a new one with loopback only.
  std::string netns_path;
};

// Writes config.json and rootfs/ into `dir` (an empty directory).
Result<> writeBundle(const BundleInputs& in, const std::string& dir);

// The runtime spec alone, as JSON text (for tests and `runsc` error reports).
Result<std::string> runtimeSpec(const BundleInputs& in);

}  // namespace airlock::isolation::gvisor
