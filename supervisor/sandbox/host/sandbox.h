// One live sandbox and every host resource it holds.
//
// Creation order (each step is undone, in reverse, if a later one fails):
//   id range lease → cgroup (limits) → eBPF audit attach (so PID 1's first exec is seen) →
//   agent channel → isolation backend start (clone, maps,
//   mounts, agent exec) → network link when the profile allows more than loopback
//   (docs/network.md) → handshake (Configure: credentials, rlimits, Landlock, seccomp).
// Teardown: ask the agent to stop, kill the whole cgroup, reap PID 1, let the backend release
// its state, remove the network link, detach the audit, remove the cgroup, return the id range.
// Nothing outlives the Sandbox object.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "airlock/plugin_abi_v1.h"
#include "airlock/policy/policy.h"
#include "airlock/protocol/messages.h"
#include "airlock/result.h"
#include "supervisor/audit/engine.h"
#include "supervisor/net/sandbox_network.h"
#include "supervisor/packages/proxy.h"
#include "supervisor/plugin/registry.h"
#include "supervisor/sandbox/agent/handshake.h"
#include "supervisor/sandbox/host/backend_events.h"
#include "supervisor/sandbox/host/id_range.h"
#include "supervisor/sandbox/host/rootfs_view.h"
#include "supervisor/sys/cgroup.h"

namespace airlock::sandbox {

inline constexpr uint32_t kSandboxUid = 1000;
inline constexpr uint32_t kSandboxGid = 1000;

// The supervisor's eBPF audit (docs/audit.md), loaded once per process: by `airlock serve` at
// start, by `airlock run` per run.
struct AuditContext {
  std::shared_ptr<audit::AuditEngine> engine;  // null when it could not load
  std::string load_error;                      // why engine is null
  audit::AuditLog* log = nullptr;              // the [audit] log (borrowed), or null
};

// Whether a profile needs the audit engine: it audits something, has network rules, or lets
// the sandbox out of loopback (only the eBPF connect policy keeps it from private ranges then).
bool needsAudit(const policy::Profile& profile);
// Whether a profile's sandboxes get a routed link (network.mode allowlist or open).
bool needsNetworkLink(const policy::Profile& profile);
// The profile's network section as the eBPF programs enforce it (validated profiles only), with
// host names in rules resolved by this process (a name that does not resolve is an error).
Result<audit::NetPolicy> netPolicyFor(const policy::Network& network);

// The host side of sandbox networks for this policy ([egress]). The nft table, the link names
// and the address ranges are host-wide names, so every airlock process on the host (whatever its
// state dir) coordinates through lock files in one host-wide directory.
inline constexpr const char* kNetworkLockDir = "/run/lock/airlock-network";
// Sandbox uid ranges are host-wide too: two supervisors on one host (a fleet's nodes, `airlock
// run` beside `airlock serve`), whatever their state dirs, must never hand out the same range.
inline constexpr const char* kIdRangeLockDir = "/run/lock/airlock-idmap";
net::NetworkOptions networkOptionsFor(const policy::Policy& policy);

struct SandboxOptions {
  std::string id;  // [a-z0-9-]{1,63}; generated when empty
  const policy::Profile* profile = nullptr;
  std::vector<MountEntry> mounts;      // read-only view (see rootfs_view.h)
  std::vector<HostMount> host_mounts;  // operators' directories (docs/transfer.md, "Mounts")
  std::string agent_path;              // the static airlock-agent
  std::string state_dir = "/run/airlock";
  // A persistent workspace: this ext4 image is loop-mounted and bound at /home/user instead of a
  // fresh tmpfs (workspace_mount.h). It is flock()ed while in use, so two sandboxes, even of two
  // supervisors, never mount it at once.
  std::string workspace_image;
  // > 0 (airlock serve): when this supervisor dies, the agent ends every execution but keeps the
  // sandbox this long for the next supervisor to adopt (Sandbox::adopt). 0: it ends at once.
  int reattach_grace_ms = 0;
  // Null: the sandbox is not audited (reviewers' checker sandboxes, tests). Otherwise, when the
  // profile needs audit (needsAudit), the cgroup is attached before PID 1 starts, and creation
  // fails (closed) when the engine did not load.
  std::shared_ptr<const AuditContext> audit;
  std::string tenant;  // for audit records; "" when not known yet (setAuditTenant)
  // The host side of sandbox networks, one per process; required when needsNetworkLink().
  std::shared_ptr<net::NetworkHost> network;
  // The package proxy, one per process; required when the profile's packages are on. It listens
  // on 127.0.0.1:package_port inside the sandbox (package_access.h).
  std::shared_ptr<packages::Proxy> packages;
  uint32_t package_port = 3141;
};

// What a new supervisor needs to take over a sandbox whose supervisor died (from the service's
// journal). The agent must be waiting for it (its reattach grace has not run out).
struct AdoptOptions {
  std::string id;
  const policy::Profile* profile = nullptr;
  std::string state_dir = "/run/airlock";
  uint32_t id_slot = 0;           // IdRangeLease::slot() of the sandbox
  pid_t agent_pid = 0;            // host pid of its PID 1
  uint64_t agent_start_time = 0;  // processStartTime(agent_pid) then: guards against pid reuse
  std::string workspace_image;    // as in SandboxOptions
  std::shared_ptr<const AuditContext> audit;  // as in SandboxOptions
  std::string tenant;
  std::shared_ptr<net::NetworkHost> network;  // as in SandboxOptions
  std::shared_ptr<packages::Proxy> packages;  // as in SandboxOptions
  uint32_t package_port = 3141;
};

// The kernel's start time of a process (clock ticks since boot; /proc/<pid>/stat field 22), or 0.
uint64_t processStartTime(pid_t pid);

struct Timings {
  double create_ms = 0;  // from create() entry to a configured agent
  // The steps of create(), in order, as (name, milliseconds).
  std::vector<std::pair<std::string, double>> steps;
};

class Sandbox {
 public:
  static Result<std::unique_ptr<Sandbox>> create(plugin::Registry& plugins,
                                                 const SandboxOptions& options);
  // Takes over an orphaned sandbox whose agent waits for a new supervisor. `lock` is its lock
  // file (orphans.h), already flock()ed by the caller. Every execution of the old supervisor has
  // ended; files, identity and limits are as they were.
  static Result<std::unique_ptr<Sandbox>> adopt(plugin::Registry& plugins,
                                                const AdoptOptions& options, UniqueFd lock);
  ~Sandbox();
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  const std::string& id() const { return id_; }
  pid_t pid() const { return sandbox_.pid; }
  uint32_t idSlot() const { return lease_ ? lease_->slot() : 0; }
  AgentHandshake& agent() { return *agent_; }
  // For an adopted sandbox: what its dead supervisor left (last request id, ended executions).
  const protocol::Reattached& leftBehind() const { return left_behind_; }
  // What the sandbox's agent can do beyond protocol version 1 (protocol::kFeature*): from its
  // Hello, or for an adopted sandbox its Reattached (an agent built before this supervisor may
  // lack features this one has).
  uint32_t agentFeatures() const { return agent_features_; }
  const protocol::Configure& configure() const { return configure_; }
  Result<sys::CgroupStats> cgroupStats() const { return cgroup_->stats(); }
  const Timings& timings() const { return timings_; }
  // The sandbox's eBPF attachment, or null when it is not audited. Shared so that an execution
  // ending while the sandbox is destroyed can still close its record (hold it briefly: the
  // attachment lives until the last holder lets go).
  audit::SandboxAudit* audit() { return audit_.get(); }
  std::shared_ptr<audit::SandboxAudit> auditHandle() { return audit_; }
  // The sandbox's routed link, or null when it has loopback only.
  const net::SandboxNetwork* network() const { return network_.get(); }
  // After the audit's rules changed (the API): the link's own filter follows, for a backend
  // whose connections the eBPF hooks cannot see. Nothing to do for the others.
  Result<> replaceNetworkRules(const audit::NetPolicy& policy);

