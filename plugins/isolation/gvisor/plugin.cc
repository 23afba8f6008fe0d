// airlock.isolation.gvisor: the sandbox is a gVisor sandbox (runsc): the agent and everything
// it runs see gVisor's kernel (the sentry), a user-space kernel that itself runs under a
// seccomp filter on the host. Root filesystem, channel, limits and identity follow the
// namespaces backend; docs/gvisor.md says where they differ.
//
// Per sandbox the backend owns <scratch_dir>/<sandbox_id>/ (the OCI bundle, runsc's state
// root, the disk overlay); release() removes it, and the supervisor removes it when it reclaims
// the sandbox after a crash. The sandbox's processes on the host (runsc, the sentry, the gofer,
// the platform's stub processes) all live in the supervisor's cgroup for the sandbox.
#include <dlfcn.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <airlock/result.h>
#include <airlock/unique_fd.h>
#include <airlock/plugin.hpp>

#include "bundle.h"
#include "common/plugin_error.h"
#include "common/scratch_dir.h"
#include "config.h"
#include "monitor.h"
#include "runsc.h"

namespace airlock::isolation::gvisor {
namespace {

// From fork to the agent's ready line. runsc boots the sentry in ~0.2 s on an idle host; a
// loaded one with the ptrace platform can take seconds.
constexpr auto kStartTimeout = std::chrono::seconds(30);

[[noreturn]] void throwError(const Error& error) { throwPluginError(error, "gvisor"); }

Config configOrThrow(const std::string& json) {
  auto c = parseConfig(json);
  if (!c) throwError(c.error());
  return *c;
}

struct Sandbox {
  std::string dir;  // <scratch_dir>/<id>
  UniqueFd runsc_stderr;
  MonitorSink monitor;  // the sandbox's execs and connects (monitor.h)
};

Result<> writeTextFile(const std::string& path, const std::string& text) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd) return sysError("open", path);
  if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    return sysError("write", path);
  return {};
}

// The statx shim (compat/statx_compat.c) next to this plugin: <plugin dir>/gvisor/.
std::string statxCompatPath() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&statxCompatPath), &info) == 0 || info.dli_fname == nullptr)
    return "";
  // The supervisor maps a plugin through the fd it checked (/proc/self/fd/N): the real path
  // is what that names.
  std::unique_ptr<char, decltype(&std::free)> real(::realpath(info.dli_fname, nullptr), &std::free);
  if (!real) return "";
  std::string self = real.get();
  std::string path = self.substr(0, self.rfind('/') + 1) + "gvisor/libairlock-statx-compat.so";
  return ::access(path.c_str(), R_OK) == 0 ? path : "";
}

class Gvisor final : public sdk::IsolationPlugin {
 public:
  // Only fds 0-2 reach a gVisor sandbox and the agent is the sentry's, not a host process: a
  // new supervisor hands the waiting agent its channel through a helper it runs inside the
  // sandbox (adopt()).
  // The gofer writes host files with the sandbox's own ids (no user namespace maps them).
  // start() keeps no state but the config (immutable) and waits ~200 ms for runsc: concurrent.
  // gVisor's netstack sends raw frames from the sentry: the supervisor links the namespace
  // first and enforces the network rules on the link.
  // The host's hooks see the sentry, not the sandbox's processes: gVisor's own monitoring
  // reports them (monitor.h).
  static constexpr uint32_t kFlags = AIRLOCK_ISOLATION_HOST_IDS | AIRLOCK_ISOLATION_CONCURRENT |
                                     AIRLOCK_ISOLATION_OWN_NETSTACK | AIRLOCK_ISOLATION_OWN_AUDIT;
  static constexpr bool kAdopts = true;
  // The sentry's own tasks and memory count in the sandbox's cgroup; measured with the ptrace
  // platform (runsc 2022-12): an idle sandbox is ~127 host tasks (the sentry's and gofer's
  // threads) and ~27 MiB. Each sandboxed task needs a host thread to trace it and a stub
  // process, and the Go runtime adds threads for blocking calls: a fork bomb held to 64
  // sandboxed processes by RLIMIT_NPROC peaked at 2139 host tasks. When the host limit is hit
  // first the sentry cannot make a thread and the whole sandbox dies, so leave room.
  static constexpr uint32_t kHostPidsBase = 256;
  static constexpr uint32_t kHostPidsPerProcess = 48;
  static constexpr uint64_t kHostMemoryBaseBytes = 64ull << 20;
  Gvisor(const airlock_host_v1* host, std::string_view config_json)
      : IsolationPlugin(host, config_json),
        config_(configOrThrow(configJson())),
        statx_compat_(statxCompatPath()) {
    if (statx_compat_.empty())
      log(2,
          "gvisor/libairlock-statx-compat.so is missing beside the plugin: ls, stat and cp -a "
          "fail inside gVisor sandboxes (EINVAL from statx)");
  }

