#include "supervisor/sandbox/host/sandbox.h"

#include "airlock/policy/keys.h"
#include "airlock/whole_file.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "supervisor/images/resolve.h"
#include "supervisor/net/link_filter.h"
#include "supervisor/sandbox/host/backend_events.h"
#include "supervisor/sandbox/host/host_mounts.h"
#include "supervisor/sandbox/host/orphans.h"
#include "supervisor/sandbox/host/workspace_mount.h"
#include "supervisor/sandbox/package_access.h"
#include "supervisor/sys/process_end.h"
#include "supervisor/sys/seccomp_filter.h"

namespace airlock::sandbox {

namespace {

constexpr auto kHandshakeTimeout = std::chrono::seconds(10);
constexpr auto kCgroupDrainTimeout = std::chrono::seconds(5);
constexpr int kAgentReattachFd = 3;  // agent/agent.h kReattachFd

const sys::CgroupHost& cgroupHost() {
  // The host's cgroup layout does not change while we run; detect it once per process.
  static const Result<sys::CgroupHost> host = sys::CgroupHost::detect();
  static const sys::CgroupHost none{};
  return host ? *host : none;
}

int attachCgroupsTrampoline(void* ctx, pid_t pid, airlock_error_v1* err) {
  auto* cg = static_cast<sys::SandboxCgroup*>(ctx);
  auto r = cg->attachV1(pid);
  if (r) return 0;
  if (err != nullptr) {
    err->code = r.error().errnum() != 0 ? r.error().errnum() : EIO;
    std::snprintf(err->message, sizeof err->message, "%s", r.error().message().c_str());
  }
  return err != nullptr ? err->code : EIO;
}

Result<> ensureDir(const std::string& path, mode_t mode) {
  if (mkdir(path.c_str(), mode) != 0 && errno != EEXIST) return sysError("mkdir", path);
  return {};
}

}  // namespace

std::string newSandboxId() {
  unsigned char bytes[8];
  if (getrandom(bytes, sizeof bytes, 0) != sizeof bytes) {
    auto t = std::chrono::steady_clock::now().time_since_epoch().count();
    for (size_t i = 0; i < sizeof bytes; ++i) bytes[i] = static_cast<unsigned char>(t >> (i * 8));
  }
  char hex[17];
  for (size_t i = 0; i < sizeof bytes; ++i) std::snprintf(hex + 2 * i, 3, "%02x", bytes[i]);
  return std::string(hex, 16);
}

Result<protocol::Configure> configureFor(const policy::Profile& profile,
                                         const std::vector<std::string>& extra_syscalls) {
  protocol::Configure c;
  bool as_root = profile.user == "root";
  c.uid = as_root ? 0 : kSandboxUid;
  c.gid = as_root ? 0 : kSandboxGid;
  if (as_root) {
    for (const auto& name : profile.capabilities) {
      // validate() has already refused unknown names; a -1 here would be a bug upstream.
      int cap = policy::capabilityNumber(name);
      if (cap < 0) return fail("unknown capability", name);
      c.keep_caps |= 1ull << cap;
    }
  }
  const auto& l = profile.limits;
  uint64_t fsize = l.file_size_mb << 20;
  c.rlimits = {{RLIMIT_FSIZE, fsize, fsize},
               {RLIMIT_NOFILE, l.open_files, l.open_files},
               {RLIMIT_NPROC, l.pids, l.pids},
               {RLIMIT_CORE, 0, 0}};
  c.landlock = profile.landlock;
  c.writable_paths = {"/home/user", "/tmp", "/dev"};
  sys::SeccompOptions opts;
  opts.allow = profile.seccomp.allow;
  opts.allow.insert(opts.allow.end(), extra_syscalls.begin(), extra_syscalls.end());
  opts.deny = profile.seccomp.deny;
  auto bpf = sys::compileSeccompFilter(opts);
  if (!bpf) return Unexpected(std::move(bpf.error()).wrap("seccomp profile"));
  c.seccomp_bpf = std::move(*bpf);
  return c;
}

std::string isolationConfigJson(const policy::Profile& profile) {
  if (profile.isolation == "microvm" || profile.isolation == "airlock.isolation.microvm") {
    // Zeros resolved here, so the plugin boots the guest the profile's limits describe.
    const policy::Microvm& m = profile.microvm;
    return nlohmann::json{{"qemu", m.qemu},
                          {"accel", m.accel},
                          {"vcpus", m.vcpusFor(profile.limits.cpu_percent)},
                          {"memory_mb", m.memoryMbFor(profile.limits.memory_mb)},
                          {"kernel", m.kernel},
                          {"cache_dir", m.cache_dir},
                          {"boot_timeout_s", m.boot_timeout_s},
                          {"snapshots", m.snapshots},
                          {"file_size_mb", profile.limits.file_size_mb}}
        .dump();
  }
  if (profile.isolation != "gvisor" && profile.isolation != "airlock.isolation.gvisor") return "{}";
  const policy::Gvisor& g = profile.gvisor;
  return nlohmann::json{
      {"runsc", g.runsc}, {"platform", g.platform}, {"overlay", g.overlay}, {"flags", g.flags}}
      .dump();
}

bool needsAudit(const policy::Profile& profile) {
  return profile.audit.any() || !profile.network.rules.empty() || needsNetworkLink(profile);
}

bool needsNetworkLink(const policy::Profile& profile) { return profile.network.mode != "none"; }

net::NetworkOptions networkOptionsFor(const policy::Policy& policy) {
  net::NetworkOptions o;
  o.ipv4_range = policy.egress.ipv4_range;
  o.ipv6_range = policy.egress.ipv6_range;
  o.nameservers = policy.egress.nameservers;
  o.mtu = static_cast<int>(policy.egress.mtu);
  o.lock_dir = kNetworkLockDir;
  return o;
}

Result<audit::NetPolicy> netPolicyFor(const policy::Network& network) {
  audit::NetPolicy out;
  AIRLOCK_TRY_CTX(mode, audit::parseNetMode(network.mode), "network.mode");
  out.mode = mode;
  for (size_t i = 0; i < network.rules.size(); ++i) {
    AIRLOCK_TRY_CTX(rule, audit::NetRule::parse(network.rules[i]),
                    "network.rules[" + std::to_string(i) + "]");
    out.rules.push_back(std::move(rule));
  }
  // Names are resolved now, by the supervisor: the sandbox's rules hold addresses, fixed for its
  // life (or until its rules are replaced through the API).
  return audit::resolveHosts(out, audit::systemResolver());
}

Result<> Sandbox::attachAudit(const policy::Profile& profile,
                              const std::shared_ptr<const AuditContext>& ctx,
                              const std::string& tenant) {
  if (ctx == nullptr || !needsAudit(profile)) return {};
  if (ctx->engine == nullptr) {
    // Fail closed: a profile that asks for an audit never runs unaudited.
    return fail("profile '" + profile.name +
                "' audits executions but the eBPF audit engine is not available (" +
                ctx->load_error +
                "); `airlock doctor` lists what this host lacks. To run this profile "
                "unaudited, set exec, network and syscalls to false in its [audit] table, "
                "remove its network.rules and keep network.mode = 'none'");
  }
  AIRLOCK_TRY_CTX(network, netPolicyFor(profile.network), "profile '" + profile.name + "'");
  audit::AttachOptions o;
  o.cgroup_v2_path = cgroup_->v2Path();
  o.sandbox_id = id_;
  o.tenant = tenant;
  o.network = std::move(network);
  // A backend that reports its sandbox's execs itself: the exec hook would see only its own
  // processes (runsc, the sentry), which are not the sandbox's.
  o.audit_exec = profile.audit.exec && !(backend_ && backend_->ownAudit());
  o.audit_net = profile.audit.network;
  o.count_syscalls = profile.audit.syscalls;
  o.fail_closed = profile.audit.fail_closed;
  o.log = ctx->log;
  auto attached = ctx->engine->attach(o);
  if (!attached) return Unexpected(attached.error());
  audit_ = std::move(*attached);
  return {};
}

Result<> Sandbox::attachNetwork(const std::shared_ptr<net::NetworkHost>& host) {
  AIRLOCK_TRY_CTX(netns, net::openNetns(sandbox_.pid), "network namespace of PID 1");
  // A backend bug that left PID 1 in the supervisor's namespace must not turn into an eth0 (and
  // routes) on the host: compare the namespaces before touching anything.
  struct stat theirs {
  }, ours{};
  if (fstat(netns.get(), &theirs) != 0 || stat("/proc/self/ns/net", &ours) != 0)
    return sysError("stat", "network namespaces");
  if (theirs.st_ino == ours.st_ino && theirs.st_dev == ours.st_dev)
    return fail("PID 1 shares the supervisor's network namespace; refusing to add a link to it");
  AIRLOCK_TRY_CTX(link, net::SandboxNetwork::attach(host, id_, netns.get()), "attaching");
  network_ = std::move(link);
  return {};
}

Result<> Sandbox::attachPackages(const std::shared_ptr<packages::Proxy>& proxy, uint32_t port,
                                 const policy::Profile& profile, const std::string& tenant) {
  if (!profile.packages.enabled()) return {};
  if (proxy == nullptr)
    return fail("its profile's packages are on, but no package proxy was given");
  auto attachment =
      attachPackageProxy(*proxy, sandbox_.pid, backend_->ownNetstack(), port, id_, tenant, profile);
  if (!attachment) return Unexpected(std::move(attachment.error()));
  packages_ = std::move(*attachment);
  return {};
}

Result<UniqueFd> Sandbox::attachFilteredNetwork(const std::shared_ptr<net::NetworkHost>& host) {
  AIRLOCK_TRY_CTX(netns, net::newNetns(), "a network namespace for the backend");
  // The rules the eBPF engine holds for this sandbox (names resolved), enforced on the link.
  std::string filter = net::linkFilterRules(audit_->network());
  AIRLOCK_TRY_CTX(link, net::SandboxNetwork::attach(host, id_, netns.get(), std::move(filter)),
                  "attaching");
  network_ = std::move(link);
  countTrafficOnTheLink();
  return netns;
}

void Sandbox::countTrafficOnTheLink() {
  // The backend's sockets are its own, so the audit's byte counters see nothing: the link's do.
  // By name, not by pointer: an execution may end (and read) while the sandbox is destroyed.
  audit_->setTrafficSource([link = network_->hostLink()] {
    const auto c = net::linkCounters(link);
    return audit::SandboxAudit::Traffic{c.rx_bytes, c.tx_bytes, c.rx_packets, c.tx_packets};
  });
}

Result<> Sandbox::replaceNetworkRules(const audit::NetPolicy& policy) {
  if (network_ == nullptr || !network_->filtered()) return {};
  return network_->replaceFilter(net::linkFilterRules(policy));
}

Result<std::unique_ptr<Sandbox>> Sandbox::create(plugin::Registry& plugins,
                                                 const SandboxOptions& options) {
  auto started_at = Clock::now();
  auto step_at = started_at;
  const policy::Profile& profile = *options.profile;
  std::unique_ptr<Sandbox> sb(new Sandbox());
  sb->id_ = options.id.empty() ? newSandboxId() : options.id;
  auto ctx = [&](const char* step) { return "sandbox " + sb->id_ + ": " + step; };
  auto lap = [&](const char* step) {
    auto now = Clock::now();
    sb->timings_.steps.emplace_back(
        step, std::chrono::duration<double, std::milli>(now - step_at).count());
    step_at = now;
  };

  // filesystem.image names a store image or is a host directory (supervisor/images/resolve.h).
  auto image_dir = images::imageRootDir(profile.filesystem.image);
  if (!image_dir) return Unexpected(std::move(image_dir.error()).wrap(ctx("image")));

  auto backend = plugins.isolation(profile.isolation, isolationConfigJson(profile));
  if (!backend) return Unexpected(std::move(backend.error()).wrap(ctx("isolation backend")));
  sb->backend_ = *backend;
  lap("plugin");

  if (auto r = ensureDir(options.state_dir, 0755); !r) return Unexpected(r.error());
  std::string scratch = backendScratchDir(options.state_dir);
  if (auto r = ensureDir(scratch, 0755); !r) return Unexpected(r.error());

  sb->state_dir_ = options.state_dir;
  auto lock = lockSandbox(options.state_dir, sb->id_);
  if (!lock) return Unexpected(std::move(lock.error()).wrap(ctx("lock")));
  sb->lock_ = std::move(*lock);

  auto lease = IdRangeLease::acquire(kIdRangeLockDir);
  if (!lease) return Unexpected(std::move(lease.error()).wrap(ctx("uid range")));
  sb->lease_.emplace(std::move(*lease));
  lap("lock_and_uid_range");

  std::vector<MountEntry> view = options.mounts;
  // A store image is a whole root filesystem: its own /usr and /etc, not the host's system view
  // and language paths on top (an absolute image directory keeps them, as before). What the
  // profile lists in readonly_paths is still shown.
  if (!profile.filesystem.image.empty() && profile.filesystem.image.front() != '/') {
    const auto& listed = profile.filesystem.readonly_paths;
    std::erase_if(view, [&](const MountEntry& m) {
      const bool host_system = m.target.starts_with("/usr") || m.target.starts_with("/etc");
      return host_system && std::find(listed.begin(), listed.end(), m.target) == listed.end();
    });
  }
  if (!options.workspace_image.empty()) {
    auto mounted = sb->mountPersistentWorkspace(options.workspace_image);
    if (!mounted) return Unexpected(std::move(mounted.error()).wrap(ctx("persistent workspace")));
    // A backend that mounts the image itself (a VM) gets the image; the others a host mount.
    const bool image = sb->backend_->workspaceImage();
    view.push_back({.source = image ? options.workspace_image : sb->workspace_mount_,
                    .target = "/home/user",
                    .optional = false,
                    .writable = true,
                    .image = image});
    lap("persistent_workspace");
  }

  // Operators' directories, bound through their fds onto staging points for the backend; the
  // points go once it has started (host_mounts.h), on every path out of here.
  auto staged = StagedMounts::stage(options.state_dir, sb->id_, options.host_mounts);
  if (!staged) return Unexpected(std::move(staged.error()).wrap(ctx("host directories")));
  for (const auto& m : staged->entries()) view.push_back(m);

  sys::CgroupLimits limits;
  limits.memory_bytes = sb->backend_->hostMemoryLimit(profile.limits.memory_mb << 20);
  limits.pids = static_cast<uint32_t>(
      std::min<uint64_t>(sb->backend_->hostPidsLimit(profile.limits.pids), UINT32_MAX));
  limits.cpu_percent = profile.limits.cpu_percent;
  // The v1 directories are made in attach_cgroups, while the child sets itself up.
  auto cg = sys::SandboxCgroup::create(cgroupHost(), sb->id_, limits,
                                       sys::SandboxCgroup::V1Dirs::kOnAttach);
  if (!cg) return Unexpected(std::move(cg.error()).wrap(ctx("cgroup")));
  sb->cgroup_.emplace(std::move(*cg));
  lap("cgroup");

  if (auto r = sb->attachAudit(profile, options.audit, options.tenant); !r)
    return Unexpected(std::move(r.error()).wrap(ctx("audit")));
  if (sb->audit_) lap("audit_attach");
  const bool linked = needsNetworkLink(profile);
  if (linked && (options.network == nullptr || sb->audit_ == nullptr))
    // Beyond loopback, only the eBPF connect policy keeps the sandbox from private ranges and
    // the metadata service: no link without it.
    return fail(ctx("network: profile '") + profile.name + "' has network.mode = '" +
                profile.network.mode + "' but this caller gives no network host or no audit");

  auto configure = configureFor(profile, sb->backend_->extraSyscalls());
  if (!configure) return Unexpected(std::move(configure.error()).wrap(ctx("configure")));
  sb->configure_ = std::move(*configure);
  // A writable host directory is the one place besides the sandbox's own that Landlock lets it
  // write.
  for (const auto& m : options.host_mounts)
    if (m.writable) sb->configure_.writable_paths.push_back(m.target);
  lap("seccomp_and_config");

  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
    return sysError("socketpair", "agent channel");
  UniqueFd theirs(pair[1]);
  auto agent = std::make_unique<AgentHandshake>(UniqueFd(pair[0]));
  // Queued for the agent before it exists: it answers while we still wait for its Hello.
  if (auto r = agent->preconfigure(sb->configure_); !r)
    return Unexpected(std::move(r.error()).wrap(ctx("configure")));
  UniqueFd agent_exe(open(options.agent_path.c_str(), O_PATH | O_CLOEXEC));
  if (!agent_exe) return sysError("open", options.agent_path);

  std::vector<airlock_mount_v1> mounts;
  mounts.reserve(view.size());
  for (const auto& m : view) {
    uint32_t flags = (m.writable ? 0u : AIRLOCK_MOUNT_READONLY) |
                     (m.optional ? AIRLOCK_MOUNT_OPTIONAL : 0u) |
                     (m.image ? AIRLOCK_MOUNT_IMAGE : 0u);
    mounts.push_back({m.source.c_str(), m.target.c_str(), flags});
  }
  // A backend whose sandboxes cannot be adopted ends them with their supervisor.
  std::string grace = std::to_string(sb->backend_->reattachable() ? options.reattach_grace_ms : 0);
  const char* agent_argv[] = {"airlock-agent", "--reattach-grace-ms", grace.c_str(), nullptr};

  airlock_sandbox_spec_v1 spec{};
  spec.struct_size = sizeof spec;
  spec.sandbox_id = sb->id_.c_str();
  spec.hostname = profile.hostname.c_str();
  spec.host_uid_base = sb->lease_->hostBase();
  spec.host_gid_base = sb->lease_->hostBase();
  spec.id_count = kIdRangeSize;
  spec.user_uid = kSandboxUid;
  spec.user_gid = kSandboxGid;
  spec.image_dir = image_dir->empty() ? nullptr : image_dir->c_str();
  spec.mounts = mounts.data();
  spec.mounts_len = mounts.size();
  spec.workspace_bytes = profile.limits.workspace_mb << 20;
  spec.tmp_bytes = profile.limits.tmp_mb << 20;
  spec.scratch_dir = scratch.c_str();
  spec.cgroup_v2_fd = sb->cgroup_->cloneIntoFd();
  spec.attach_cgroups = &attachCgroupsTrampoline;
  spec.attach_ctx = &*sb->cgroup_;
  spec.agent_exe_fd = agent_exe.get();
  spec.agent_channel_fd = theirs.get();
  spec.agent_argv = agent_argv;
  const std::string resolv_conf = linked ? options.network->resolvConf() : "";
  spec.network_mode = linked ? AIRLOCK_NETWORK_LINKED : AIRLOCK_NETWORK_LOOPBACK;
  spec.resolv_conf = linked ? resolv_conf.c_str() : nullptr;
  // A backend with its own network stack gets a namespace linked (and filtered) beforehand.
  const bool link_first = linked && sb->backend_->ownNetstack();
  UniqueFd netns;
  if (link_first) {
    auto made = sb->attachFilteredNetwork(options.network);
    if (!made) return Unexpected(std::move(made.error()).wrap(ctx("network")));
    netns = std::move(*made);
    lap("network_attach");
  }
  spec.netns_fd = link_first ? netns.get() : -1;

  auto started = sb->backend_->start(spec);
  staged->release();
  if (!started) return Unexpected(std::move(started.error()).wrap(ctx("start")));
  sb->sandbox_ = *started;
  sb->started_ = true;
  theirs.reset();
  netns.reset();  // the backend's processes hold it now
  lap("backend_start");

  if (auto r = sb->startBackendEvents(profile); !r)
    return Unexpected(std::move(r.error()).wrap(ctx("backend events")));

  if (linked && !link_first) {
    if (auto r = sb->attachNetwork(options.network); !r)
      return Unexpected(std::move(r.error()).wrap(ctx("network")));
    lap("network_attach");
  }
  if (profile.packages.enabled()) {
    if (auto r =
            sb->attachPackages(options.packages, options.package_port, profile, options.tenant);
        !r)
      return Unexpected(std::move(r.error()).wrap(ctx("package proxy")));
    lap("packages_attach");
  }

  sb->agent_ = std::move(agent);
  auto hello = sb->agent_->handshake(sb->configure_, Clock::now() + kHandshakeTimeout);
  if (!hello) return Unexpected(std::move(hello.error()).wrap(ctx("agent handshake")));
  sb->agent_features_ = hello->features;
  lap("agent_handshake");

  sb->timings_.create_ms =
      std::chrono::duration<double, std::milli>(Clock::now() - started_at).count();
  return sb;
}

uint64_t processStartTime(pid_t pid) {
  const std::string stat = readWholeFile("/proc/" + std::to_string(pid) + "/stat").value_or("");
  // The command name may hold spaces and parentheses: fields count from the last ')'.
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i)
    if (i == 22) return std::strtoull(field.c_str(), nullptr, 10);
  return 0;
}

