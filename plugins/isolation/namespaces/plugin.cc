// airlock.isolation.namespaces: the sandbox is a process tree in fresh user, pid, mount, net,
// uts, ipc and cgroup namespaces, with a root assembled from read-only host paths (or an image)
// and tmpfs, whose PID 1 is airlock-agent.
//
// release() has nothing to undo on the host: every mount lives in the sandbox's own mount
// namespace and goes away with its last process; the cgroup, the channel and the scratch
// directory belong to the supervisor. It only joins clone helper threads that have finished.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <airlock/result.h>
#include <airlock/unique_fd.h>
#include <airlock/plugin.hpp>

#include "child.h"
#include "clone.h"
#include "dev.h"
#include "etc_files.h"
#include "mounts.h"
#include "net.h"
#include "plan.h"
#include "proc_mask.h"
#include "root_template.h"
#include "stages.h"
#include "user_ns.h"

namespace airlock::isolation {
namespace {

// How long the child may take from release to exec before it is killed.
constexpr int kSetupTimeoutMs = 10'000;
// The agent is the last thing the OOM killer picks; it resets its own children to 0.
constexpr const char* kAgentOomScoreAdj = "-998";

int64_t nowNs() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

[[noreturn]] void throwError(Stage stage, const Error& error) {
  Error e = error;
  e.wrap(std::string("stage ") + stageName(stage));
  throw sdk::PluginError(error.errnum() != 0 ? error.errnum() : EINVAL, e.message());
}

Result<void> validate(const airlock_sandbox_spec_v1& spec) {
  if (spec.agent_exe_fd < 0) return fail("agent_exe_fd is not set");
  if (spec.agent_channel_fd < 0) return fail("agent_channel_fd is not set");
  if (spec.agent_argv == nullptr || spec.agent_argv[0] == nullptr)
    return fail("agent_argv is empty");
  if (spec.hostname == nullptr || spec.hostname[0] == '\0' || std::strlen(spec.hostname) > 64 ||
      std::strchr(spec.hostname, '\n') != nullptr)
    return fail("hostname must be 1 to 64 characters without newlines",
                spec.hostname != nullptr ? spec.hostname : "");
  if (spec.id_count == 0) return fail("id_count is 0");
  if (uint64_t{spec.host_uid_base} + spec.id_count > 0xFFFFFFFFull ||
      uint64_t{spec.host_gid_base} + spec.id_count > 0xFFFFFFFFull)
    return fail("host id range overflows 32 bits");
  if (spec.host_uid_base == 0 || spec.host_gid_base == 0)
    return fail("host id range starts at 0: sandbox root would be host root");
  if (spec.user_uid >= spec.id_count || spec.user_gid >= spec.id_count)
    return fail("user_uid/user_gid outside the mapped id range");
  // tmpfs treats size=0 as unlimited: refuse instead of handing out the host's memory.
  if (spec.workspace_bytes == 0) return fail("workspace_bytes is 0");
  if (spec.tmp_bytes == 0) return fail("tmp_bytes is 0");
  if (spec.network_mode != AIRLOCK_NETWORK_LOOPBACK && spec.network_mode != AIRLOCK_NETWORK_LINKED)
    return fail("network_mode " + std::to_string(spec.network_mode) +
                " is not supported by this backend (0 loopback only, 1 linked)");
  return {};
}

// Everything the child will do, in stage order (stages.h). With `shared_root` (a clone of the
// root template, root_template.h) the child attaches it and adds only its own mounts.
Result<Plan> buildPlan(const airlock_sandbox_spec_v1& spec, UniqueFd shared_root) {
  auto ok = validate(spec);
  if (!ok) return Unexpected(ok.error());
  const RootPart part = shared_root ? RootPart::kPerSandbox : RootPart::kAll;
  Plan plan;
  planNetwork(plan);
  planWaitParent(plan);
  planIdentity(plan);
  auto layout = planRootfs(spec, plan, part, std::move(shared_root));
  if (!layout) return Unexpected(layout.error());
  if (part == RootPart::kAll) {
    planEtcFiles(spec, *layout, plan);
    auto mounts = planSpecMounts(spec, *layout, plan);
    if (!mounts) return Unexpected(mounts.error());
  }
  planProc(*layout, plan);
  planDev(*layout, plan, part);
  planPivotRoot(*layout, plan, part);
  planHostname(spec.hostname, plan);
  planExec(plan);
  return plan;
}

Result<void> writeOomScoreAdj(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/oom_score_adj";
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return sysError("open", path);
  // Lowering below 0 needs CAP_SYS_RESOURCE: the supervisor has it.
  if (::write(fd.get(), kAgentOomScoreAdj, std::strlen(kAgentOomScoreAdj)) < 0)
    return sysError("write(-998)", path);
  return {};
}

// Where the child's time goes: a shared page the child stamps at the end of each stage.
class StageClock {
 public:
  StageClock() {
    void* p = ::mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    page_ = p == MAP_FAILED ? nullptr : static_cast<int64_t*>(p);
  }
  ~StageClock() {
    if (page_ != nullptr) ::munmap(page_, kSize);
  }
  StageClock(const StageClock&) = delete;
  StageClock& operator=(const StageClock&) = delete;
  int64_t* slots() { return page_; }

