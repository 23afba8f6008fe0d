#include "supervisor/sandbox/sandbox_usage.h"

#include <sys/statfs.h>

#include <chrono>
#include <ctime>

#include "supervisor/sandbox/live_sandbox.h"
#include "supervisor/sys/cgroup.h"
#include "supervisor/sys/cgroup_driver.h"

namespace airlock::sandbox {

namespace cg = sys::cgroup_detail;

namespace {

// Detected once: the hierarchies do not move while the supervisor runs.
const sys::CgroupHost* cgroupHost() {
  static const auto host = sys::CgroupHost::detect();
  return host ? &*host : nullptr;
}

std::optional<uint64_t> readNumber(const std::string& path) {
  auto t = cg::readControl(path);
  if (!t) return std::nullopt;
  return cg::parseU64(*t);
}

// A limit file: a number, or "max" (v2) / a huge number (v1, "unlimited") meaning none.
std::optional<uint64_t> readLimit(const std::string& path) {
  auto v = readNumber(path);
  if (v && *v >= (uint64_t{1} << 62)) return std::nullopt;
  return v;
}

std::string rfc3339Now() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
  char millis[16];
  std::snprintf(millis, sizeof millis, ".%03dZ", static_cast<int>(ms.count()));
  return std::string(date) + millis;
}

}  // namespace

std::string sandboxCgroupDir(const std::string& id, const std::string& controller) {
  const sys::CgroupHost* host = cgroupHost();
  if (host == nullptr) return "";
  // The layout sys::SandboxCgroup::create makes: <hierarchy>/airlock/<id>.
  if (!host->v2_mount.empty() && (controller == "cpu" || host->v2_has(controller)))
    return host->v2_mount + "/airlock/" + id;
  const std::string v1 = controller == "cpu" ? "cpuacct" : controller;
  auto it = host->v1_mounts.find(v1);
  if (it == host->v1_mounts.end()) return "";
  return it->second + "/airlock/" + id;
}

uint64_t sandboxOomKills(const std::string& id) {
  const std::string dir = sandboxCgroupDir(id, "memory");
  if (dir.empty()) return 0;
  // v2 memory.events; v1 memory.oom_control (oom_kill since Linux 4.13).
  auto t = cg::readControl(dir + "/memory.events");
  if (!t) t = cg::readControl(dir + "/memory.oom_control");
  if (!t) return 0;
  return cg::keyedValue(*t, "oom_kill").value_or(0);
}

SandboxUsage readSandboxUsage(const std::string& id, int pid) {
  SandboxUsage u;
  if (const std::string dir = sandboxCgroupDir(id, "cpu"); !dir.empty()) {
    if (auto t = cg::readControl(dir + "/cpu.stat"); t) {
      if (auto us = cg::keyedValue(*t, "usage_usec"))
        u.cpu_seconds = static_cast<double>(*us) / 1e6;
    } else if (auto ns = readNumber(dir + "/cpuacct.usage")) {  // v1
      u.cpu_seconds = static_cast<double>(*ns) / 1e9;
    }
  }
  if (const std::string dir = sandboxCgroupDir(id, "memory"); !dir.empty()) {
    const bool v2 = cg::fileExists(dir + "/memory.current");
    u.memory_bytes =
        readNumber(dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes")).value_or(0);
    u.memory_peak_bytes = readNumber(dir + (v2 ? "/memory.peak" : "/memory.max_usage_in_bytes"))
                              .value_or(u.memory_bytes);
    u.memory_limit_bytes = readLimit(dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes"));
    u.oom_kills = sandboxOomKills(id);
  }
  if (const std::string dir = sandboxCgroupDir(id, "pids"); !dir.empty()) {
    u.pids = readNumber(dir + "/pids.current").value_or(0);
    u.pids_limit = readLimit(dir + "/pids.max");
  }
  // The workspace is a tmpfs of limits.workspace_mb, or a persistent ext4 image, mounted at
  // /home/user in the sandbox's mount namespace: its filesystem's own count is the disk use.
  if (pid > 0) {
    struct statfs fs {};
    const std::string home = "/proc/" + std::to_string(pid) + "/root/home/user";
    if (::statfs(home.c_str(), &fs) == 0 && fs.f_blocks != 0) {
      const uint64_t block = static_cast<uint64_t>(fs.f_bsize);
      u.disk_bytes = (static_cast<uint64_t>(fs.f_blocks) - fs.f_bfree) * block;
      u.disk_limit_bytes = static_cast<uint64_t>(fs.f_blocks) * block;
    }
  }
  return u;
}

nlohmann::json usageJson(const LiveSandbox& sb, const SandboxUsage& u, uint64_t executions) {
  auto orNull = [](const std::optional<uint64_t>& v) -> nlohmann::json {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  return {{"sandbox_id", sb.id},
          {"cpu_seconds", u.cpu_seconds},
          {"memory_bytes", u.memory_bytes},
          {"memory_peak_bytes", u.memory_peak_bytes},
          {"memory_limit_bytes", orNull(u.memory_limit_bytes)},
          {"pids", u.pids},
          {"pids_limit", orNull(u.pids_limit)},
          {"disk_bytes", u.disk_bytes},
          {"disk_limit_bytes", orNull(u.disk_limit_bytes)},
          {"oom_kills", u.oom_kills},
          {"executions", executions},
          {"uptime_s", static_cast<double>(nowMs() - sb.created_at) / 1000.0},
          {"sampled_at", rfc3339Now()}};
}

}  // namespace airlock::sandbox
