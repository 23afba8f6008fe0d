// Cgroup layout detection, shared file helpers, and the per-sandbox handle over both drivers.
#include "supervisor/sys/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <sstream>
#include <thread>

#include "supervisor/sys/cgroup_driver.h"

namespace airlock::sys {

namespace cgroup_detail {

Result<> writeControl(const std::string& path, std::string_view value) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
  if (!fd) return sysError("open", path);
  ssize_t n = ::write(fd.get(), value.data(), value.size());
  if (n < 0) return sysError("write(" + std::string(value) + ")", path);
  if (static_cast<size_t>(n) != value.size()) return fail("short write", path);
  return {};
}

Result<std::string> readControl(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return sysError("open", path);
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return sysError("read", path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

bool fileExists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

std::optional<uint64_t> parseU64(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
  return v;
}

std::optional<uint64_t> keyedValue(std::string_view text, std::string_view key) {
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    size_t sp = line.find(' ');
    if (sp != std::string_view::npos && line.substr(0, sp) == key) {
      return parseU64(line.substr(sp + 1));
    }
  }
  return std::nullopt;
}

// How often create() re-makes a shared parent that a concurrent destroy() just removed.
constexpr int kParentRetries = 8;

Result<> ensureDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) return sysError("mkdir", path);
  return {};
}

Result<> makeCgroupDir(const std::string& path, const CgroupFakeKernel* fake) {
  // mkdir in cgroupfs creates a cgroup; the kernel populates its control files.
  if (::mkdir(path.c_str(), 0755) != 0) return sysError("mkdir", path);
  if (fake != nullptr && fake->after_mkdir) fake->after_mkdir(path);
  return {};
}

namespace {

template <typename F>
Result<> forEachSubdir(const std::string& dir, F&& f) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return {};
    return sysError("opendir", dir);
  }
  std::vector<std::string> subs;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    bool is_dir = e->d_type == DT_DIR;
    if (e->d_type == DT_UNKNOWN) {
      struct stat st;
      is_dir =
          ::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
    }
    if (is_dir) subs.push_back(dir + "/" + e->d_name);
  }
  ::closedir(d);
  for (const auto& s : subs) {
    if (auto r = f(s); !r) return r;
  }
  return {};
}

Result<> collectProcs(const std::string& dir, std::vector<pid_t>& out) {
  auto text = readControl(dir + "/cgroup.procs");
  if (!text) {
    if (text.error().errnum() == ENOENT) return {};
    return Unexpected(text.error());
  }
  std::string_view t = *text;
  while (!t.empty()) {
    size_t eol = t.find('\n');
    if (auto v = parseU64(t.substr(0, eol)); v && *v > 0) out.push_back(static_cast<pid_t>(*v));
    t = eol == std::string_view::npos ? std::string_view() : t.substr(eol + 1);
  }
  return forEachSubdir(dir, [&](const std::string& s) { return collectProcs(s, out); });
}

}  // namespace

Result<std::vector<pid_t>> listProcsRecursive(const std::string& dir) {
  std::vector<pid_t> out;
  if (auto r = collectProcs(dir, out); !r) return Unexpected(r.error());
  return out;
}

Result<> killLoop(const std::vector<std::string>& dirs) {
  for (int round = 0; round < 16; ++round) {
    bool any = false;
    for (const auto& dir : dirs) {
      auto pids = listProcsRecursive(dir);
      if (!pids) return Unexpected(std::move(pids.error()).wrap("kill cgroup"));
      for (pid_t p : *pids) {
        // Only members of the sandbox's cgroup are signalled; ESRCH means it already exited.
        if (::kill(p, SIGKILL) == 0) any = true;
      }
    }
    if (!any) break;
  }
  return {};
}

void Backoff::wait() {
  std::this_thread::sleep_for(next_);
  next_ = std::min<std::chrono::microseconds>(next_ * 2, std::chrono::milliseconds(5));
}

Result<> waitProcsEmpty(const std::string& dir, Clock::time_point deadline) {
  Backoff backoff;
  for (;;) {
    auto pids = listProcsRecursive(dir);
    if (!pids) return Unexpected(pids.error());
    if (pids->empty()) return {};
    if (Clock::now() >= deadline) {
      return fail("processes still in cgroup after kill (" + std::to_string(pids->size()) + ")",
                  dir);
    }
    for (pid_t p : *pids) ::kill(p, SIGKILL);
    backoff.wait();
  }
}

Result<> removeTree(const std::string& dir, Clock::time_point deadline,
                    const CgroupFakeKernel* fake) {
  auto sub =
      forEachSubdir(dir, [&](const std::string& s) { return removeTree(s, deadline, fake); });
  if (!sub) return sub;
  Backoff backoff;
  for (;;) {
    // rmdir releases the cgroup; it fails with EBUSY while a dying task still pins it.
    int rc = fake != nullptr && fake->rmdir ? fake->rmdir(dir) : ::rmdir(dir.c_str());
    if (rc == 0 || errno == ENOENT) return {};
    if (errno != EBUSY || Clock::now() >= deadline) return sysError("rmdir", dir);
    backoff.wait();
  }
}

}  // namespace cgroup_detail

using namespace cgroup_detail;

// ---------------------------------------------------------------------------------------------
// Detection

namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescapeMountField(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      int v = 0;
      bool ok = true;
      for (size_t k = 1; k <= 3; ++k) {
        char c = s[i + k];
        if (c < '0' || c > '7') ok = false;
        v = v * 8 + (c - '0');
      }
      if (ok) {
        out.push_back(static_cast<char>(v));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

std::vector<std::string_view> splitWs(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    size_t j = i;
    while (j < line.size() && line[j] != ' ') ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

const std::set<std::string_view>& knownV1Controllers() {
  static const std::set<std::string_view> k = {
      "cpu",   "cpuacct",    "cpuset",   "memory",  "devices", "freezer", "net_cls",
      "blkio", "perf_event", "net_prio", "hugetlb", "pids",    "rdma",    "misc"};
  return k;
}

const char* controllerForLimit(int i) {
  static const char* k[] = {"memory", "pids", "cpu"};
  return k[i];
}

bool limitSet(const CgroupLimits& l, int i) {
  switch (i) {
    case 0:
      return l.memory_bytes != 0;
    case 1:
      return l.pids != 0;
    default:
      return l.cpu_percent != 0;
  }
}

}  // namespace

const char* cgroupLayoutName(CgroupLayout layout) {
  switch (layout) {
    case CgroupLayout::kNone:
      return "none";
    case CgroupLayout::kV1:
      return "v1";
    case CgroupLayout::kV2:
      return "v2";
    case CgroupLayout::kHybrid:
      return "hybrid";
  }
  return "?";
}

bool CgroupHost::v2_has(std::string_view controller) const {
  return !v2_mount.empty() && v2_controllers.count(std::string(controller)) != 0;
}

Result<CgroupHost> CgroupHost::parseMountinfo(std::string_view text,
                                              const std::string& root_prefix) {
  CgroupHost host;
  int lineno = 0;
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    ++lineno;
    if (line.empty()) continue;
    auto f = splitWs(line);
    auto sep = std::find(f.begin(), f.end(), std::string_view("-"));
    if (f.size() < 7 || sep == f.end() || f.end() - sep < 3) {
      return fail("malformed mountinfo line " + std::to_string(lineno), std::string(line));
    }
    std::string_view fstype = sep[1];
    std::string_view super = f.end() - sep >= 4 ? sep[3] : std::string_view();
    std::string mount_point = root_prefix + unescapeMountField(f[4]);
    if (fstype == "cgroup2") {
      if (host.v2_mount.empty()) host.v2_mount = mount_point;
    } else if (fstype == "cgroup") {
      size_t i = 0;
      while (i <= super.size()) {
        size_t j = super.find(',', i);
        if (j == std::string_view::npos) j = super.size();
        std::string_view opt = super.substr(i, j - i);
        if (knownV1Controllers().count(opt) != 0 && host.v1_mounts.count(std::string(opt)) == 0) {
          host.v1_mounts.emplace(std::string(opt), mount_point);
        }
        i = j + 1;
      }
    }
  }
  bool v1 = !host.v1_mounts.empty();
  bool v2 = !host.v2_mount.empty();
  host.layout = v1 && v2 ? CgroupLayout::kHybrid
                : v1     ? CgroupLayout::kV1
                : v2     ? CgroupLayout::kV2
                         : CgroupLayout::kNone;
  return host;
}

Result<CgroupHost> CgroupHost::detect(const std::string& mountinfo,
                                      const std::string& root_prefix) {
  AIRLOCK_TRY_CTX(text, readControl(mountinfo), "detect cgroups");
  AIRLOCK_TRY_CTX(host, parseMountinfo(text, root_prefix), "detect cgroups");
  if (!host.v2_mount.empty()) {
    auto ctl = readControl(host.v2_mount + "/cgroup.controllers");
    if (!ctl) return Unexpected(std::move(ctl.error()).wrap("detect cgroups"));
    // "cpuset cpu io memory pids\n": split by hand, the only stream on the run's path.
    std::string_view rest = *ctl;
    while (!rest.empty()) {
      size_t start = rest.find_first_not_of(" \t\n");
      if (start == std::string_view::npos) break;
      size_t end = rest.find_first_of(" \t\n", start);
      if (end == std::string_view::npos) end = rest.size();
      host.v2_controllers.emplace(rest.substr(start, end - start));
      rest.remove_prefix(end);
    }
  }
  return host;
}

std::string CgroupHost::describe() const {
  std::ostringstream out;
  out << "layout " << cgroupLayoutName(layout) << "\n";
  if (!v2_mount.empty()) {
    out << "v2 " << v2_mount << ": controllers";
    if (v2_controllers.empty()) out << " (none)";
    for (const auto& c : v2_controllers) out << " " << c;
    out << "\n";
  }
  std::map<std::string, std::string> by_mount;
  for (const auto& [c, m] : v1_mounts) {
    auto& s = by_mount[m];
    if (!s.empty()) s += ",";
    s += c;
  }
  for (const auto& [m, cs] : by_mount) out << "v1 " << m << ": " << cs << "\n";
  return out.str();
}

std::map<std::string, std::string> CgroupHost::limitPlacement() const {
  std::map<std::string, std::string> out;
  for (int i = 0; i < 3; ++i) {
    std::string c = controllerForLimit(i);
    if (v2_has(c)) {
      out[c] = "v2 " + v2_mount;
    } else if (auto it = v1_mounts.find(c); it != v1_mounts.end()) {
      out[c] = "v1 " + it->second;
    } else {
      out[c] = "unavailable";
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// SandboxCgroup

namespace {

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
  if (!v2_dir_.empty()) {
    if (fileExists(v2_dir_ + "/cgroup.events")) {
      if (auto r = v2::waitUnpopulated(v2_dir_, deadline); !r) {
        return Unexpected(std::move(r.error()).wrap(ctx));
      }
    } else if (auto r = waitProcsEmpty(v2_dir_, deadline); !r) {
      return Unexpected(std::move(r.error()).wrap(ctx));
    }
  }
  for (const auto& dir : paths()) {
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