  void start(const airlock_sandbox_spec_v1& spec, airlock_sandbox_v1& out) override {
    if (spec.agent_exe_fd < 0 || spec.agent_channel_fd < 0 || spec.agent_argv == nullptr ||
        spec.agent_argv[0] == nullptr)
      throwError(Error("the agent's binary, channel or argv is not set"));
    auto netns = linkedNetns(spec);
    if (!netns) throwError(netns.error());
    if (::access(config_.runsc.c_str(), X_OK) != 0)
      throwError(Error("runsc (gvisor.runsc) cannot be run", config_.runsc, errno));
    auto dir = makeScratchDir(spec);
    if (!dir) throwError(dir.error());
    auto cleanup = [&] { removeTree(*dir); };

    BundleInputs in;
    in.spec = &spec;
    auto agent = hostPathOf(spec.agent_exe_fd);
    if (!agent) throwError(agent.error());
    in.agent_host_path = *agent;
    in.statx_compat_host_path = statx_compat_;
    if (*netns >= 0) in.netns_path = "/proc/self/ns/net";  // runsc runs in it (spawn)
    for (const char* const* a = spec.agent_argv + 1; *a != nullptr; ++a)
      in.agent_args.push_back(*a);
    const std::string bundle = *dir + "/bundle", state = *dir + "/state",
                      overlay = *dir + "/overlay";
    std::vector<std::string> dirs = {bundle, state};
    if (config_.overlay == "disk") dirs.push_back(overlay);
    for (const auto& d : dirs) {
      if (::mkdir(d.c_str(), 0700) != 0) {
        auto e = sysError("mkdir", d);
        cleanup();
        throwError(e.error());
      }
    }
    if (auto r = writeBundle(in, bundle); !r) {
      cleanup();
      throwError(r.error());
    }
    // runsc connects to the sink while it starts; it must be listening first.
    auto monitor_sink = MonitorSink::listen(*dir + "/monitor.sock");
    if (!monitor_sink) {
      cleanup();
      throwError(monitor_sink.error());
    }
    const std::string pod_init = *dir + "/pod-init.json";
    if (auto r = writeTextFile(pod_init, podInitConfig(*dir + "/monitor.sock")); !r) {
      cleanup();
      throwError(r.error());
    }

    SpawnOptions so;
    so.argv = {config_.runsc};
    for (auto& f : globalFlags(config_, state, *netns >= 0, overlay))
      so.argv.push_back(std::move(f));
    so.argv.push_back("--pod-init-config=" + pod_init);
    for (const char* a : {"run", "--bundle"}) so.argv.emplace_back(a);
    so.argv.push_back(bundle);
    so.argv.emplace_back(spec.sandbox_id);
    so.channel_fd = spec.agent_channel_fd;
    so.cgroup_v2_fd = spec.cgroup_v2_fd;
    so.attach_cgroups = spec.attach_cgroups;
    so.attach_ctx = spec.attach_ctx;
    so.netns_fd = *netns;
    const auto t0 = std::chrono::steady_clock::now();
    auto monitor = spawn(so);
    if (!monitor) {
      cleanup();
      throwError(monitor.error());
    }
    std::string text;
    auto ready = awaitReady(monitor->stderr_read.get(), t0 + kStartTimeout, text, *monitor_sink);
    if (ready && *ready && !monitor_sink->connected())
      ready = fail("runsc started the sandbox without connecting to its monitoring socket");
    if (!ready || !*ready) {
      // runsc failed (or hangs): end it; the sentry and gofer die with the sandbox's cgroup,
      // which the supervisor kills after a failed start.
      ::kill(monitor->pid, SIGKILL);
      int status = 0;
      while (::waitpid(monitor->pid, &status, 0) < 0 && errno == EINTR) {
      }
      cleanup();
      std::string why = !ready ? ready.error().message()
                               : "runsc exited with status " +
                                     std::to_string(WIFEXITED(status) ? WEXITSTATUS(status)
                                                                      : 128 + WTERMSIG(status));
      text = cleanRunscText(text);
      throwError(Error("runsc failed to start the sandbox (" + why + ")" +
                       (text.empty() ? std::string() : ": " + text)));
    }
    if (!text.empty()) log(2, "runsc said before the agent started: " + cleanRunscText(text));
    const auto ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0);
    log(0, std::string("sandbox '") + spec.sandbox_id + "': runsc pid " +
               std::to_string(monitor->pid) + ", agent ready after " +
               std::to_string(static_cast<int>(ms.count())) + " ms");
    out.struct_size = sizeof(airlock_sandbox_v1);
    out.pid = monitor->pid;
    out.pidfd = monitor->pidfd.release();
    auto* sb = new Sandbox{*dir, std::move(monitor->stderr_read), std::move(*monitor_sink)};
    if (out.struct_size >= offsetof(airlock_sandbox_v1, events_fd) + sizeof out.events_fd)
      out.events_fd = sb->monitor.eventsFd();
    out.handle = sb;
  }

  // The supervisor that started this sandbox died; its agent waits (--reattach-by-helper).
  // Monitoring first, so that nothing the sandbox does on the new channel goes unrecorded: its
  // sink died with the old supervisor, and `runsc trace create --force` points the sentry at a
  // new one. Then `runsc exec` runs `airlock-agent --rechannel` inside with the far end of a new
  // socket pair as its stdin, which it passes to the agent.
  int adopt(const airlock_adopt_spec_v1& spec, airlock_sandbox_v1& out) override {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(spec.timeout_ms);
    const std::string dir = std::string(spec.scratch_dir) + "/" + spec.sandbox_id;
    const std::string state = dir + "/state";
    // runsc's commands reach the sandbox through its control socket, an abstract one bound in
    // the network namespace `runsc run` runs in.
    UniqueFd netns(
        ::open(("/proc/" + std::to_string(spec.pid) + "/ns/net").c_str(), O_RDONLY | O_CLOEXEC));
    if (!netns) throwError(sysError("open", "the sandbox's network namespace").error());
    SpawnOptions so;
    so.cgroup_v2_fd = spec.cgroup_v2_fd;
    so.attach_cgroups = spec.attach_cgroups;
    so.attach_ctx = spec.attach_ctx;
    so.netns_fd = netns.get();
    auto command = [&](std::initializer_list<std::string> args) {
      std::vector<std::string> argv = {config_.runsc};
      for (auto& f : globalFlags(config_, state, false, dir + "/overlay"))
        argv.push_back(std::move(f));
      argv.insert(argv.end(), args);
      return argv;
    };

    auto sink = MonitorSink::listen(dir + "/monitor.sock");
    if (!sink) throwError(sink.error());
    const std::string session = dir + "/trace-session.json";
    ::unlink(session.c_str());
    if (auto r = writeTextFile(session, traceSessionConfig(dir + "/monitor.sock")); !r)
      throwError(r.error());
    so.argv = command({"trace", "create", "--force", "--config", session, spec.sandbox_id});
    if (auto r = runToEnd(so, deadline, &*sink); !r)
      throwError(Error("runsc trace create: " + r.error().message()));
    if (!sink->connected())
      throwError(Error("runsc trace create succeeded without connecting to the monitoring socket"));

    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
      throwError(sysError("socketpair", "agent channel").error());
    UniqueFd ours(pair[0]), theirs(pair[1]);
    so.channel_fd = theirs.get();
    so.channel_stdin_only = true;
    so.argv = command({"exec", "--user", "0:0", spec.sandbox_id, kAgentPath, "--rechannel"});
    if (auto r = runToEnd(so, deadline); !r)
      throwError(Error("handing the agent a new channel (runsc exec): " + r.error().message()));
    log(0, std::string("sandbox '") + spec.sandbox_id + "': adopted; runsc pid " +
               std::to_string(spec.pid));
    auto* sb = new Sandbox{dir, UniqueFd(), std::move(*sink)};
    out.handle = sb;
    out.events_fd = sb->monitor.eventsFd();
    return ours.release();
  }

  void readEvents(airlock_sandbox_v1& sandbox,
                  const std::function<void(const airlock_sandbox_event_v1&)>& emit) override {
    auto* sb = static_cast<Sandbox*>(sandbox.handle);
    if (sb == nullptr) return;
    if (auto r = sb->monitor.read(emit); !r) throwError(r.error());
  }

  // The supervisor has killed the sandbox's cgroup and reaped runsc: only files remain.
  void release(airlock_sandbox_v1& sandbox) noexcept override {
    auto* sb = static_cast<Sandbox*>(sandbox.handle);
    sandbox.handle = nullptr;
    if (sb == nullptr) return;
    if (sb->runsc_stderr) {
      // runsc's last words (a crash of the sentry is reported here), if any.
      char buf[2048];
      int fl = ::fcntl(sb->runsc_stderr.get(), F_GETFL);
      ::fcntl(sb->runsc_stderr.get(), F_SETFL, fl | O_NONBLOCK);
      ssize_t n = ::read(sb->runsc_stderr.get(), buf, sizeof buf);
      if (n > 0) log(2, "runsc: " + std::string(buf, static_cast<size_t>(n)));
    }
    removeTree(sb->dir);
    delete sb;
  }

 private:
  Config config_;
  std::string statx_compat_;  // "" when missing
};

}  // namespace
}  // namespace airlock::isolation::gvisor

AIRLOCK_ISOLATION_PLUGIN(airlock::isolation::gvisor::Gvisor, "airlock.isolation.gvisor", "0.1.0")