Result<std::unique_ptr<Sandbox>> Sandbox::adopt(plugin::Registry& plugins,
                                                const AdoptOptions& options, UniqueFd lock) {
  const policy::Profile& profile = *options.profile;
  std::unique_ptr<Sandbox> sb(new Sandbox());
  sb->id_ = options.id;
  sb->state_dir_ = options.state_dir;
  sb->lock_ = std::move(lock);
  // A sandbox that is not adopted is left to reclaimOrphans, which releases everything it holds
  // (its persistent workspace's host mount among them, which this one may not know yet): on
  // failure its lock is given back before destroy() could remove the lock file and journal.
  struct LeaveToReclaim {
    Sandbox* sb;
    ~LeaveToReclaim() {
      if (sb != nullptr) sb->lock_.reset();
    }
  } on_failure{sb.get()};
  auto ctx = [&](const char* step) { return "adopting sandbox " + sb->id_ + ": " + step; };

  auto backend = plugins.isolation(profile.isolation, isolationConfigJson(profile));
  if (!backend) return Unexpected(std::move(backend.error()).wrap(ctx("isolation backend")));
  sb->backend_ = *backend;
  auto lease = IdRangeLease::acquireSlot(kIdRangeLockDir, options.id_slot);
  if (!lease) return Unexpected(std::move(lease.error()).wrap(ctx("uid range")));
  sb->lease_.emplace(std::move(*lease));
  auto cg = sys::SandboxCgroup::adopt(cgroupHost(), sb->id_);
  if (!cg) return Unexpected(std::move(cg.error()).wrap(ctx("cgroup")));
  sb->cgroup_.emplace(std::move(*cg));
  if (auto r = sb->attachAudit(profile, options.audit, options.tenant); !r)
    return Unexpected(std::move(r.error()).wrap(ctx("audit")));
  if (needsNetworkLink(profile)) {
    if (options.network == nullptr) return fail(ctx("network: no network host given"));
    // A backend with its own network stack has its rules enforced on the link: they go back on
    // it (the API's runtime rules replace them once the manager restores those).
    const bool on_link = sb->backend_->ownNetstack() && sb->audit_;
    std::string filter = on_link ? net::linkFilterRules(sb->audit_->network()) : "";
    AIRLOCK_TRY_CTX(link, net::SandboxNetwork::adopt(options.network, sb->id_, std::move(filter)),
                    ctx("network"));
    sb->network_ = std::move(link);
    if (on_link) sb->countTrafficOnTheLink();
  }

  // The pid must still be the agent that was journaled, not a process that reused its number.
  // (Checked after pidfd_open: from then on the number cannot be reused under us.)
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, options.agent_pid, 0));
  if (pidfd < 0) return sysError(ctx("pidfd_open"), std::to_string(options.agent_pid));
  if (processStartTime(options.agent_pid) != options.agent_start_time) {
    close(pidfd);
    return fail(ctx("the agent's pid now names another process"),
                std::to_string(options.agent_pid));
  }
  sb->sandbox_.pid = options.agent_pid;
  sb->sandbox_.pidfd = pidfd;
  sb->started_ = true;
  sb->adopted_ = true;
  // The dead supervisor's listener went with it: its port in the sandbox is free again.
  if (auto r = sb->attachPackages(options.packages, options.package_port, profile, options.tenant);
      !r)
    return Unexpected(std::move(r.error()).wrap(ctx("package proxy")));

  if (!options.workspace_image.empty()) {
    // Still mounted: the loop device holds the image's open file, flock() included, so the
    // image stays locked for as long as it is mounted, whoever supervises.
    std::string at = options.state_dir + "/sandboxes/" + sb->id_ + ".home";
    struct stat st {
    }, parent{};
    if (stat(at.c_str(), &st) != 0 || stat((at + "/..").c_str(), &parent) != 0 ||
        st.st_dev == parent.st_dev)
      return fail(ctx("its persistent workspace is no longer mounted"), at);
    sb->workspace_mount_ = std::move(at);
  }

  if (sb->backend_->adopts()) {
    // The agent is not a host process (a user-space kernel's, a VM's): the backend reaches it,
    // unless the sandbox already ended (its grace was 0, or ran out).
    pollfd ended{pidfd, POLLIN, 0};
    if (poll(&ended, 1, 0) == 1) return fail(ctx("the sandbox ended before it could be adopted"));
    const std::string scratch = backendScratchDir(options.state_dir);
    airlock_adopt_spec_v1 spec{};
    spec.struct_size = sizeof spec;
    spec.sandbox_id = sb->id_.c_str();
    spec.scratch_dir = scratch.c_str();
    spec.pid = options.agent_pid;
    spec.pidfd = pidfd;
    UniqueFd cgroup_fd(sb->cgroup_->cloneIntoFd());
    spec.cgroup_v2_fd = cgroup_fd.get();
    spec.attach_cgroups = &attachCgroupsTrampoline;
    spec.attach_ctx = &*sb->cgroup_;
    spec.timeout_ms = static_cast<uint32_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(kHandshakeTimeout).count());
    sb->sandbox_.struct_size = sizeof sb->sandbox_;
    sb->sandbox_.events_fd = -1;
    auto channel = sb->backend_->adopt(spec, sb->sandbox_);
    if (!channel) return Unexpected(std::move(channel.error()).wrap(ctx("backend")));
    sb->agent_ = std::make_unique<AgentHandshake>(std::move(*channel));
    if (auto r = sb->startBackendEvents(profile); !r)
      return Unexpected(std::move(r.error()).wrap(ctx("backend events")));
  }
  // The waiting agent leaves the far end of a new channel at fd kReattachFd. Until it does (it
  // first ends the old executions, up to seconds), that fd is still the dead channel: the new
  // one is recognised by its peer, the agent itself.
  auto deadline = Clock::now() + kHandshakeTimeout;
  for (; !sb->agent_;) {
    UniqueFd channel(static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, kAgentReattachFd, 0)));
    ucred peer{};
    socklen_t len = sizeof peer;
    if (channel && getsockopt(channel.get(), SOL_SOCKET, SO_PEERCRED, &peer, &len) == 0 &&
        peer.pid == options.agent_pid) {
      int flags = fcntl(channel.get(), F_GETFD);
      fcntl(channel.get(), F_SETFD, flags | FD_CLOEXEC);
      sb->agent_ = std::make_unique<AgentHandshake>(std::move(channel));
      break;
    }
    if (Clock::now() > deadline) return fail(ctx("the agent never offered a new channel"));
    // An agent that has exited (its grace was 0, or it ended on its own) never will: give up
    // now, not at the deadline, since every sandbox waited for here delays the supervisor's start.
    pollfd exited{pidfd, POLLIN, 0};
    if (poll(&exited, 1, 0) == 1)
      return fail(ctx("the agent exited instead of offering a channel"));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto left = sb->agent_->reattach(Clock::now() + kHandshakeTimeout);
  if (!left) return Unexpected(std::move(left.error()).wrap(ctx("reattach")));
  sb->left_behind_ = std::move(*left);
  sb->agent_features_ = sb->left_behind_.features;
  auto configure = configureFor(profile, sb->backend_->extraSyscalls());
  if (!configure) return Unexpected(std::move(configure.error()).wrap(ctx("configure")));
  sb->configure_ = std::move(*configure);
  on_failure.sb = nullptr;
  return sb;
}

