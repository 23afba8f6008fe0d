// SandboxCgroup: one sandbox's cgroup across the v1 and v2 hierarchies (create, adopt, attach,
// stats, kill, destroy), and the removal of what sandboxes leave behind.
#include "supervisor/sys/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>
#include <thread>

#include "supervisor/sys/cgroup_driver.h"

namespace airlock::sys {

using namespace cgroup_detail;

namespace {

// How often create() re-makes a shared parent that a concurrent destroy() just removed.
constexpr int kParentRetries = 8;

Result<> checkName(const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.size() > 200) {
    return fail("invalid cgroup name", name);
  }
  return {};
}

}  // namespace

Result<SandboxCgroup> SandboxCgroup::create(const CgroupHost& host, const std::string& name,
                                            const CgroupLimits& limits, V1Dirs v1) {
  if (auto r = checkName(name); !r) return Unexpected(r.error());
  SandboxCgroup cg;  // destroys whatever was made if we return early
  cg.name_ = name;
  cg.fake_ = host.fake_kernel;
  const CgroupFakeKernel* fake = host.fake_kernel.get();
  std::string ctx = "create cgroup '" + name + "'";

  std::set<std::string> v2_ctrls;
  if (!host.v2_mount.empty()) {
    for (int i = 0; i < 3; ++i) {
      if (limitSet(limits, i) && host.v2_has(controllerForLimit(i))) {
        v2_ctrls.insert(controllerForLimit(i));
      }
    }
    std::string parent = host.v2_mount + "/airlock";
    std::string dir = parent + "/" + name;
    // The last sandbox to go removes the shared parent (see destroy), so a concurrent create
    // may find it gone between the two mkdirs: make it again and retry.
    for (int attempt = 0;; ++attempt) {
      if (!fileExists(parent)) {
        if (auto r = ensureDir(parent); !r) return Unexpected(std::move(r.error()).wrap(ctx));
        if (fake != nullptr && fake->after_mkdir) fake->after_mkdir(parent);
      }
      if (auto r = v2::enableControllers(host.v2_mount, v2_ctrls); !r) {
        if (r.error().errnum() == ENOENT && attempt < kParentRetries) continue;
        return Unexpected(std::move(r.error()).wrap(ctx));
      }
      auto made = makeCgroupDir(dir, fake);
      if (made) break;
      if (made.error().errnum() != ENOENT || attempt >= kParentRetries)
        return Unexpected(std::move(made.error()).wrap(ctx));
    }
    cg.v2_dir_ = dir;
    cg.v2_controllers_ = v2_ctrls;
    for (const auto& c : v2_ctrls) {
      if (auto r = v2::applyLimit(dir, c, limits); !r) {
        return Unexpected(std::move(r.error()).wrap(ctx));
      }
    }
    // The directory fd is what clone3(CLONE_INTO_CGROUP) takes.
    cg.v2_fd_.reset(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!cg.v2_fd_) return Unexpected(sysError("open", dir).error().wrap(ctx));
  }
  if (v1 == V1Dirs::kOnAttach) {
    cg.pending_v1_host_ = &host;
    cg.pending_v1_limits_ = limits;
    return cg;
  }
  if (auto r = cg.makeV1Dirs(host, limits); !r) return Unexpected(std::move(r.error()).wrap(ctx));
  return cg;
}

Result<> SandboxCgroup::makeV1Dirs(const CgroupHost& host, const CgroupLimits& limits) {
  const CgroupFakeKernel* fake = host.fake_kernel.get();
  auto makeV1 = [&](const std::string& controller) -> Result<std::string> {
    auto it = host.v1_mounts.find(controller);
    if (it == host.v1_mounts.end()) {
      return fail("no cgroup hierarchy offers controller '" + controller + "'", name_);
    }
    const std::string& mount = it->second;
    std::string dir = mount + "/airlock/" + name_;
    if (auto have = v1_dirs_.find(controller); have != v1_dirs_.end()) return have->second;
    std::string parent = mount + "/airlock";
    for (int attempt = 0;; ++attempt) {  // the parent may vanish between mkdirs: see above
      if (!fileExists(parent)) {
        if (auto r = ensureDir(parent); !r) return Unexpected(r.error());
        if (fake != nullptr && fake->after_mkdir) fake->after_mkdir(parent);
      }
      auto made = makeCgroupDir(dir, fake);
      if (made) break;
      if (made.error().errnum() != ENOENT || attempt >= kParentRetries)
        return Unexpected(made.error());
    }
    // Controllers co-mounted on this hierarchy (cpu,cpuacct) share the directory.
    for (const auto& [c, m] : host.v1_mounts) {
      if (m == mount) v1_dirs_[c] = dir;
    }
    return dir;
  };

  for (int i = 0; i < 3; ++i) {
    std::string c = controllerForLimit(i);
    if (!limitSet(limits, i) || v2_controllers_.count(c) != 0) continue;
    auto dir = makeV1(c);
    if (!dir) return Unexpected(dir.error());
    if (auto r = v1::applyLimit(*dir, c, limits); !r) return r;
  }
  if (host.v2_mount.empty()) {
    // Without v2 there is no cpu.stat or cgroup.kill: account in cpuacct, kill via freezer.
    for (const char* c : {"cpuacct", "freezer"}) {
      if (host.v1_mounts.count(c) == 0) continue;
      if (auto dir = makeV1(c); !dir) return Unexpected(dir.error());
    }
  }
  return {};
}

