// The supervisor's eBPF audit and network-policy engine.
//
// Load once per supervisor process (AuditEngine::load): it loads bpf/exec_audit and
// bpf/net_policy (or opens them where another airlock process pinned them, engine_objects.h; and,
// on first demand, bpf/syscall_count), attaches the global exec hook, and starts one reader thread
// for this process's ring buffer. Each sandbox then calls attach() with its
// cgroup v2 directory: the directory's id joins the audited set, and its events are routed to the
// returned SandboxAudit. The connect/sendmsg/cgroup_skb programs are attached once to the parent
// all sandboxes share (engine_objects.h) and act on the cgroups registered there. Destroying the
// SandboxAudit unregisters the cgroup and frees the slot.
//
// Per execution: beginExecution(id) ... endExecution() → AuditSummary (and an "execution" record
// in the audit log). Events between executions are logged with no execution id.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "airlock/result.h"
#include "supervisor/audit/audit_log.h"
#include "supervisor/audit/events.h"
#include "supervisor/audit/net_rules.h"
#include "supervisor/audit/summary.h"

namespace airlock::audit {

struct EngineOptions {
  // Ring buffer size: a power of two and a multiple of the page size. 4 MiB holds ≈ 7000 exec
  // events; tests shrink it to provoke drops.
  uint32_t ring_bytes = 4u << 20;
  // How often the reader checks the per-sandbox drop counters even when no event arrives.
  std::chrono::milliseconds drop_check_interval{100};
  // Where the engine is shared with every other airlock process (engine_objects.h): the first
  // process loads and pins it, the next ones open it in ~0.1 ms instead of ~10 ms. "" loads a
  // private engine, gone with this process (tests that need one of their own).
  std::string pin_root;
  std::string lock_dir = "/run/lock/airlock-audit";
  // Who reads the ring buffer: a thread of the engine's own (`airlock serve`), or, when false,
  // the caller, which polls readableFd() and calls pump() while it waits (`airlock run`: starting
  // and joining the thread cost each one-shot run ~0.45 ms on a PVM host).
  bool reader_thread = true;
};

// Where `airlock run` and `airlock serve` pin the engine.
inline constexpr const char* kEnginePinRoot = "/sys/fs/bpf/airlock";

struct AttachOptions {
  std::string cgroup_v2_path;  // the sandbox's v2 directory (sys::SandboxCgroup::v2Path())
  std::string sandbox_id;
  std::string tenant;
  // Kernel-enforced connect/sendmsg policy. nullopt: the programs allow everything and record
  // nothing for this sandbox (bytes are still counted), for backends whose traffic does not come
  // from the sandbox's own sockets.
  std::optional<NetPolicy> network = NetPolicy{};
  bool audit_exec = true;
  bool audit_net = true;        // connect/sendmsg events (enforcement does not depend on it)
  bool count_syscalls = false;  // raw sys_enter: taxes every process on the host while attached
  bool fail_closed = false;     // drops make AuditSummary::failed() true
  // Borrowed; must outlive the SandboxAudit. Null: no log records.
  AuditLog* log = nullptr;
  // Called on the reader thread when this sandbox's drop count grows (total since attach). Must
  // not call back into the engine (drain/endExecution): it would wait for itself.
  std::function<void(uint64_t dropped)> on_drops;
};

class AuditEngine;

// One sandbox's attachment. Move-only through unique_ptr; the destructor detaches.
class SandboxAudit {
 public:
  ~SandboxAudit();
  SandboxAudit(const SandboxAudit&) = delete;
  SandboxAudit& operator=(const SandboxAudit&) = delete;

  uint32_t slot() const;
  uint64_t cgroupId() const;