Result<> Sandbox::startBackendEvents(const policy::Profile& profile) {
  if (!audit_ || !backend_->ownAudit() || sandbox_.events_fd < 0) return {};
  auto events =
      BackendEvents::start(backend_, &sandbox_, audit_.get(),
                           {.exec = profile.audit.exec, .network = profile.audit.network});
  if (!events) return Unexpected(std::move(events.error()));
  events_ = std::move(*events);
  audit_->setEventSource([weak = std::weak_ptr<BackendEvents>(events_)] {
    if (auto events = weak.lock()) events->drain();
  });
  return {};
}

Result<> Sandbox::mountPersistentWorkspace(const std::string& image) {
  workspace_image_ = UniqueFd(open(image.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
  if (!workspace_image_) return sysError("open", image);
  if (flock(workspace_image_.get(), LOCK_EX | LOCK_NB) != 0)
    return errno == EWOULDBLOCK ? fail("in use by another sandbox", image)
                                : sysError("flock", image);
  std::string at = state_dir_ + "/sandboxes/" + id_ + ".home";
  if (mkdir(at.c_str(), 0700) != 0) return sysError("mkdir", at);
  // Under a backend without a user namespace between the sandbox and the host (gVisor), or
  // with a kernel of its own (a VM), the sandbox user's files are owned by its own uid.
  const bool guest_mounts_it = backend_->workspaceImage();
  const uint32_t base = backend_->hostIds() || guest_mounts_it ? 0 : lease_->hostBase();
  if (auto r = mountWorkspace(workspace_image_.get(), at, base); !r) {
    (void)rmdir(at.c_str());
    return r;
  }
  workspace_mount_ = std::move(at);
  // Mounted only to re-own its files: the sandbox's own kernel mounts the image, and an ext4
  // mounted twice at once is corrupted. The lock stays until the sandbox is gone.
  if (guest_mounts_it) {
    unmountWorkspace(workspace_mount_);
    workspace_mount_.clear();
  }
  return {};
}

Result<> Sandbox::destroy() {
  Result<> first_error;
  auto note = [&](Result<> r, const char* step) {
    if (!r && first_error) first_error = Unexpected(std::move(r.error()).wrap(step));
  };
  packages_.reset();  // no new downloads; its open connections end with it
  if (agent_) agent_->shutdown();
  if (cgroup_) note(cgroup_->killAll(), "kill sandbox processes");
  if (audit_) audit_->setTrafficSource(nullptr);  // before the link it reads goes
  if (events_) {
    // The last events in, and no call into the backend after it releases the sandbox.
    if (audit_) audit_->setEventSource(nullptr);
    events_->stop();
    events_.reset();
  }
  if (started_) {
    if (sandbox_.pidfd >= 0) {
      // The cgroup's kill has ended PID 1 with the rest, unless it failed: then PID 1 is
      // killed through its pidfd, and the wait is bounded either way. Our child is reaped here
      // so no zombie outlives the sandbox; an adopted one belongs to the host's init, which
      // reaps it. One that never exits keeps the sandbox's lock, so the next run reclaims it.
      note(sys::killAndAwaitExit(
               sandbox_.pidfd, !adopted_,
               std::chrono::duration_cast<std::chrono::milliseconds>(kCgroupDrainTimeout)),
           "end PID 1");
      close(sandbox_.pidfd);
      sandbox_.pidfd = -1;
    }
    backend_->release(sandbox_);
    started_ = false;
    // A backend's files for this sandbox (plugin ABI 1.5), also when release() could not know
    // them: an adopted sandbox has no backend handle.
    std::error_code ec;
    std::filesystem::remove_all(backendScratchDir(state_dir_) + "/" + id_, ec);
  }
  if (network_) {
    note(network_->detach(), "remove network link");
    network_.reset();
  }
  agent_.reset();
  audit_.reset();  // detached before its cgroup goes
  if (cgroup_) {
    note(cgroup_->destroy(
             std::chrono::duration_cast<std::chrono::milliseconds>(kCgroupDrainTimeout)),
         "remove cgroup");
    cgroup_.reset();
  }
  if (!workspace_mount_.empty()) {
    unmountWorkspace(workspace_mount_);  // every process that could use it is gone
    workspace_mount_.clear();
  }
  workspace_image_.reset();
  lease_.reset();
  // Only a fully torn-down sandbox gives up its lock file; otherwise the next run reclaims it.
  if (lock_ && first_error) unlockSandbox(state_dir_, id_, std::move(lock_));
  return first_error;
}

Sandbox::~Sandbox() { (void)destroy(); }

}  // namespace airlock::sandbox