Result<SandboxCgroup> SandboxCgroup::adopt(const CgroupHost& host, const std::string& name) {
  if (auto r = checkName(name); !r) return Unexpected(r.error());
  SandboxCgroup cg;
  cg.name_ = name;
  cg.fake_ = host.fake_kernel;
  if (!host.v2_mount.empty()) {
    std::string dir = host.v2_mount + "/airlock/" + name;
    if (fileExists(dir)) {
      cg.v2_dir_ = dir;
      cg.v2_fd_.reset(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      if (auto ctl = readControl(dir + "/cgroup.controllers"); ctl) {
        std::istringstream in(*ctl);
        std::string c;
        while (in >> c) cg.v2_controllers_.insert(c);
      }
    }
  }
  for (const auto& [c, m] : host.v1_mounts) {
    std::string dir = m + "/airlock/" + name;
    if (fileExists(dir)) cg.v1_dirs_[c] = dir;
  }
  if (cg.v2_dir_.empty() && cg.v1_dirs_.empty()) {
    cg.destroyed_ = true;
    return fail("no cgroup directory to adopt", name);
  }
  return cg;
}

SandboxCgroup::SandboxCgroup(SandboxCgroup&& o) noexcept
    : name_(std::move(o.name_)),
      v2_dir_(std::move(o.v2_dir_)),
      v2_controllers_(std::move(o.v2_controllers_)),
      v1_dirs_(std::move(o.v1_dirs_)),
      fake_(std::move(o.fake_)),
      v2_fd_(std::move(o.v2_fd_)),
      pending_v1_host_(std::exchange(o.pending_v1_host_, nullptr)),
      pending_v1_limits_(o.pending_v1_limits_),
      destroyed_(std::exchange(o.destroyed_, true)) {}

SandboxCgroup& SandboxCgroup::operator=(SandboxCgroup&& o) noexcept {
  if (this != &o) {
    if (!destroyed_) (void)destroy(std::chrono::seconds(5));
    name_ = std::move(o.name_);
    v2_dir_ = std::move(o.v2_dir_);
    v2_controllers_ = std::move(o.v2_controllers_);
    v1_dirs_ = std::move(o.v1_dirs_);
    fake_ = std::move(o.fake_);
    v2_fd_ = std::move(o.v2_fd_);
    pending_v1_host_ = std::exchange(o.pending_v1_host_, nullptr);
    pending_v1_limits_ = o.pending_v1_limits_;
    destroyed_ = std::exchange(o.destroyed_, true);
  }
  return *this;
}

SandboxCgroup::~SandboxCgroup() {
  if (!destroyed_) (void)destroy(std::chrono::seconds(5));
}

int SandboxCgroup::cloneIntoFd() const { return v2_fd_.get(); }

std::vector<std::string> SandboxCgroup::paths() const {
  std::vector<std::string> out;
  if (!v2_dir_.empty()) out.push_back(v2_dir_);
  for (const auto& [c, d] : v1_dirs_) {
    if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
  }
  return out;
}

std::string SandboxCgroup::controllerPath(std::string_view controller) const {
  if (v2_controllers_.count(std::string(controller)) != 0) return v2_dir_;
  if (auto it = v1_dirs_.find(std::string(controller)); it != v1_dirs_.end()) return it->second;
  return {};
}

Result<> SandboxCgroup::attachV1(pid_t pid) {
  if (pending_v1_host_ != nullptr) {
    const CgroupHost* host = std::exchange(pending_v1_host_, nullptr);
    if (auto r = makeV1Dirs(*host, pending_v1_limits_); !r)
      return Unexpected(std::move(r.error()).wrap("create cgroup '" + name_ + "'"));
  }
  std::string p = std::to_string(pid);
  for (const auto& dir : paths()) {
    if (dir == v2_dir_) continue;
    if (auto r = writeControl(dir + "/cgroup.procs", p); !r) {
      return Unexpected(std::move(r.error()).wrap("attach pid " + p + " to cgroup"));
    }
  }
  return {};
}

Result<> SandboxCgroup::attachAll(pid_t pid) {
  if (!v2_dir_.empty()) {
    if (auto r = writeControl(v2_dir_ + "/cgroup.procs", std::to_string(pid)); !r) {
      return Unexpected(std::move(r.error()).wrap("attach pid " + std::to_string(pid)));
    }
  }
  return attachV1(pid);
}

Result<CgroupStats> SandboxCgroup::stats() const {
  if (destroyed_) return fail("cgroup already destroyed", name_);
  CgroupStats s;
  auto v1dir = [&](const char* c) -> std::string {
    auto it = v1_dirs_.find(c);
    return it == v1_dirs_.end() ? std::string() : it->second;
  };
  v1::readStats(v2_controllers_.count("memory") ? std::string() : v1dir("memory"),
                v2_dir_.empty() ? v1dir("cpuacct") : std::string(),
                v2_controllers_.count("pids") ? std::string() : v1dir("pids"), s);
  if (!v2_dir_.empty()) v2::readStats(v2_dir_, v2_controllers_, s);
  return s;
}

Result<> SandboxCgroup::killAll() const {
  if (destroyed_) return {};
  if (!v2_dir_.empty() && fileExists(v2_dir_ + "/cgroup.kill")) {
    return v2::killAll(v2_dir_);
  }
  std::vector<std::string> dirs = paths();
  return v1::killAll(dirs, v1_dirs_.count("freezer") ? v1_dirs_.at("freezer") : std::string());
}

Result<> SandboxCgroup::destroy(std::chrono::milliseconds timeout) {
  if (destroyed_) return {};
  std::string ctx = "destroy cgroup '" + name_ + "'";
  auto deadline = Clock::now() + timeout;
  auto killed = killAll();
  // Every process of the sandbox is in its v2 cgroup and in each v1 one (one css_set holds a
  // task's place in all hierarchies, and sandboxed code cannot move itself), so an unpopulated
  // v2 cgroup says the v1 ones are empty too; they are listed only without that.
  bool all_gone = false;
  if (!v2_dir_.empty()) {
    if (fileExists(v2_dir_ + "/cgroup.events")) {
      if (auto r = v2::waitUnpopulated(v2_dir_, deadline); !r) {
        return Unexpected(std::move(r.error()).wrap(ctx));
      }
      all_gone = true;
    } else if (auto r = waitProcsEmpty(v2_dir_, deadline); !r) {
      return Unexpected(std::move(r.error()).wrap(ctx));
    }
  }
  for (const auto& dir : all_gone ? std::vector<std::string>{} : paths()) {
    if (dir == v2_dir_) continue;
    if (auto r = waitProcsEmpty(dir, deadline); !r) {
      return Unexpected(std::move(r.error()).wrap(ctx));
    }
  }
  v2_fd_.reset();
  for (const auto& dir : paths()) {
    if (auto r = removeTree(dir, deadline, fake_.get()); !r) {
      if (!killed)
        return Unexpected(
            std::move(r.error()).wrap(ctx + " (kill: " + killed.error().message() + ")"));
      return Unexpected(std::move(r.error()).wrap(ctx));
    }
    // The last sandbox out removes the shared airlock/ parent, so nothing of airlock's stays in
    // the host's cgroup tree; while siblings live the kernel refuses with EBUSY, which is fine.
    // Except the v2 parent that carries the pinned audit engine's programs: they are attached
    // there once for every sandbox, and `airlock audit unload` removes both.
    std::string parent = dir.substr(0, dir.rfind('/'));
    if (dir == v2_dir_ && fake_ == nullptr && v2::carriesEnginePrograms(parent)) continue;
    if (fake_ != nullptr && fake_->rmdir) {
      (void)fake_->rmdir(parent);
    } else {
      (void)::rmdir(parent.c_str());
    }
  }
  destroyed_ = true;
  return {};
}

void removeUnusedV2Parent(const std::string& v2_parent, std::chrono::milliseconds detach_wait) {
  auto deadline = std::chrono::steady_clock::now() + detach_wait;
  while (v2::carriesEnginePrograms(v2_parent)) {
    if (std::chrono::steady_clock::now() >= deadline) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  (void)::rmdir(v2_parent.c_str());
}

Result<int> reclaimStaleCgroups(const CgroupHost& host, std::chrono::milliseconds timeout,
                                std::string_view name_prefix) {
  std::set<std::string> names;
  std::set<std::string> roots;
  if (!host.v2_mount.empty()) roots.insert(host.v2_mount);
  for (const auto& [c, m] : host.v1_mounts) roots.insert(m);
  for (const auto& root : roots) {
    std::string parent = root + "/airlock";
    DIR* d = ::opendir(parent.c_str());
    if (d == nullptr) {
      if (errno == ENOENT) continue;
      return sysError("opendir", parent);
    }
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.' || !std::string_view(e->d_name).starts_with(name_prefix)) continue;
      if (e->d_type == DT_DIR || e->d_type == DT_UNKNOWN) names.insert(e->d_name);
    }
    ::closedir(d);
  }
  int removed = 0;
  std::optional<Error> first_error;
  for (const auto& name : names) {
    auto cg = SandboxCgroup::adopt(host, name);
    if (!cg) continue;
    if (auto r = cg->destroy(timeout); !r) {
      if (!first_error) first_error = std::move(r.error()).wrap("reclaim stale cgroups");
      continue;
    }
    ++removed;
  }
  if (first_error) return Unexpected(std::move(*first_error));
  return removed;
}

}  // namespace airlock::sys