  // Replaces the network policy at runtime. Atomic for the programs: a connect sees the old rules
  // or the new ones, never a mix. Fails (leaving the old policy) when the sandbox was attached
  // without enforcement or the rules do not compile.
  Result<> updateNetwork(const NetPolicy& policy);
  // Whether the sandbox was attached with network enforcement (updateNetwork can work).
  bool enforcesNetwork() const;
  // The network policy in force: the attach's, or the last successful updateNetwork's.
  NetPolicy network() const;
  // Who the records belong to from now on (a warm sandbox learns its tenant when claimed).
  void setTenant(const std::string& tenant);

  // Starts attributing events to `execution_id` (ends any previous one without a summary).
  void beginExecution(const std::string& execution_id);
  // Waits until every event already in the ring buffer is dispatched, then closes the execution:
  // counters are read, the summary is logged as an "execution" record and returned.
  Result<AuditSummary> endExecution();
  // Drops since attach (sum over CPUs).
  uint64_t dropsSinceAttach() const;

  // A backend whose sandbox the programs cannot see into (plugin ABI AIRLOCK_ISOLATION_OWN_AUDIT:
  // gVisor) reports the sandbox's execs and connects from its own monitoring:
  // - record() files one like the programs' own: into the execution's summary and the log
  //   (`wall_ns`: CLOCK_REALTIME). A NetEvent's decision is made by the caller
  //   (decideConnection) with the policy in force; its generation is ignored.
  // - recordLost() counts events the monitoring lost: drops of the execution (fail_closed).
  // - setEventSource() names what delivers the events already received (it calls record());
  //   beginExecution and endExecution call it first, so an execution's record is complete
  //   without waiting for a reader.
  void record(const Event& event, uint64_t wall_ns);
  void recordLost(uint64_t count);
  void setEventSource(std::function<void()> pull);
  // Such a backend's sockets are not the host's either, so the byte counters see nothing: the
  // counts of its link (sent = what left the sandbox) are read at the start and end of each
  // execution and added.
  struct Traffic {
    uint64_t sent_bytes = 0, received_bytes = 0, sent_packets = 0, received_packets = 0;
  };
  void setTrafficSource(std::function<Traffic()> read);

 private:
  friend class AuditEngine;
  struct State;
  void pullBackendEvents();
  SandboxAudit(std::shared_ptr<AuditEngine> engine, std::shared_ptr<State> state);
  std::shared_ptr<AuditEngine> engine_;
  std::shared_ptr<State> state_;
};

class AuditEngine : public std::enable_shared_from_this<AuditEngine> {
 public:
  // Needs CAP_BPF/CAP_SYS_ADMIN and BTF. The error names the program the kernel refused.
  static Result<std::shared_ptr<AuditEngine>> load(const EngineOptions& options = {});
  ~AuditEngine();
  AuditEngine(const AuditEngine&) = delete;
  AuditEngine& operator=(const AuditEngine&) = delete;

  Result<std::unique_ptr<SandboxAudit>> attach(const AttachOptions& options);

  // Dispatches every record now in the ring buffer (events of syscalls that already returned are
  // there) before returning. Not from the reader thread (on_drops).
  Result<> drain();
  // Without a reader thread (EngineOptions::reader_thread false): an fd that polls readable
  // while records wait in the ring, and the call that dispatches them (and checks the drop
  // counters when drop_check_interval has passed). -1 when the engine has its own thread.
  int readableFd() const;
  void pump();
  // Whether the raw sys_enter counter is attached right now (some sandbox asked for it).
  bool syscallCounterAttached() const;
  // Records that could not be decoded (wire mismatch): should stay 0.
  uint64_t undecodableRecords() const;
  // Shared through bpffs (EngineOptions::pin_root), and whether another process had loaded it.
  bool pinned() const;
  bool openedFromPins() const;
  // Hash of the programs and the protected network namespace; names the pinned directory.
  const std::string& version() const;

  struct Impl;

 private:
  friend class SandboxAudit;
  AuditEngine();
  std::unique_ptr<Impl> impl_;
};

}  // namespace airlock::audit
