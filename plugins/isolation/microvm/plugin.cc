// airlock.isolation.microvm: each sandbox is a QEMU microVM with its own Linux kernel. The
// agent is the guest's PID 1 and speaks the same protocol as on every backend, over a
// virtio-serial port instead of a socket it inherits. The guest sees the system view as
// read-only erofs images (artifacts.h), tmpfs /home/user and /tmp of the profile's sizes, and
// no host file beyond those; docs/microvm.md says where it differs from the other backends.
//
// Per sandbox the backend owns <scratch_dir>/<sandbox_id>/ (the guest console); release()
// removes it, and the supervisor removes it when it reclaims the sandbox after a crash. QEMU is
// the sandbox's only host process and lives in the supervisor's cgroup for the sandbox.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <airlock/result.h>
#include <airlock/unique_fd.h>
#include <airlock/plugin.hpp>

#include "artifacts.h"
#include "common/plugin_error.h"
#include "common/sandbox_etc.h"
#include "common/scratch_dir.h"
#include "config.h"
#include "exec_records.h"
#include "snapshot.h"
#include "vm.h"

namespace airlock::isolation::microvm {
namespace {

[[noreturn]] void throwError(const Error& error) { throwPluginError(error, "microvm"); }

Config configOrThrow(const std::string& json) {
  auto c = parseConfig(json);
  if (!c) throwError(c.error());
  return *c;
}

// Hostnames reach the guest in the go line (vm.h).
bool validHostname(const std::string& h) {
  if (h.empty() || h.size() > 63) return false;
  for (char c : h)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.')) return false;
  return true;
}

struct Sandbox {
  std::string dir;      // <scratch_dir>/<id>: console.log, qemu.log
  UniqueFd events;      // the guest's exec records (exec_records.h)
  std::string pending;  // bytes of a record not complete yet
};

// Turns what the guest's exec watcher wrote so far into the ABI's events. Untrusted bytes: a
// record that does not parse ends the monitoring (an error), never the supervisor.
Result<> readExecRecords(Sandbox& sb,
                         const std::function<void(const airlock_sandbox_event_v1&)>& emit) {
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(sb.events.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n < 0) return sysError("read", "the guest's exec records");
    if (n == 0) break;  // the VM is gone
    sb.pending.append(buf, static_cast<size_t>(n));
    if (sb.pending.size() > 4 * kMaxRecord) break;  // let the consumer catch up
  }
  ExecRecord r;
  for (;;) {
    const Decoded d = decodeRecord(sb.pending, r);
    if (d == Decoded::kNeedMore) return {};
    if (d == Decoded::kCorrupt) {
      sb.pending.clear();
      return fail("the guest sent a malformed exec record");
    }
    airlock_sandbox_event_v1 e{};
    e.struct_size = sizeof e;
    if (r.kind == 'L') {
      e.kind = AIRLOCK_SANDBOX_EVENT_LOST;
      e.lost = r.lost;
      emit(e);
      continue;
    }
    std::vector<const char*> argv;
    for (const auto& a : r.argv) argv.push_back(a.c_str());
    e.kind = AIRLOCK_SANDBOX_EVENT_EXEC;
    e.time_ns = r.time_ns;
    e.pid = r.pid;
    e.uid = r.uid;
    e.comm = r.comm.c_str();
    e.path = r.path.c_str();
    e.argv = argv.data();
    e.argc = static_cast<uint32_t>(argv.size());
    emit(e);
  }
}

// What the guest's root holds, from the spec. Host paths at their own place (the system view:
// /usr, /etc entries) are the host's software: snapshots of them, big directories their own
// images built once per path, the rest copied into the root image. A directory shown anywhere
// else, or writable (an operator's `hostdir` mount, from its staging point), is live data: it is
// shared with the guest over virtio-9p instead, so both sides see each other's changes.
struct View {
  RootSpec root;
  std::vector<std::string> directory_images;  // host directories, each mounted at its own path
  // filesystem.image: the operator's image directory, an erofs layer beneath the root image
  // (an overlay of both, read-only): the root's mount points and generated /etc files win, the
  // rest is the image's, and nothing is ever written into the image.
  std::string image;
  // A persistent workspace: its ext4 image (AIRLOCK_MOUNT_IMAGE), the guest's /home/user disk.
  std::string workspace;
  std::vector<Share> shares;
};

// QEMU's 9p server takes one device per share; the API allows 16 host directories.
constexpr size_t kMaxShares = 16;

Result<View> viewOf(const airlock_sandbox_spec_v1& spec) {
  View v;
  if (spec.image_dir != nullptr) {
    v.image = spec.image_dir;
    v.root.usr_links = false;
  }
  for (size_t i = 0; i < spec.mounts_len; ++i) {
    const airlock_mount_v1& m = spec.mounts[i];
    const std::string source = m.source, target = m.target;
    if ((m.flags & AIRLOCK_MOUNT_IMAGE) != 0) {
      // The guest's kernel mounts one image, its /home/user disk: any other image mount is
      // refused here rather than taken for a host path to copy.
      if (target != "/home/user" || (m.flags & AIRLOCK_MOUNT_READONLY) != 0)
        return fail("an image mount (" + source + " at " + target +
                    ") is not supported by the microvm backend: only a persistent workspace's "
                    "image at /home/user, read-write");
      v.workspace = source;
      continue;
    }
    const bool writable = (m.flags & AIRLOCK_MOUNT_READONLY) == 0;
    struct stat st {};
    if (::stat(source.c_str(), &st) != 0) {
      if ((m.flags & AIRLOCK_MOUNT_OPTIONAL) != 0) continue;
      return sysError("stat", source);
    }
    if (writable || source != target) {
      if (!S_ISDIR(st.st_mode))
        return fail("host path " + source + " shown at " + target +
                    ": the microvm backend shares directories only");
      if (target.empty() || target[0] != '/' || target == "/")
        return fail("host directory " + source + ": its place in the guest (" + target +
                    ") is not an absolute path below /");
      if (v.shares.size() == kMaxShares)
        return fail("more than " + std::to_string(kMaxShares) +
                    " host directories shared with one microVM");
      v.shares.push_back({source, target, writable});
      continue;
    }
    // /etc's entries are small and read at every start: copies in the root. Other
    // directories (/usr) can be gigabytes: an image each, built once.
    if (S_ISDIR(st.st_mode) && !target.starts_with("/etc/"))
      v.directory_images.push_back(source);
    else
      v.root.copied.push_back(source);
  }
  v.root.etc_files = sandboxEtcFiles(spec);
  // /mnt: where shares go (a small tmpfs holds their mount points, made after the go line).
  v.root.mount_points = {"/home/user", "/tmp", "/dev", "/proc", "/sys", "/run", "/mnt"};
  for (const auto& d : v.directory_images) v.root.mount_points.push_back(d);
  return v;
}

// The supervisor's reattach grace, which it gives every agent as "--reattach-grace-ms MS": the
// guest's agent gets it in the go line.
uint32_t reattachGraceMs(const airlock_sandbox_spec_v1& spec) {
  if (spec.agent_argv == nullptr) return 0;
  for (const char* const* a = spec.agent_argv; *a != nullptr && a[1] != nullptr; ++a) {
    if (std::strcmp(*a, "--reattach-grace-ms") != 0) continue;
    char* end = nullptr;
    unsigned long ms = std::strtoul(a[1], &end, 10);
    return end != a[1] && *end == '\0' && ms <= 24ul * 3600 * 1000 ? static_cast<uint32_t>(ms) : 0;
  }
  return 0;
}

class Microvm final : public sdk::IsolationPlugin {
 public:
  // A new supervisor reaches a running guest through QEMU's monitor (adopt()).
  // start() waits seconds for a boot: concurrent. The guest's kernel has its own network stack
  // and runs its own processes: the host's hooks see only QEMU.
  // A persistent workspace is the guest's disk, mounted by its kernel.
  static constexpr uint32_t kFlags = AIRLOCK_ISOLATION_CONCURRENT | AIRLOCK_ISOLATION_OWN_NETSTACK |
                                     AIRLOCK_ISOLATION_OWN_AUDIT |
                                     AIRLOCK_ISOLATION_WORKSPACE_IMAGE;
  static constexpr bool kAdopts = true;
  // QEMU's threads (vCPUs, I/O, RCU) are the sandbox's only host tasks; the guest's processes
  // are bounded inside by RLIMIT_NPROC. (0 per process reads as the host's default of one: the
  // cgroup then allows 64 + limits.pids tasks, headroom QEMU never uses.)
  static constexpr uint32_t kHostPidsBase = 64;
  static constexpr uint32_t kHostPidsPerProcess = 0;
  // Guest RAM is limits.memory_mb; on top, QEMU itself and TCG's code cache (64 MiB).
  static constexpr uint64_t kHostMemoryBaseBytes = 192ull << 20;

