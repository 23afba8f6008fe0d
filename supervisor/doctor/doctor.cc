// Host probes for `airlock doctor`. Each probe forks at most a child that exits at once, opens and
// closes a descriptor, or reads a file: nothing is left behind.
#include "supervisor/doctor/doctor.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/kvm.h>
#include <linux/landlock.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>

#include "airlock/policy/microvm.h"
#include "airlock/run_bounded.h"
#include "airlock/unique_fd.h"
#include "airlock/whole_file.h"
#include "artifacts.h"
#include "supervisor/audit/engine.h"
#include "supervisor/audit/hook_probe.h"
#include "supervisor/net/forwarding.h"
#include "supervisor/net/sandbox_network.h"
#include "supervisor/plugin/registry.h"
#include "supervisor/sys/cgroup.h"
#include "vm.h"

namespace airlock::doctor {

namespace {

std::string errnoText(int e) {
  return std::string(Error::errnoName(e)) + " (" + std::strerror(e) + ")";
}

std::string readTrimmed(const std::string& path) {
  std::istringstream f(readWholeFile(path).value_or(""));
  std::string s;
  std::getline(f, s);
  return s;
}

// Runs `child` in a clone3 child with `flags`; the child's return value is its exit status.
// Returns 0 when the child exited 0, else the clone3 errno or the child's status.
template <typename F>
int cloneProbe(uint64_t flags, F&& child) {
  clone_args args{};
  args.flags = flags;
  args.exit_signal = SIGCHLD;
  // clone3 without CLONE_VM: a fork whose child only calls async-signal-safe syscalls and exits.
  long pid = ::syscall(SYS_clone3, &args, sizeof args);
  if (pid < 0) return errno;
  if (pid == 0) ::_exit(child());
  int status = 0;
  while (::waitpid(static_cast<pid_t>(pid), &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// 0 when a detached tmpfs can take a mount and then be cloned whole, as the namespaces backend
// builds its root templates (Linux 6.15); the errno otherwise. Nothing is attached anywhere.
int rootTemplateProbe() {
  auto tmpfs = [] {
    UniqueFd fs(static_cast<int>(::syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC)));
    if (!fs || ::syscall(SYS_fsconfig, fs.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0)
      return UniqueFd();
    return UniqueFd(static_cast<int>(::syscall(SYS_fsmount, fs.get(), FSMOUNT_CLOEXEC, 0)));
  };
  UniqueFd root = tmpfs();
  if (!root || ::mkdirat(root.get(), "d", 0755) != 0) return errno;
  UniqueFd sub = tmpfs();
  if (!sub) return errno;
  if (::syscall(SYS_move_mount, sub.get(), "", root.get(), "d", MOVE_MOUNT_F_EMPTY_PATH) != 0)
    return errno;
  UniqueFd copy(static_cast<int>(
      ::syscall(SYS_open_tree, root.get(), "",
                OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH)));
  return copy ? 0 : errno;
}

int pivotRootChild() {
  // Private mount namespace of a short-lived child: none of this reaches the host.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return errno;
  if (::mount("airlock-doctor", "/tmp", "tmpfs", 0, nullptr) != 0) return errno;
  if (::chdir("/tmp") != 0) return errno;
  if (::syscall(SYS_pivot_root, ".", ".") != 0) return errno;
  if (::umount2(".", MNT_DETACH) != 0) return errno;
  return 0;
}

bool onPath(const std::string& exe, std::string& found) {
  const char* path = std::getenv("PATH");
  std::string p = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  p += ":/usr/sbin:/sbin";
  std::istringstream in(p);
  for (std::string dir; std::getline(in, dir, ':');) {
    if (dir.empty()) continue;
    std::string cand = dir + "/" + exe;
    if (::access(cand.c_str(), X_OK) == 0) {
      found = cand;
      return true;
    }
  }
  return false;
}

bool mountedFs(const std::string& fstype, std::string& where) {
  std::istringstream f(readWholeFile("/proc/self/mountinfo").value_or(""));
  for (std::string line; std::getline(f, line);) {
    auto sep = line.find(" - ");
    if (sep == std::string::npos) continue;
    std::istringstream rest(line.substr(sep + 3));
    std::string type;
    rest >> type;
    if (type != fstype) continue;
    std::istringstream head(line.substr(0, sep));
    std::string field;
    for (int i = 0; i < 5 && head >> field; ++i) {
    }
    where = field;
    return true;
  }
  return false;
}

int bpfSocketFilterLoad() {
  bpf_insn insns[2] = {};
  insns[0].code = BPF_ALU64 | BPF_MOV | BPF_K;  // r0 = 0
  insns[0].dst_reg = BPF_REG_0;
  insns[1].code = BPF_JMP | BPF_EXIT;
  static const char kLicense[] = "GPL";
  bpf_attr attr{};
  attr.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
  attr.insn_cnt = 2;
  attr.insns = reinterpret_cast<uint64_t>(insns);
  attr.license = reinterpret_cast<uint64_t>(kLicense);
  // Loads and at once unloads a two-instruction program to see whether eBPF is open to us.
  UniqueFd fd(static_cast<int>(::syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof attr)));
  return fd ? 0 : errno;
}

struct NsProbe {
  const char* name;
  uint64_t flag;
  const char* flag_name;
};
constexpr NsProbe kNamespaces[] = {
    {"user", CLONE_NEWUSER, "CLONE_NEWUSER"},      {"pid", CLONE_NEWPID, "CLONE_NEWPID"},
    {"mount", CLONE_NEWNS, "CLONE_NEWNS"},         {"net", CLONE_NEWNET, "CLONE_NEWNET"},
    {"uts", CLONE_NEWUTS, "CLONE_NEWUTS"},         {"ipc", CLONE_NEWIPC, "CLONE_NEWIPC"},
    {"cgroup", CLONE_NEWCGROUP, "CLONE_NEWCGROUP"}};

}  // namespace

// Whether the mount at mount_point lists option among its options in /proc/self/mounts.
static bool mountHasOption(const std::string& mount_point, const std::string& option) {
  if (mount_point.empty()) return false;
  std::istringstream f(readWholeFile("/proc/self/mounts").value_or(""));
  std::string dev, dir, type, opts, rest;
  while (f >> dev >> dir >> type >> opts && std::getline(f, rest)) {
    if (dir != mount_point) continue;
    std::stringstream ss(opts);
    for (std::string o; std::getline(ss, o, ',');)
      if (o == option) return true;
  }
  return false;
}

namespace {

// What runsc can do here: each platform and --network=sandbox, tried with `runsc do /bin/true`
// (no cgroups of its own, a throwaway state root; every probe bounded in time).
struct GvisorProbe {
  std::string version;
  std::vector<std::pair<std::string, std::pair<bool, std::string>>> platforms;
  bool network_sandbox = false;
  std::string network_detail;
  bool works() const {
    for (const auto& p : platforms)
      if (p.second.first) return true;
    return false;
  }
  std::string workingPlatforms() const {
    std::string out;
    for (const auto& p : platforms)
      if (p.second.first) out += (out.empty() ? "" : ", ") + p.first;
    return out;
  }
};

// In the probe's child: a private network and mount namespace with loopback up and a tmpfs
// over /proc/sys/net, as the gvisor backend runs runsc (docs/gvisor.md says why).
int privateNetworkForRunsc() {
  if (::unshare(CLONE_NEWNET | CLONE_NEWNS) != 0) return errno;
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return errno;
  if (::mount("tmpfs", "/proc/sys/net", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
    return errno;
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return errno;
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  ifr.ifr_flags = IFF_UP;
  int rc = ::ioctl(s, SIOCSIFFLAGS, &ifr);
  ::close(s);
  return rc == 0 ? 0 : errno;
}

// The microvm backend: QEMU, the guest kernel and initramfs (prepared now if missing: a second
// or two), and which accelerators really boot a guest to its /init.
struct MicrovmProbe {
  std::string version, kernel, kernel_problem, image;
  std::pair<bool, std::string> tcg{false, "not tried"}, kvm{false, "not tried"};
  bool works() const { return tcg.first || kvm.first; }
};

MicrovmProbe probeMicrovm(const std::string& qemu, bool kvm, bool pvm) {
  namespace mvm = isolation::microvm;
  MicrovmProbe m;
  if (auto v = runBounded({qemu, "--version"}, std::chrono::milliseconds(5000));
      v && v->status == 0)
    m.version = v->out.substr(0, v->out.find('\n'));
  const policy::Microvm defaults;
  const std::string agent = plugin::defaultAgentPath();
  auto kernel = mvm::prepareKernel(defaults.cache_dir, defaults.kernel);
  if (!kernel) {
    m.kernel_problem = kernel.error().message();
    return m;
  }
  m.kernel = kernel->source + " (" + kernel->version + ")";
  auto initramfs =
      mvm::prepareInitramfs(defaults.cache_dir, *kernel, mvm::initBesideAgent(agent), agent);
  if (!initramfs) {
    m.kernel_problem = initramfs.error().message();
    return m;
  }
  const std::string usr = mvm::directoryImagePath(defaults.cache_dir, "/usr");
  m.image = ::access(usr.c_str(), R_OK) == 0 ? usr : "";
  mvm::Boot b;
  b.qemu = qemu;
  b.vmlinux = kernel->vmlinux;
  b.initramfs = *initramfs;
  b.memory_mb = 256;
  auto boot = [&](const std::string& accel, int ms) -> std::pair<bool, std::string> {
    b.accel = accel;
    auto s = mvm::probeBoot(b, std::chrono::milliseconds(ms));
    if (!s) return {false, s.error().message()};
    char text[64];
    std::snprintf(text, sizeof text, "boots to the guest's /init in %.1f s", *s);
    return {true, text};
  };
  m.tcg = boot("tcg", 30000);
  if (m.tcg.first) m.tcg.second += " (emulation: slow)";
  if (!kvm)
    m.kvm = {false, "no usable /dev/kvm"};
  else if (pvm)
    // kvm_pvm's guests need a PVM-built kernel; a stock one can hang silently (docs/microvm.md).
    m.kvm = {false, "not tried: kvm_pvm runs only PVM-built guest kernels"};
  else
    m.kvm = boot("kvm", 5000);
  return m;
}

GvisorProbe probeGvisor(const std::string& runsc, bool kvm, bool pvm) {
  GvisorProbe g;
  using std::chrono::milliseconds;
  if (auto v = runBounded({runsc, "--version"}, milliseconds(5000)); v && v->status == 0)
    g.version = v->out.substr(0, v->out.find('\n'));
  char root_template[] = "/tmp/airlock-doctor-runsc.XXXXXX";
  if (::mkdtemp(root_template) == nullptr) return g;
  const std::string root = root_template;
  auto tryRun = [&](const std::string& platform, const std::string& network,
                    int (*setup)()) -> std::pair<bool, std::string> {
    auto r = runBounded({runsc, "--root=" + root, "--ignore-cgroups", "--platform=" + platform,
                         "--network=" + network, "do", "/bin/true"},
                        milliseconds(8000), setup);
    if (!r) return {false, r.error().message()};
    if (r->status == 0) return {true, "`runsc do /bin/true` works"};
    if (r->timed_out) return {false, "hangs (killed after 8 s)"};
    std::string out = r->out;
    while (!out.empty() && out.back() == '\n') out.pop_back();
    if (auto nl = out.rfind('\n'); nl != std::string::npos) out = out.substr(nl + 1);
    if (auto b = out.find("] "); b != std::string::npos) out = out.substr(b + 2);
    return {false, "exit " + std::to_string(r->status) + (out.empty() ? "" : ": " + out)};
  };
  g.platforms.emplace_back("ptrace", tryRun("ptrace", "none", nullptr));
  g.platforms.emplace_back("systrap", tryRun("systrap", "none", nullptr));
  if (!kvm)
    g.platforms.push_back({"kvm", {false, "no usable /dev/kvm"}});
  else if (pvm)
    g.platforms.push_back({"kvm", {false, "not tried: kvm_pvm hangs gVisor's kvm platform"}});
  else
    g.platforms.emplace_back("kvm", tryRun("kvm", "none", nullptr));
  const std::string working = g.workingPlatforms();
  if (!working.empty()) {
    auto net = tryRun(working.substr(0, working.find(',')), "sandbox", &privateNetworkForRunsc);
    g.network_sandbox = net.first;
    g.network_detail = net.first ? "starts in a private network namespace" : net.second;
  } else {
    g.network_detail = "not tried: no platform starts";
  }
  std::error_code ec;
  std::filesystem::remove_all(root, ec);
  return g;
}

// The isolation plugins of the plugin directory, each with why it does not start ("" when it
// does), so doctor never calls a backend ok whose plugin is not there.
struct IsolationPlugins {
  std::string dir;
  std::map<std::string, std::string> installed;  // short name → problem ("" = starts)
  std::map<std::string, std::string> rejected;   // "isolation-<name>.so" → why it was refused

  bool starts(const std::string& name) const {
    auto it = installed.find(name);
    return it != installed.end() && it->second.empty();
  }
  // "" when the plugin is installed and starts; else "not installed (looked for …)" or why it
  // does not start.
  std::string problem(const std::string& name) const {
    if (auto it = installed.find(name); it != installed.end()) return it->second;
    const std::string file = "isolation-" + name + ".so";
    if (auto it = rejected.find(file); it != rejected.end()) return it->second;
    return "not installed (looked for " + dir + "/" + file + ")";
  }
};

IsolationPlugins findIsolationPlugins() {
  IsolationPlugins found;
  found.dir = plugin::defaultPluginDir();
  auto registry = plugin::Registry::loadDirectory(found.dir);
  registry.loadAll();
  for (const auto& p : registry.plugins()) {
    if (p.kind() != AIRLOCK_PLUGIN_ISOLATION) continue;
    // Starting is creating an instance with the default configuration, as a profile that
    // names the backend without a table of its own does.
    auto instance = registry.isolation(p.name());
    found.installed[p.shortName()] =
        instance ? "" : "plugin " + p.path() + " does not start: " + instance.error().message();
  }
  for (const auto& r : registry.rejections())
    found.rejected[std::filesystem::path(r.path).filename().string()] = r.message();
  return found;
}

}  // namespace

Result<std::vector<Check>> probeHost() {
  std::vector<Check> out;
  auto add = [&](std::string feature, bool ok, std::string detail, std::string consequence = {}) {
    out.push_back({std::move(feature), ok, std::move(detail), std::move(consequence)});
    return ok;
  };

  utsname u{};
  ::uname(&u);
  add("kernel", true, std::string(u.sysname) + " " + u.release + " " + u.machine);

  // Namespaces, each together with a user namespace as the namespaces backend creates them.
  std::map<std::string, bool> ns_ok;
  for (const auto& ns : kNamespaces) {
    uint64_t flags = CLONE_NEWUSER | ns.flag;
    int rc = cloneProbe(flags, [] { return 0; });
    std::string label = std::string("clone3 ") + ns.name + " namespace";
    std::string flag_text = ns.flag == CLONE_NEWUSER ? std::string(ns.flag_name)
                                                     : std::string("CLONE_NEWUSER|") + ns.flag_name;
    ns_ok[ns.name] =
        add(label, rc == 0, rc == 0 ? flag_text + " works" : flag_text + ": " + errnoText(rc),
            rc == 0 ? "" : std::string("the namespaces backend needs it"));
  }
  int pivot = cloneProbe(CLONE_NEWUSER | CLONE_NEWNS, pivotRootChild);
  if (pivot != 0 && ::geteuid() == 0) pivot = cloneProbe(CLONE_NEWNS, pivotRootChild);
  add("pivot_root", pivot == 0,
      pivot == 0 ? "tmpfs + pivot_root in a private mount namespace works"
                 : "failed: " + errnoText(pivot),
      pivot == 0 ? "" : "the namespaces backend cannot switch root");

  {
    // Read as the namespaces backend reads it (root_template.cc).
    const std::string env = std::getenv("AIRLOCK_ROOT_TEMPLATES") != nullptr
                                ? std::getenv("AIRLOCK_ROOT_TEMPLATES")
                                : "";
    bool off = env == "off" || env == "0" || env == "false" || env == "no";
    int err = rootTemplateProbe();
    add("root templates", err == 0 && !off,
        off        ? "turned off by AIRLOCK_ROOT_TEMPLATES=" + env
        : err == 0 ? "a detached tree takes mounts and clones: each sandbox's read-only root is a "
                     "clone of one built per profile"
                   : "detached mount trees refused (" + errnoText(err) +
                         "; Linux 6.15 is needed, and root to probe)",
        err == 0 && !off ? "" : "every sandbox builds its read-only root itself (slower create)");
  }

  std::string max_userns = readTrimmed("/proc/sys/user/max_user_namespaces");
  bool userns_room = !max_userns.empty() && std::strtol(max_userns.c_str(), nullptr, 10) > 0;
  add("user.max_user_namespaces", userns_room, max_userns.empty() ? "unreadable" : max_userns,
      userns_room ? "" : "user namespaces are disabled by sysctl");

  // Cgroups.
  auto host = sys::CgroupHost::detect();
  if (!host) {
    add("cgroups", false, host.error().message(), "no resource limits can be enforced");
  } else {
    std::string d = host->describe();
    std::replace(d.begin(), d.end(), '\n', ';');
    if (!d.empty() && d.back() == ';') d.pop_back();
    add("cgroups", host->layout != sys::CgroupLayout::kNone, d,
        host->layout == sys::CgroupLayout::kHybrid
            ? "limits through v1 where v2 lacks the controller; v2 directory for eBPF and kill"
            : "");
    for (const auto& [ctrl, where] : host->limitPlacement()) {
      bool ok = where != "unavailable";
      add("cgroup limit " + ctrl, ok, where,
          ok ? "" : ctrl + " limits cannot be enforced on this host");
    }
    bool v2 = !host->v2_mount.empty();
    if (host->layout == sys::CgroupLayout::kV1 || host->layout == sys::CgroupLayout::kHybrid) {
      // Without CLONE_INTO_CGROUP for v1 controllers, each sandbox is moved into its v1 cgroups
      // after clone; the kernel then waits for an RCU grace period (8-20 ms measured here)
      // unless a cgroup root has favordynmods, which makes that lock cheap for every hierarchy.
      bool favor = mountHasOption(host->v2_mount, "favordynmods");
      for (const auto& [ctrl, mnt] : host->v1_mounts)
        favor = favor || mountHasOption(mnt, "favordynmods");
      add("cgroup migration", favor,
          favor ? "favordynmods set: moving a sandbox into v1 cgroups is cheap"
                : "favordynmods off: each sandbox waits an RCU grace period (~10 ms) to join "
                  "its v1 cgroups",
          favor ? ""
                : "slower sandbox creation; an operator can run `mount -o "
                  "remount,favordynmods " +
                      (v2 ? host->v2_mount : std::string("<cgroup mount>")) + "`");
    }
    add("cgroup v2 directory", v2, v2 ? host->v2_mount : "cgroup2 not mounted",
        v2 ? "" : "no eBPF audit/network scoping, no cgroup.kill or CLONE_INTO_CGROUP");
  }

  // Seccomp.
  unsigned api = seccomp_api_get();
  uint32_t notif = SECCOMP_RET_USER_NOTIF;
  bool notif_kernel = ::syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &notif) == 0;
  add("seccomp filter", api >= 1,
      "libseccomp " + std::to_string(seccomp_version()->major) + "." +
          std::to_string(seccomp_version()->minor) + "." +
          std::to_string(seccomp_version()->micro) + ", API level " + std::to_string(api),
      api >= 1 ? "" : "no syscall filtering: sandboxes refuse to start");
  add("seccomp USER_NOTIF", api >= 5 && notif_kernel,
      std::string("kernel ") + (notif_kernel ? "supports" : "lacks") + " SECCOMP_RET_USER_NOTIF",
      api >= 5 && notif_kernel ? "" : "no supervisor-mediated syscalls");

  long landlock =
      ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  int landlock_err = errno;
  add("landlock", landlock >= 1,
      landlock >= 1 ? "ABI " + std::to_string(landlock) : "unavailable: " + errnoText(landlock_err),
      landlock >= 1 ? "" : "no Landlock defence in depth");

  {
    UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, ::getpid(), 0)));
    int e = errno;
    add("pidfd_open", pidfd.valid(), pidfd ? "works" : errnoText(e),
        pidfd ? "" : "process handling falls back to racy pids");
  }

