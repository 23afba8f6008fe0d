// cgroup v2 driver: the unified hierarchy.
#include <fcntl.h>
#include <linux/bpf.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <sstream>

#include "airlock/unique_fd.h"
#include "supervisor/sys/cgroup_driver.h"

namespace airlock::sys::cgroup_detail::v2 {

namespace {

constexpr uint64_t kCpuPeriodUs = 100000;

Result<> enableIn(const std::string& dir, const std::set<std::string>& controllers) {
  AIRLOCK_TRY_CTX(current, readControl(dir + "/cgroup.subtree_control"), "enable controllers");
  std::set<std::string> have;
  std::istringstream in(current);
  for (std::string c; in >> c;) have.insert(c);
  std::string add;
  for (const auto& c : controllers) {
    if (have.count(c) != 0) continue;
    if (!add.empty()) add += " ";
    add += "+" + c;
  }
  if (add.empty()) return {};
  // Delegates the controllers to children, so airlock/<name> gets their interface files.
  if (auto r = writeControl(dir + "/cgroup.subtree_control", add); !r) {
    return Unexpected(std::move(r.error()).wrap("enable controllers '" + add + "'"));
  }
  return {};
}

}  // namespace

Result<> enableControllers(const std::string& mount, const std::set<std::string>& controllers) {
  if (controllers.empty()) return {};
  if (auto r = enableIn(mount, controllers); !r) return r;
  return enableIn(mount + "/airlock", controllers);
}

Result<> applyLimit(const std::string& dir, std::string_view controller,
                    const CgroupLimits& limits) {
  if (controller == "memory") {
    if (auto r = writeControl(dir + "/memory.max", std::to_string(limits.memory_bytes)); !r) {
      return r;
    }
    std::string swap = dir + "/memory.swap.max";
    if (fileExists(swap)) return writeControl(swap, "0");
    return {};
  }
  if (controller == "pids") return writeControl(dir + "/pids.max", std::to_string(limits.pids));
  if (controller == "cpu") {
    uint64_t quota = uint64_t{limits.cpu_percent} * kCpuPeriodUs / 100;
    return writeControl(dir + "/cpu.max",
                        std::to_string(quota) + " " + std::to_string(kCpuPeriodUs));
  }
  return fail("no v2 limit for controller", std::string(controller));
}

void readStats(const std::string& dir, const std::set<std::string>& controllers,
               CgroupStats& stats) {
  // cpu.stat is a core file in v2: usage is there without the cpu controller.
  if (auto t = readControl(dir + "/cpu.stat"); t) {
    if (auto us = keyedValue(*t, "usage_usec")) stats.cpu_usage_ns = *us * 1000;
  }
  if (controllers.count("memory") != 0) {
    if (auto t = readControl(dir + "/memory.peak"); t) {
      stats.memory_peak_bytes = parseU64(*t).value_or(0);
    }
    if (auto t = readControl(dir + "/memory.events"); t) {
      stats.oom_kills = keyedValue(*t, "oom_kill").value_or(0);
    }
  }
  if (controllers.count("pids") != 0) {
    auto t = readControl(dir + "/pids.peak");
    if (!t) t = readControl(dir + "/pids.current");
    if (t) stats.pids_peak_or_current = static_cast<uint32_t>(parseU64(*t).value_or(0));
  }
}

Result<> killAll(const std::string& dir) {
  // cgroup.kill SIGKILLs the whole subtree atomically, forks in flight included.
  return writeControl(dir + "/cgroup.kill", "1");
}

Result<> waitUnpopulated(const std::string& dir, Clock::time_point deadline) {
  std::string path = dir + "/cgroup.events";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return sysError("open", path);
  char buf[256];
  for (;;) {
    ssize_t n = ::pread(fd.get(), buf, sizeof buf - 1, 0);
    if (n < 0) return sysError("read", path);
    auto populated = keyedValue(std::string_view(buf, static_cast<size_t>(n)), "populated");
    if (!populated) return fail("no 'populated' key", path);
    if (*populated == 0) return {};
    auto now = Clock::now();
    if (now >= deadline) return fail("cgroup still populated after kill", dir);
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
    // kernfs wakes POLLPRI when cgroup.events changes; re-read at least every 10 ms anyway.
    pollfd p{fd.get(), POLLPRI, 0};
    int rc = ::poll(&p, 1, static_cast<int>(std::clamp<long long>(left, 1, 10)));
    if (rc < 0 && errno != EINTR) return sysError("poll", path);
  }
}

bool carriesEnginePrograms(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return false;
  // BPF_PROG_QUERY with no id buffer only counts (the raw call: this layer has no libbpf).
  bpf_attr attr{};
  attr.query.target_fd = static_cast<uint32_t>(fd.get());
  attr.query.attach_type = BPF_CGROUP_INET_EGRESS;
  if (::syscall(__NR_bpf, BPF_PROG_QUERY, &attr, sizeof attr) != 0) return false;
  return attr.query.prog_cnt > 0;
}

}  // namespace airlock::sys::cgroup_detail::v2