  // "; stages (us after clone): wait_parent 180, identity 190, ..."
  std::string describe(int64_t t_clone) const {
    if (page_ == nullptr) return {};
    std::string out = "; stage ends (us after clone):";
    for (int i = 0; i <= static_cast<int>(Stage::kWaitExec); ++i) {
      if (page_[i] == 0) continue;
      out += std::string(" ") + kStageNames[i] + " " + std::to_string((page_[i] - t_clone) / 1000);
    }
    return out;
  }

 private:
  static constexpr size_t kSize = 4096;
  static_assert(sizeof(int64_t) * (static_cast<int>(Stage::kWaitExec) + 1) <= kSize);
  int64_t* page_ = nullptr;
};

class Namespaces final : public sdk::IsolationPlugin {
 public:
  using IsolationPlugin::IsolationPlugin;

  void start(const airlock_sandbox_spec_v1& spec, airlock_sandbox_v1& out) override {
    const int64_t t_start = nowNs();
    std::string why;
    UniqueFd shared_root = templates_.cloneFor(spec, why);
    if (!why.empty()) log(2, "root templates: " + why);
    const bool templated = shared_root.valid();
    auto plan = buildPlan(spec, std::move(shared_root));
    if (!plan) throwError(Stage::kPrepare, plan.error());

    std::vector<std::string> argv;
    for (const char* const* a = spec.agent_argv; *a != nullptr; ++a) argv.emplace_back(*a);
    ChildContext ctx;
    ctx.channel_fd = spec.agent_channel_fd;
    ctx.exe_fd = spec.agent_exe_fd;
    ctx.argv = plan->keepVector(argv);
    ctx.envp = plan->keepVector({"PATH=/usr/bin:/bin"});

    StageClock clock;
    ctx.stage_end_ns = clock.slots();
    const int64_t t_clone = nowNs();
    auto spawned = spawnChild(*plan, ctx, spec.cgroup_v2_fd);
    if (!spawned) throwError(Stage::kClone, spawned.error());
    const int64_t t_cloned = nowNs();
    ChildProcess& child = spawned->process;
    const pid_t pid = child.pid();

    // Parent half, while the child waits on the sync pipe. On any failure the ChildProcess
    // destructor kills and reaps the child.
    if (auto r = writeIdMapsFromParent(pid, spec); !r) throwError(Stage::kIdMaps, r.error());
    if (spec.attach_cgroups != nullptr) {
      airlock_error_v1 err{};
      if (int rc = spec.attach_cgroups(spec.attach_ctx, pid, &err); rc != 0) {
        err.message[sizeof err.message - 1] = '\0';
        throwError(Stage::kCgroups,
                   Error(std::string("attach_cgroups: ") + err.message, std::to_string(pid), rc));
      }
    }
    if (auto r = writeOomScoreAdj(pid); !r) {
      // Without CAP_SYS_RESOURCE (some container runtimes drop it) the kernel refuses a
      // negative value: degrade, and say so once.
      if (r.error().errnum() != EACCES) throwError(Stage::kOomScore, r.error());
      // The agent makes every sandboxed process oom_score_adj 1000, so sandboxed code is still
      // picked first; this only narrows the margin, hence debug level.
      if (!oom_warned_.exchange(true)) {
        log(0, "cannot set the agent's oom_score_adj to " + std::string(kAgentOomScoreAdj) +
                   " (the supervisor lacks CAP_SYS_RESOURCE): the OOM killer may pick the "
                   "agent before the sandbox's own processes");
      }
    }
    if (::write(spawned->sync_write.get(), "g", 1) != 1)
      throwError(Stage::kRelease, Error("write", "sync pipe", errno));
    spawned->sync_write.reset();
    const int64_t t_released = nowNs();

    FailureRecord record{};
    auto got = readFailure(spawned->error_read.get(), record);
    if (!got) throwError(Stage::kWaitExec, got.error());
    if (*got) {
      child.killAndReap();
      throw sdk::PluginError(record.err != 0 ? record.err : EINVAL, plan->describe(record));
    }
    const int64_t t_exec = nowNs();
    joinReturnedClones(std::move(spawned->waiter));

    out.struct_size = sizeof(airlock_sandbox_v1);
    out.pid = pid;
    out.pidfd = child.release().release();
    out.handle = nullptr;
    log(0, std::string("sandbox '") + (spec.sandbox_id != nullptr ? spec.sandbox_id : "") +
               "': agent pid " + std::to_string(pid) + ", clone3 " +
               std::to_string((t_cloned - t_clone) / 1000) + " us, released " +
               std::to_string((t_released - t_clone) / 1000) + " us, exec'd " +
               std::to_string((t_exec - t_clone) / 1000) + " us after clone (start " +
               std::to_string((t_exec - t_start) / 1000) + " us, root " +
               (templated ? "cloned from its template" : "built") + ")" + clock.describe(t_clone));
  }