  // eBPF.
  int bpf_rc = bpfSocketFilterLoad();
  add("eBPF program load", bpf_rc == 0,
      bpf_rc == 0 ? "BPF_PROG_TYPE_SOCKET_FILTER loads"
                  : "bpf(BPF_PROG_LOAD): " + errnoText(bpf_rc),
      bpf_rc == 0 ? "" : "no eBPF audit or network enforcement");
  struct stat st {};
  bool btf = ::stat("/sys/kernel/btf/vmlinux", &st) == 0;
  add("BTF", btf, btf ? "/sys/kernel/btf/vmlinux" : "/sys/kernel/btf/vmlinux missing",
      btf ? "" : "CO-RE eBPF programs cannot load");
  std::string tracefs;
  bool tracing = mountedFs("tracefs", tracefs);
  add("tracefs", tracing, tracing ? "mounted at " + tracefs : "not mounted",
      tracing ? "" : "syscall tracepoints unavailable (mount tracefs at /sys/kernel/tracing)");

  // The hooks of bpf/, probed by loading and attaching airlock's own programs one at a time.
  if (bpf_rc == 0) {
    std::map<std::string, bool> hook_ok;
    for (const auto& h : audit::probeHooks(host ? host->v2_mount : std::string())) {
      hook_ok[h.hook] = h.ok;
      add("eBPF " + h.hook, h.ok, h.detail, h.ok && h.used ? "" : h.consequence);
    }
    bool audit = hook_ok["raw_tp/sched_process_exec"] && hook_ok["cgroup/connect4"] &&
                 hook_ok["cgroup/connect6"] && hook_ok["cgroup_skb/egress"] &&
                 hook_ok["cgroup_skb/ingress"];
    add("audit (exec, connect, bytes)", audit,
        audit ? "every audit hook works" : "some audit hooks are missing (see above)",
        audit ? "" : "executions carry incomplete audit summaries");
    // The engine is loaded once per host and pinned (docs/audit.md "One engine per host").
    std::string root = audit::kEnginePinRoot;
    std::string versions;
    if (auto* d = ::opendir(root.c_str())) {
      while (auto* e = ::readdir(d))
        if (e->d_name[0] != '.')
          versions += (versions.empty() ? "" : ", ") + std::string(e->d_name);
      ::closedir(d);
    }
    add("audit engine shared between runs", true,
        versions.empty()
            ? "not loaded yet: the next airlock process loads it and pins it under " + root
            : "pinned at " + root + "/ (versions: " + versions + ")",
        "");
    bool enforce = hook_ok["cgroup/connect4"] && hook_ok["cgroup/connect6"] &&
                   hook_ok["cgroup/sendmsg4"] && hook_ok["cgroup/sendmsg6"];
    add("network policy enforcement", enforce,
        enforce ? "cgroup connect4/6 and sendmsg4/6 decide in the kernel"
                : "cgroup connect/sendmsg hooks are missing (see above)",
        enforce ? "" : "only network mode none (no network namespace route) is safe here");
  }

