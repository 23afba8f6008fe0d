// cgroup v1 driver: one hierarchy per controller (or co-mounted group).
#include <thread>

#include "supervisor/sys/cgroup_driver.h"

namespace airlock::sys::cgroup_detail::v1 {

namespace {
constexpr uint64_t kCpuPeriodUs = 100000;
}

Result<> applyLimit(const std::string& dir, std::string_view controller,
                    const CgroupLimits& limits) {
  if (controller == "memory") {
    std::string v = std::to_string(limits.memory_bytes);
    if (auto r = writeControl(dir + "/memory.limit_in_bytes", v); !r) return r;
    // memsw counts memory plus swap: equal to the memory limit means no swap. Absent when the
    // kernel runs without swap accounting.
    std::string memsw = dir + "/memory.memsw.limit_in_bytes";
    if (fileExists(memsw)) return writeControl(memsw, v);
    return {};
  }
  if (controller == "pids") return writeControl(dir + "/pids.max", std::to_string(limits.pids));
  if (controller == "cpu") {
    // The period goes first: the kernel checks the quota against the current period.
    if (auto r = writeControl(dir + "/cpu.cfs_period_us", std::to_string(kCpuPeriodUs)); !r) {
      return r;
    }
    uint64_t quota = uint64_t{limits.cpu_percent} * kCpuPeriodUs / 100;
    return writeControl(dir + "/cpu.cfs_quota_us", std::to_string(quota));
  }
  return fail("no v1 limit for controller", std::string(controller));
}

void readStats(const std::string& memory_dir, const std::string& cpuacct_dir,
               const std::string& pids_dir, CgroupStats& stats) {
  if (!memory_dir.empty()) {
    if (auto t = readControl(memory_dir + "/memory.max_usage_in_bytes"); t) {
      stats.memory_peak_bytes = parseU64(*t).value_or(0);
    }
    if (auto t = readControl(memory_dir + "/memory.oom_control"); t) {
      stats.oom_kills = keyedValue(*t, "oom_kill").value_or(0);
    }
  }
  if (!cpuacct_dir.empty()) {
    if (auto t = readControl(cpuacct_dir + "/cpuacct.usage"); t) {
      stats.cpu_usage_ns = parseU64(*t).value_or(0);
    }
  }
  if (!pids_dir.empty()) {
    auto t = readControl(pids_dir + "/pids.peak");
    if (!t) t = readControl(pids_dir + "/pids.current");
    if (t) stats.pids_peak_or_current = static_cast<uint32_t>(parseU64(*t).value_or(0));
  }
}

Result<> killAll(const std::vector<std::string>& dirs, const std::string& freezer_dir) {
  // A frozen group cannot fork between our read of cgroup.procs and the kill.
  bool frozen = false;
  if (!freezer_dir.empty() && writeControl(freezer_dir + "/freezer.state", "FROZEN")) {
    frozen = true;
    Backoff backoff;
    auto deadline = Clock::now() + std::chrono::milliseconds(200);
    while (Clock::now() < deadline) {
      auto s = readControl(freezer_dir + "/freezer.state");
      if (!s || s->starts_with("FROZEN")) break;
      backoff.wait();
    }
  }
  auto r = killLoop(dirs);
  if (frozen) (void)writeControl(freezer_dir + "/freezer.state", "THAWED");
  return r;
}

}  // namespace airlock::sys::cgroup_detail::v1