  Microvm(const airlock_host_v1* host, std::string_view config_json)
      : IsolationPlugin(host, config_json), config_(configOrThrow(configJson())) {}

  void start(const airlock_sandbox_spec_v1& spec, airlock_sandbox_v1& out) override {
    if (spec.agent_exe_fd < 0 || spec.agent_channel_fd < 0)
      throwError(Error("the agent's binary or channel is not set"));
    auto netns = linkedNetns(spec);
    if (!netns) throwError(netns.error());
    if (::access(config_.qemu.c_str(), X_OK) != 0)
      throwError(Error("QEMU (microvm.qemu) cannot be run (Debian: apt install qemu-system-x86)",
                       config_.qemu, errno));
    const std::string hostname = spec.hostname != nullptr ? spec.hostname : "sandbox";
    if (!validHostname(hostname))
      throwError(Error("hostname is not [A-Za-z0-9.-]{1,63}", hostname));
    auto view = viewOf(spec);
    if (!view) throwError(view.error());
    auto agent = hostPathOf(spec.agent_exe_fd);
    if (!agent) throwError(agent.error());

    Boot boot;
    if (auto r = prepare(*view, *agent, boot); !r) throwError(r.error());
    auto dir = makeScratchDir(spec);
    if (!dir) throwError(dir.error());
    boot.hostname = hostname;
    boot.uid = spec.user_uid;
    boot.gid = spec.user_gid;
    boot.home_bytes = spec.workspace_bytes;
    boot.workspace_image = view->workspace;
    boot.shares = view->shares;
    boot.share_file_bytes = config_.file_size_bytes;
    boot.tmp_bytes = spec.tmp_bytes;
    boot.console_log = *dir + "/console.log";
    boot.qmp_socket = *dir + "/qmp.sock";
    boot.reattach_grace_ms = reattachGraceMs(spec);
    boot.qemu_log = *dir + "/qemu.log";
    // QEMU needs no privilege once its files are open: it runs on as the sandbox's own host
    // root id, which owns nothing on the host.
    boot.runas_uid = static_cast<int>(spec.host_uid_base);
    boot.runas_gid = static_cast<int>(spec.host_gid_base);

    Launch launch;
    launch.agent_channel_fd = spec.agent_channel_fd;
    launch.cgroup_v2_fd = spec.cgroup_v2_fd;
    launch.attach_cgroups = spec.attach_cgroups;
    launch.attach_ctx = spec.attach_ctx;
    launch.netns_fd = *netns;
    boot.network = *netns >= 0;
    // A snapshot of this configuration resumes; without one, this boot makes it, unless
    // another start is making it now (the lock is taken without waiting: that start's boot
    // takes seconds, this one's the same).
    // Never with a persistent workspace: a snapshot would carry what the guest kernel read of
    // one workspace's disk into another's sandbox.
    const std::string snapshot = config_.snapshots && boot.workspace_image.empty()
                                     ? snapshotPath(config_.cache_dir, boot)
                                     : "";
    UniqueFd snapshot_lock;
    auto chooseStart = [&] {
      launch.restore_from.clear();
      launch.snapshot_to.clear();
      if (snapshot.empty()) return;
      if (::access(snapshot.c_str(), R_OK) == 0) {
        launch.restore_from = snapshot;
        return;
      }
      snapshot_lock.reset(::open((snapshot + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
      if (snapshot_lock && ::flock(snapshot_lock.get(), LOCK_EX | LOCK_NB) == 0 &&
          ::access(snapshot.c_str(), F_OK) != 0)
        launch.snapshot_to = snapshot;
    };
    chooseStart();
    const auto t0 = std::chrono::steady_clock::now();
    Result<Running> vm = fail("not started");
    // The boot watchdog: a TCG boot can hang in the guest's early clock setup; one more try
    // with a fresh QEMU, then the error with the console's last lines. A snapshot that does not
    // resume (QEMU changed under the same path, a truncated file) is removed and the sandbox
    // boots instead.
    for (int attempt = 1; attempt <= 2; ++attempt) {
      launch.deadline =
          std::chrono::steady_clock::now() + std::chrono::seconds(config_.boot_timeout_s);
      vm = bootVm(boot, launch);
      if (vm) break;
      if (!launch.restore_from.empty()) {
        log(2, std::string("sandbox '") + spec.sandbox_id + "': the snapshot " + snapshot +
                   " did not resume, booting instead: " + vm.error().message());
        ::unlink(snapshot.c_str());
        chooseStart();
        continue;
      }
      if (vm.error().errnum() != ETIMEDOUT) break;
      log(2, std::string("sandbox '") + spec.sandbox_id + "': boot " + std::to_string(attempt) +
                 " timed out: " + vm.error().message());
    }
    snapshot_lock.reset();
    if (!vm) {
      removeTree(*dir);
      // op(): bootVm's text without the errno's name (the watchdog's timeout is said in words).
      throwError(Error("the microVM did not start (" + accel_ + "): " + vm.error().op()));
    }
    const auto ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0);
    std::string how = launch.restore_from.empty() ? "booted" : "resumed from " + snapshot;
    if (vm->snapshot_bytes != 0)
      how += ", saved " + snapshot + " (" + std::to_string(vm->snapshot_bytes >> 20) + " MiB)";
    if (!vm->snapshot_error.empty())
      log(2, std::string("sandbox '") + spec.sandbox_id +
                 "': no snapshot of this configuration: " + vm->snapshot_error);
    log(0, std::string("sandbox '") + spec.sandbox_id + "': qemu pid " + std::to_string(vm->pid) +
               " (" + accel_ + ", " + how + "), agent ready after " +
               std::to_string(static_cast<int>(ms.count())) + " ms");
    out.struct_size = sizeof(airlock_sandbox_v1);
    out.pid = vm->pid;
    out.pidfd = vm->pidfd.release();
    auto* sb = new Sandbox{*dir, std::move(vm->events), {}};
    if (out.struct_size >= offsetof(airlock_sandbox_v1, events_fd) + sizeof out.events_fd)
      out.events_fd = sb->events.get();
    out.handle = sb;
  }

  // The supervisor that started this VM died; its agent keeps the port and waits. QEMU's
  // monitor still listens in the sandbox's directory: through it the agent's port and the exec
  // records' port get new sockets, whose other ends are the new supervisor's.
  int adopt(const airlock_adopt_spec_v1& spec, airlock_sandbox_v1& out) override {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(spec.timeout_ms);
    const std::string dir = std::string(spec.scratch_dir) + "/" + spec.sandbox_id;
    auto ports = reconnectPorts(dir + "/qmp.sock", deadline);
    if (!ports) throwError(Error("reconnecting the VM's ports: " + ports.error().message()));
    log(0, std::string("sandbox '") + spec.sandbox_id + "': adopted; qemu pid " +
               std::to_string(spec.pid));
    auto* sb = new Sandbox{dir, std::move(ports->events), {}};
    out.handle = sb;
    out.events_fd = sb->events.get();
    return ports->agent_channel.release();
  }

  void readEvents(airlock_sandbox_v1& sandbox,
                  const std::function<void(const airlock_sandbox_event_v1&)>& emit) override {
    auto* sb = static_cast<Sandbox*>(sandbox.handle);
    if (sb == nullptr) return;
    if (auto r = readExecRecords(*sb, emit); !r) throwError(r.error());
  }

  // The supervisor has killed the sandbox's cgroup and reaped QEMU: only files remain.
  void release(airlock_sandbox_v1& sandbox) noexcept override {
    auto* sb = static_cast<Sandbox*>(sandbox.handle);
    sandbox.handle = nullptr;
    if (sb == nullptr) return;
    // QEMU's last words (an emulation error that ended the guest), if any.
    if (auto said = fileTail(sb->dir + "/qemu.log", 8); !said.empty()) log(2, "qemu: " + said);
    removeTree(sb->dir);
    delete sb;
  }

 private:
  Config config_;
  std::mutex mu_;  // guards the prepared artifacts below (start() runs concurrently)
  std::optional<Kernel> kernel_;
  std::string initramfs_, accel_ = "tcg";
  std::map<std::string, std::string> images_;  // host directory → its image

  // The kernel, initramfs and images this sandbox boots; built on first use, then cached.
  Result<> prepare(const View& view, const std::string& agent, Boot& boot) {
    std::lock_guard lock(mu_);
    auto progress = [this](const std::string& line) { log(1, "preparing: " + line); };
    if (!kernel_) {
      auto k = prepareKernel(config_.cache_dir, config_.kernel, progress);
      if (!k) return Unexpected(k.error());
      auto initramfs =
          prepareInitramfs(config_.cache_dir, *k, initBesideAgent(agent), agent, progress);
      if (!initramfs) return Unexpected(initramfs.error());
      kernel_ = *k;
      initramfs_ = *initramfs;
      accel_ = resolveAccel();
    }
    std::vector<std::string> dirs = view.directory_images;
    if (!view.image.empty()) dirs.push_back(view.image);
    for (const auto& dir : dirs) {
      if (images_.contains(dir)) continue;
      auto image = prepareDirectoryImage(config_.cache_dir, dir, progress);
      if (!image) return Unexpected(image.error());
      images_[dir] = *image;
    }
    auto root = prepareRootImage(config_.cache_dir, view.root, progress);
    if (!root) return Unexpected(root.error());
    boot.qemu = config_.qemu;
    boot.accel = accel_;
    boot.vcpus = config_.vcpus == 0 ? 1 : config_.vcpus;
    boot.memory_mb = std::max<uint64_t>(config_.memory_mb, policy::Microvm::kMinGuestMemoryMb);
    boot.vmlinux = kernel_->vmlinux;
    boot.initramfs = initramfs_;
    boot.root_image = *root;
    for (const auto& dir : view.directory_images) boot.images.emplace_back(images_[dir], dir);
    if (!view.image.empty()) boot.image_layer = images_[view.image];
    return {};
  }

  // "auto" takes KVM only where it really runs a guest: a /dev/kvm that opens can still be a
  // nested or paravirtual one whose guests fail (kvm_pvm). `airlock doctor` boots one to tell.
  // Called once, under mu_, with the kernel and initramfs ready.
  std::string resolveAccel() {
    if (config_.accel != "auto") return config_.accel;
    if (::access("/sys/module/kvm_pvm", F_OK) == 0 || ::access("/dev/kvm", R_OK | W_OK) != 0) {
      log(1, "accel auto: no usable KVM here, using TCG (emulation: slow)");
      return "tcg";
    }
    Boot probe;
    probe.qemu = config_.qemu;
    probe.accel = "kvm";
    probe.vmlinux = kernel_->vmlinux;
    probe.initramfs = initramfs_;
    probe.memory_mb = 256;
    if (auto s = probeBoot(probe, std::chrono::milliseconds(5000)); !s) {
      log(2, "accel auto: KVM does not boot a guest here (" + s.error().message() +
                 "), using TCG (emulation: slow)");
      return "tcg";
    }
    return "kvm";
  }
};

}  // namespace
}  // namespace airlock::isolation::microvm

AIRLOCK_ISOLATION_PLUGIN(airlock::isolation::microvm::Microvm, "airlock.isolation.microvm", "0.1.0")