  // Sandbox networks beyond loopback (docs/network.md): veth pairs, NAT, forwarding.
  {
    auto support = net::probeNetworkSupport();
    add("sandbox networks (veth + NAT)", support.has_value(),
        support ? "rtnetlink and libnftables work" : support.error().message(),
        support ? "" : "profiles with network.mode allowlist or open cannot create sandboxes");
    std::string v4 = net::ipv4ForwardingProblem();
    add("IPv4 forwarding", v4.empty(), v4.empty() ? "net.ipv4.ip_forward = 1" : v4,
        v4.empty() ? "" : "sandboxes with a network get no replies");
    std::string v6 = net::ipv6ForwardingProblem();
    add("IPv6 forwarding", v6.empty(),
        v6.empty() ? "per-link force_forwarding or net.ipv6.conf.all.forwarding" : v6,
        v6.empty() ? "" : "set [egress] ipv6_range = \"\" or enable it");
  }

  // Isolation plugins: a backend is only as real as its plugin (docs/plugins.md), so each one
  // is reported from the plugin directory, and the host probes of a backend without its plugin
  // (runsc, QEMU) are skipped.
  const IsolationPlugins plugins = findIsolationPlugins();
  add("plugin directory", !plugins.installed.empty(),
      plugins.dir + (plugins.installed.empty() ? ": no isolation plugin" : ""),
      plugins.installed.empty() ? "no backend can run: set AIRLOCK_PLUGIN_DIR or reinstall" : "");