  // Nothing on the host to free: see the comment at the top of this file.
  void release(airlock_sandbox_v1& sandbox) noexcept override {
    sandbox.handle = nullptr;
    joinReturnedClones();
  }

 private:
  std::atomic<bool> oom_warned_{false};
  RootTemplates templates_;
  // Clones whose agent has exec'd but whose helper thread may still be on its way out of
  // clone3 (clone.h). Joined before start() returned, it needed a CPU to wake up and exit
  // while the agent started: the handshake began ~1.5 ms after the agent's exec on a slow
  // 2-CPU host, ~0.25 ms since. They are joined on the next start() or release() instead,
  // and the rest when the plugin goes, before its code is unloaded.
  std::mutex clones_mu_;
  std::vector<CloneWaiter> clones_;

  // Joins the clones whose helper is back from clone3 (an instant wait), then keeps `waiter`.
  void joinReturnedClones(std::optional<CloneWaiter> waiter = std::nullopt) {
    std::lock_guard lock(clones_mu_);
    std::erase_if(clones_, [](const CloneWaiter& w) { return w.returned(); });
    if (waiter) clones_.push_back(std::move(*waiter));
  }

  // true: a child stage failed and record is filled; false: EOF, the agent was exec'd.
  static Result<bool> readFailure(int fd, FailureRecord& record) {
    pollfd p{fd, POLLIN, 0};
    for (;;) {
      int n = ::poll(&p, 1, kSetupTimeoutMs);
      if (n > 0) break;
      if (n == 0)
        return fail("sandbox setup did not reach exec within " +
                    std::to_string(kSetupTimeoutMs / 1000) + " s");
      if (errno != EINTR) return sysError("poll", "error pipe");
    }
    ssize_t n;
    do {
      n = ::read(fd, &record, sizeof record);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return sysError("read", "error pipe");
    if (n == 0) return false;
    if (static_cast<size_t>(n) != sizeof record) return fail("short failure record", "error pipe");
    return true;
  }
};

}  // namespace
}  // namespace airlock::isolation

AIRLOCK_ISOLATION_PLUGIN(airlock::isolation::Namespaces, "airlock.isolation.namespaces", "0.1.0")
