// One sandbox's resource use, read from its cgroup and its workspace (GET
// /v1/sandboxes/{id}/metrics, docs/api.md "Metrics").
//
// The cgroup holds every process the backend started for the sandbox: for namespaces its own
// processes, for gVisor the runsc sandbox and gofer, for a microVM the QEMU process (so there
// memory includes the guest's page cache and the VMM itself).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace airlock::sandbox {

struct LiveSandbox;

struct SandboxUsage {
  double cpu_seconds = 0;
  uint64_t memory_bytes = 0;
  uint64_t memory_peak_bytes = 0;              // memory.peak (kernel 5.19+; else the current use)
  std::optional<uint64_t> memory_limit_bytes;  // nullopt: "max" or no memory controller
  uint64_t pids = 0;
  std::optional<uint64_t> pids_limit;
  uint64_t disk_bytes = 0;
  std::optional<uint64_t> disk_limit_bytes;
  uint64_t oom_kills = 0;
};

// The cgroup directory that holds `controller` ("memory", "pids", "cpu") for sandbox `id`, or ""
// when the host has no hierarchy with it.
std::string sandboxCgroupDir(const std::string& id, const std::string& controller);

// What the sandbox's cgroup has seen killed by the OOM killer so far; 0 when unreadable. Cheap
// (one small file): executions read it at their start and end.
uint64_t sandboxOomKills(const std::string& id);

// `pid` is the sandbox's PID 1 as the host sees it: its mount namespace shows /home/user. A
// backend whose workspace lives in a guest kernel (gVisor, microVM) shows no such mount there;
// then the disk fields stay 0 and null.
SandboxUsage readSandboxUsage(const std::string& id, int pid);

// The document of GET /v1/sandboxes/{id}/metrics.
nlohmann::json usageJson(const LiveSandbox& sb, const SandboxUsage& usage, uint64_t executions);

}  // namespace airlock::sandbox