  // Virtualisation and other backends.
  std::string kvm_detail;
  bool kvm = false;
  {
    UniqueFd fd(::open("/dev/kvm", O_RDWR | O_CLOEXEC));
    if (!fd) {
      kvm_detail = "/dev/kvm: " + errnoText(errno);
    } else {
      int version = ::ioctl(fd.get(), KVM_GET_API_VERSION, 0);
      kvm = version == KVM_API_VERSION;
      kvm_detail = "/dev/kvm API " + std::to_string(version);
    }
  }
  bool pvm = ::access("/sys/module/kvm_pvm", F_OK) == 0;
  if (pvm) kvm_detail += ", kvm_pvm (needs a PVM guest kernel; stock kernels fail)";
  add("KVM", kvm && !pvm, kvm_detail,
      kvm && !pvm ? "" : "microvm runs under TCG emulation (slow); use KVM hosts in production");

  std::string runsc, qemu;
  const bool gvisor_plugin = plugins.starts("gvisor"), microvm_plugin = plugins.starts("microvm");
  bool have_runsc = gvisor_plugin && onPath("runsc", runsc);
  bool have_qemu = microvm_plugin && onPath("qemu-system-x86_64", qemu);
  const GvisorProbe gvisor = have_runsc ? probeGvisor(runsc, kvm, pvm) : GvisorProbe{};
  if (gvisor_plugin)
    add("runsc", have_runsc && !gvisor.version.empty(),
        !have_runsc ? "not on PATH" : runsc + " " + gvisor.version,
        have_runsc ? "" : "install runsc (Debian: apt install runsc) for isolation = \"gvisor\"");
  if (have_runsc) {
    for (const auto& [platform, result] : gvisor.platforms)
      add("gvisor platform " + platform, result.first, result.second,
          result.first ? "" : "gvisor.platform = '" + platform + "' is refused here");
    add("gvisor --network=sandbox", gvisor.network_sandbox, gvisor.network_detail,
        gvisor.network_sandbox ? ""
                               : "gVisor sandboxes get loopback only whatever network.mode says");
  }
  const MicrovmProbe microvm = have_qemu ? probeMicrovm(qemu, kvm, pvm) : MicrovmProbe{};
  if (microvm_plugin)
    add("qemu-system-x86_64", have_qemu && !microvm.version.empty(),
        have_qemu ? qemu + " " + microvm.version : "not on PATH",
        have_qemu ? "" : "install qemu-system-x86 (Debian) for isolation = \"microvm\"");
  if (have_qemu) {
    add("microvm guest kernel", microvm.kernel_problem.empty(),
        microvm.kernel_problem.empty() ? microvm.kernel : microvm.kernel_problem,
        microvm.kernel_problem.empty() ? "" : "microVMs cannot boot");
    if (microvm.kernel_problem.empty()) {
      add("microvm accel tcg", microvm.tcg.first, microvm.tcg.second);
      add("microvm accel kvm", microvm.kvm.first, microvm.kvm.second,
          microvm.kvm.first ? "" : "microvm.accel = 'auto' uses TCG");
      add("microvm /usr image", !microvm.image.empty(),
          microvm.image.empty() ? "not built" : microvm.image,
          microvm.image.empty() ? "run `airlock image prepare` (else the first microVM builds it)"
                                : "");
    }
  }

