// One cgroup layer over cgroup v1, v2 and hybrid hosts.
//
// Every sandbox gets <hierarchy>/airlock/<name>: always in the v2 hierarchy when it is mounted (its
// id scopes eBPF; cgroup.kill and CLONE_INTO_CGROUP work there) and, for each limit, in the
// hierarchy that owns the controller (v2 when it has it, else v1). The last sandbox out removes
// the shared airlock/ parents, except the v2 one while the pinned audit engine's programs are
// attached to it (docs/audit.md). Drivers: cgroup_v1.cc and cgroup_v2.cc; detection:
// cgroup_host.cc; the sandbox handle: cgroup.cc; cgroupfs helpers: cgroup_fs.cc.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/result.h"
#include "airlock/unique_fd.h"

namespace airlock::sys {

// 0 = unlimited.
struct CgroupLimits {
  uint64_t memory_bytes = 0;  // RAM; swap is capped at 0 where the host allows it
  uint32_t pids = 0;          // tasks (processes and threads)
  uint32_t cpu_percent = 0;   // percent of one CPU per 100 ms period; 200 = two CPUs
};

struct CgroupStats {
  uint64_t memory_peak_bytes = 0;
  uint64_t cpu_usage_ns = 0;
  uint64_t oom_kills = 0;
  uint32_t pids_peak_or_current = 0;
};

enum class CgroupLayout { kNone, kV1, kV2, kHybrid };

// Stand-ins for what the kernel does on mkdir/rmdir in cgroupfs, so unit tests can run the drivers
// against a plain directory tree. Null in production.
struct CgroupFakeKernel {
  // Called after the driver created a cgroup directory: create the control files there.
  std::function<void(const std::string& dir)> after_mkdir;
  // Replaces rmdir(2) of a cgroup directory: return 0 or -1 with errno set.
  std::function<int(const std::string& dir)> rmdir;
};

struct CgroupHost {
  CgroupLayout layout = CgroupLayout::kNone;
  std::string v2_mount;                                 // "" if none
  std::map<std::string, std::string> v1_mounts;         // controller -> mount point
  std::set<std::string> v2_controllers;                 // the v2 root's cgroup.controllers
  std::shared_ptr<const CgroupFakeKernel> fake_kernel;  // tests only

  // Whether the v2 hierarchy offers `controller` (memory, pids, cpu, ...).
  bool v2_has(std::string_view controller) const;

  // Reads mountinfo, then the v2 root's cgroup.controllers. root_prefix is prepended to every
  // mount point (tests point it at a fake tree).
  static Result<CgroupHost> detect(const std::string& mountinfo = "/proc/self/mountinfo",
                                   const std::string& root_prefix = "");
  // Mount points only (no file reads): v1 controllers from the super options, the first cgroup2.
  static Result<CgroupHost> parseMountinfo(std::string_view text,
                                           const std::string& root_prefix = "");

  // One line per hierarchy, for doctor.
  std::string describe() const;
  // Where each limit would be enforced: {"memory", "v1 /sys/fs/cgroup/memory"} or "unavailable".
  std::map<std::string, std::string> limitPlacement() const;
};

const char* cgroupLayoutName(CgroupLayout layout);

// One sandbox's cgroup across every hierarchy. Move-only; the destructor destroys it.
class SandboxCgroup {
 public:
  // When create() makes the directories of the v1 hierarchies (hybrid and v1 hosts).
  enum class V1Dirs {
    kNow,
    // In attachV1(), which a backend calls between clone and releasing the child: there the
    // mkdirs and limit writes (~0.4 ms on a hybrid host) overlap the child's own setup instead
    // of delaying the clone. `host` must outlive that call.
    kOnAttach,
  };

  // Creates <root>/airlock/<name> in v2 (when mounted) and in each hierarchy that enforces one of
  // the limits, then writes the limits. On error nothing is left behind.
  static Result<SandboxCgroup> create(const CgroupHost& host, const std::string& name,
                                      const CgroupLimits& limits, V1Dirs v1 = V1Dirs::kNow);
  // Takes over existing <root>/airlock/<name> directories (crash recovery). Fails if none exist.
  static Result<SandboxCgroup> adopt(const CgroupHost& host, const std::string& name);

  SandboxCgroup(SandboxCgroup&&) noexcept;
  SandboxCgroup& operator=(SandboxCgroup&&) noexcept;
  SandboxCgroup(const SandboxCgroup&) = delete;
  SandboxCgroup& operator=(const SandboxCgroup&) = delete;
  ~SandboxCgroup();

  // O_DIRECTORY fd of the v2 directory for clone3(CLONE_INTO_CGROUP), or -1. Owned by this object.
  int cloneIntoFd() const;
  // Writes pid to cgroup.procs of every v1 directory (after clone, before the child runs); first
  // makes those directories and writes their limits when create() deferred them.
  Result<> attachV1(pid_t pid);
  // v1 and v2, for children not started with CLONE_INTO_CGROUP.
  Result<> attachAll(pid_t pid);
  Result<CgroupStats> stats() const;
  // SIGKILLs every process: v2 cgroup.kill when available, else freeze + kill over cgroup.procs.
  Result<> killAll() const;
  // killAll, wait until every directory is empty, rmdir everywhere (children first). Idempotent;
  // the error names the directory that would not go.
  Result<> destroy(std::chrono::milliseconds timeout);

  const std::string& name() const { return name_; }
  std::vector<std::string> paths() const;
  const std::string& v2Path() const { return v2_dir_; }
  // Directory that holds `controller` for this sandbox, or "".
  std::string controllerPath(std::string_view controller) const;

 private:
  SandboxCgroup() = default;
  // The v1 half of create(): directories for the limits v2 does not enforce, and without v2
  // cpuacct and freezer ones.
  Result<> makeV1Dirs(const CgroupHost& host, const CgroupLimits& limits);

  std::string name_;
  std::string v2_dir_;                          // "" when v2 is not mounted
  std::set<std::string> v2_controllers_;        // enabled in v2_dir_
  std::map<std::string, std::string> v1_dirs_;  // controller -> dir (dirs may repeat)
  std::shared_ptr<const CgroupFakeKernel> fake_;
  UniqueFd v2_fd_;
  // Set while create() deferred the v1 directories to attachV1().
  const CgroupHost* pending_v1_host_ = nullptr;
  CgroupLimits pending_v1_limits_;
  bool destroyed_ = false;
};

// Removes the v2 hierarchy's shared airlock/ parent when it is empty and no audit engine's
// programs are attached to it any more (an engine that let go of it: `airlock audit unload`, a
// private engine's end). Best effort: a parent still in use stays. Links released by unpinning
// are detached by a kernel worker a moment later: `detach_wait` is how long to wait for that.
void removeUnusedV2Parent(const std::string& v2_parent,
                          std::chrono::milliseconds detach_wait = std::chrono::milliseconds(0));

// Removes leftover <root>/airlock/<name> directories (after a crash): kill, wait, rmdir.
// Only names starting with name_prefix (all when empty). Returns how many sandboxes were removed.
Result<int> reclaimStaleCgroups(const CgroupHost& host, std::chrono::milliseconds timeout,
                                std::string_view name_prefix = {});

}  // namespace airlock::sys