  // Stops everything; idempotent. Reports the first cleanup step that failed.
  Result<> destroy();

 private:
  Sandbox() = default;
  Result<> mountPersistentWorkspace(const std::string& image);
  // For a backend that reports the sandbox's execs and connects itself: reads them into the audit.
  Result<> startBackendEvents(const policy::Profile& profile);
  // Attaches the audit to the cgroup when the profile needs it (see SandboxOptions::audit).
  Result<> attachAudit(const policy::Profile& profile,
                       const std::shared_ptr<const AuditContext>& ctx, const std::string& tenant);
  // Adds the routed link into PID 1's network namespace (never the supervisor's own).
  Result<> attachNetwork(const std::shared_ptr<net::NetworkHost>& host);
  // The package proxy's listener in its namespace, when its profile's packages are on.
  Result<> attachPackages(const std::shared_ptr<packages::Proxy>& proxy, uint32_t port,
                          const policy::Profile& profile, const std::string& tenant);
  // For a backend with its own network stack (AIRLOCK_ISOLATION_OWN_NETSTACK): a new namespace,
  // linked with the profile's rules enforced on the link, for start() to run the sandbox in.
  Result<UniqueFd> attachFilteredNetwork(const std::shared_ptr<net::NetworkHost>& host);
  void countTrafficOnTheLink();

  std::string id_;
  std::string state_dir_;
  UniqueFd lock_;  // flock on <state_dir>/sandboxes/<id>.lock: orphan detection (orphans.h)
  std::optional<IdRangeLease> lease_;
  std::optional<sys::SandboxCgroup> cgroup_;
  // Declared after cgroup_ and reset before it is removed in destroy(): no attachment outlives
  // the cgroup.
  std::shared_ptr<audit::SandboxAudit> audit_;
  std::unique_ptr<net::SandboxNetwork> network_;
  std::unique_ptr<packages::Proxy::Attachment> packages_;  // its listener, while it lives
  std::shared_ptr<plugin::IsolationBackend> backend_;
  // Execs and connects from the backend's own monitoring (ABI 1.6 OWN_AUDIT), into audit_.
  std::shared_ptr<BackendEvents> events_;
  airlock_sandbox_v1 sandbox_{sizeof(airlock_sandbox_v1), -1, -1, nullptr, -1};
  bool started_ = false;
  bool adopted_ = false;  // PID 1 is not our child (its first supervisor died): not ours to reap
  std::unique_ptr<AgentHandshake> agent_;
  protocol::Reattached left_behind_;
  uint32_t agent_features_ = 0;
  UniqueFd workspace_image_;     // flock()ed; the loop device shares the lock while mounted
  std::string workspace_mount_;  // <state_dir>/sandboxes/<id>.home, when mounted
  protocol::Configure configure_;
  Timings timings_;
};

// Builds the agent Configure message (credentials, rlimits, Landlock paths, seccomp) for a
// profile. Exposed for tests.
Result<protocol::Configure> configureFor(const policy::Profile& profile,
                                         const std::vector<std::string>& extra_syscalls);

// The isolation plugin's config as JSON: the profile's table for its backend ([gvisor] for
// gvisor, [microvm] for microvm with vcpus and memory_mb resolved from [limits]), "{}" for a
// backend without one.
std::string isolationConfigJson(const policy::Profile& profile);

// A fresh random sandbox id: 16 lowercase hex digits.
std::string newSandboxId();

}  // namespace airlock::sandbox