  std::string tiocsti = readTrimmed("/proc/sys/dev/tty/legacy_tiocsti");
  bool tiocsti_off = tiocsti == "0";
  add("dev.tty.legacy_tiocsti", tiocsti_off,
      tiocsti.empty() ? "absent (kernel < 6.2: TIOCSTI enabled)" : tiocsti,
      tiocsti_off ? ""
                  : "TIOCSTI can inject input into a shared terminal: sandboxes never get the "
                    "supervisor's tty and seccomp refuses TIOCSTI");

  // Backends: only an installed plugin that starts, and what it needs on the host, is "ok".
  bool ns_backend =
      ns_ok["user"] && ns_ok["pid"] && ns_ok["mount"] && ns_ok["net"] && pivot == 0 && userns_room;
  auto backend = [&](const std::string& name, bool host_ok, const std::string& detail,
                     const std::string& consequence) {
    const std::string unusable = "isolation = \"" + name + "\" cannot run here";
    if (const std::string problem = plugins.problem(name); !problem.empty())
      add("backend " + name, false, problem, unusable);
    else
      add("backend " + name, host_ok, detail, host_ok ? consequence : unusable);
  };
  backend("namespaces", ns_backend,
          ns_backend ? "user, pid, mount, net namespaces and pivot_root work"
                     : "missing namespaces or pivot_root (see above)",
          "");
  backend("gvisor", gvisor.works(),
          !have_runsc      ? "runsc not installed"
          : gvisor.works() ? "starts with platform " + gvisor.workingPlatforms()
                           : "no platform starts (see above)",
          gvisor.network_sandbox ? ""
                                 : "network.mode allowlist/open fail: --network=sandbox does not "
                                   "start here");
  backend("microvm", microvm.works(),
          !have_qemu          ? "qemu-system-x86_64 not installed"
          : microvm.kvm.first ? "boots with accel kvm (auto picks it)"
          : microvm.tcg.first ? "boots with accel tcg only (auto picks it): slow"
                              : "no accelerator boots a guest (see above)",
          "");
  // Other isolation plugins installed here: the host probes above are the built-in backends';
  // of these doctor can only say that they load and start.
  for (const auto& [name, problem] : plugins.installed)
    if (name != "namespaces" && name != "gvisor" && name != "microvm")
      add("backend " + name, problem.empty(), problem.empty() ? "plugin loads and starts" : problem,
          problem.empty() ? "" : "isolation = \"" + name + "\" cannot run here");
  return out;
}

std::string formatDoctor(const std::vector<Check>& checks) {
  size_t fw = 7, sw = 6, dw = 6;
  for (const auto& c : checks) {
    fw = std::max(fw, c.feature.size());
    dw = std::max(dw, std::min<size_t>(c.detail.size(), 60));
  }
  auto pad = [](const std::string& s, size_t w) {
    return s.size() >= w ? s : s + std::string(w - s.size(), ' ');
  };
  std::ostringstream out;
  out << pad("FEATURE", fw) << "  " << pad("STATUS", sw) << "  " << pad("DETAIL", dw)
      << "  CONSEQUENCE\n";
  for (const auto& c : checks) {
    std::string line =
        pad(c.feature, fw) + "  " + pad(c.ok ? "ok" : "NO", sw) + "  " +
        (c.consequence.empty() ? c.detail : pad(c.detail, dw) + "  " + c.consequence);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  }
  return out.str();
}

}  // namespace airlock::doctor
