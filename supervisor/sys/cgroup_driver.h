// Private to the cgroup layer: file helpers (cgroup_fs.cc), the limits' controllers
// (cgroup_host.cc) and the per-version drivers behind cgroup.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "supervisor/sys/cgroup.h"

namespace airlock::sys::cgroup_detail {

using Clock = std::chrono::steady_clock;

// Control files are written without O_CREAT: a missing file is an error naming it.
Result<> writeControl(const std::string& path, std::string_view value);
Result<std::string> readControl(const std::string& path);
bool fileExists(const std::string& path);
// "key value" lines (memory.events, cpu.stat, memory.oom_control): the value of `key`.
std::optional<uint64_t> keyedValue(std::string_view text, std::string_view key);
std::optional<uint64_t> parseU64(std::string_view text);

// mkdir that tolerates EEXIST (for the shared airlock/ parent).
Result<> ensureDir(const std::string& path);
// mkdir of a sandbox directory (EEXIST is an error), then the fake kernel's population.
Result<> makeCgroupDir(const std::string& path, const CgroupFakeKernel* fake);

// Every pid in cgroup.procs of dir and of its descendants.
Result<std::vector<pid_t>> listProcsRecursive(const std::string& dir);
// SIGKILLs what listProcsRecursive returns, a few rounds until nothing new appears.
Result<> killLoop(const std::vector<std::string>& dirs);
// Polls until no process is left in dir's subtree (cgroup.procs), re-killing as it goes.
Result<> waitProcsEmpty(const std::string& dir, Clock::time_point deadline);
// rmdir of dir's subtree, children first, retrying EBUSY with backoff until the deadline.
Result<> removeTree(const std::string& dir, Clock::time_point deadline,
                    const CgroupFakeKernel* fake);

// CgroupLimits' three limits by index (0 memory, 1 pids, 2 cpu): the controller that enforces
// each, and whether it is set.
const char* controllerForLimit(int i);
bool limitSet(const CgroupLimits& l, int i);

// Sleeps with exponential backoff starting at 50 µs, capped at 5 ms.
class Backoff {
 public:
  void wait();

 private:
  std::chrono::microseconds next_{50};
};

namespace v1 {
// Writes the limit the controller enforces into dir (memory: limit then memsw; cpu: period then
// quota; pids: pids.max).
Result<> applyLimit(const std::string& dir, std::string_view controller,
                    const CgroupLimits& limits);
void readStats(const std::string& memory_dir, const std::string& cpuacct_dir,
               const std::string& pids_dir, CgroupStats& stats);
// Freezes with the freezer hierarchy when one is given, kills everything, thaws.
Result<> killAll(const std::vector<std::string>& dirs, const std::string& freezer_dir);
}  // namespace v1

namespace v2 {
// Enables the controllers in cgroup.subtree_control of root and root/airlock.
Result<> enableControllers(const std::string& mount, const std::set<std::string>& controllers);
Result<> applyLimit(const std::string& dir, std::string_view controller,
                    const CgroupLimits& limits);
void readStats(const std::string& dir, const std::set<std::string>& controllers,
               CgroupStats& stats);
Result<> killAll(const std::string& dir);
// Waits for "populated 0" in cgroup.events, sleeping in poll(2) on the file.
Result<> waitUnpopulated(const std::string& dir, Clock::time_point deadline);
// Whether an eBPF cgroup_skb egress program is attached to `dir` itself: the audit engine's,
// attached once to the sandboxes' parent for all of them (supervisor/audit/engine_objects.h).
bool carriesEnginePrograms(const std::string& dir);
}  // namespace v2

}  // namespace airlock::sys::cgroup_detail
