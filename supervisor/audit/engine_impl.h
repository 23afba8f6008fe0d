// The audit engine's insides, shared by the files that implement it: engine.cc (loading, attaching,
// the public calls), engine_reader.cc (this process's ring buffer), engine_slots.cc (a sandbox's
// slot in the shared maps), engine_network.cc (its rules) and engine_counters.cc (its counters and
// execution summaries).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "airlock/unique_fd.h"
#include "supervisor/audit/bpf_handles.h"
#include "supervisor/audit/engine.h"
#include "supervisor/audit/engine_objects.h"
#include "supervisor/audit/events.h"

// bpf/syscall_count's skeleton. Only engine_counters.cc includes it: the header embeds the
// program's bytes.
struct airlock_syscall_count;

namespace airlock::audit {

struct SyscallSkelDeleter {
  void operator()(airlock_syscall_count* skel) const;
};
using SyscallSkel = std::unique_ptr<airlock_syscall_count, SyscallSkelDeleter>;

// A slot's counters at one moment: an execution's numbers are the difference of two.
struct Counters {
  airlock_net_counters net{};
  uint64_t drops = 0;
  std::map<uint32_t, uint64_t> syscalls;
};

struct SandboxAudit::State {
  uint32_t slot = 0;
  uint64_t cgroup_id = 0;
  std::string cgroup_path;
  UniqueFd cgroup_fd;
  bool cgroup_registered = false;
  bool enforce = false;
  bool count_syscalls = false;
  bool fail_closed = false;
  uint32_t audit_flags = 0;
  AuditLog* log = nullptr;
  std::function<void(uint64_t)> on_drops;
  uint64_t reported_drops = 0;  // reader thread only
  UniqueFd slot_lock;           // pinned engines: <version>.slot-<slot>, held while attached

  // Guards everything below (reader thread vs. the sandbox's owner).
  mutable std::mutex mu;
  RecordIds ids;
  NetPolicy policies[2];  // by rule generation
  uint32_t generation = 0;
  CompiledRules installed;  // the keys of `generation` in the LPM tries
  bool in_execution = false;
  AuditSummary summary;
  Counters at_begin;
  // A backend's own monitoring (setEventSource, record, recordLost).
  uint64_t backend_lost = 0;
  uint64_t backend_lost_at_begin = 0;
  mutable std::mutex source_mu;  // guards the two sources alone: they are called without mu
  std::function<void()> event_source;
  std::function<SandboxAudit::Traffic()> traffic_source;
};

struct AuditEngine::Impl {
  EngineOptions options;
  EngineObjects obj;
  SyscallSkel syscalls;  // loaded per process, on first demand
  BpfLink syscall_link;
  int syscall_users = 0;  // under mu
  uint64_t host_netns_cookie = 0;
  int ncpu = 1;
  // This process's ring buffer: rings[reader_index] in the (shared) ring table.
  uint32_t reader_index = 0;
  UniqueFd reader_lock;  // pinned engines: <version>.reader-<reader>
  UniqueFd ring_fd;
  int64_t realtime_offset_ns = 0;

  ring_buffer* ring = nullptr;
  std::mutex consume_mu;  // ring_buffer__consume is not reentrant: reader and drain() share it
  UniqueFd epoll;
  UniqueFd stop_fd;
  std::thread reader;
  std::atomic<uint64_t> undecodable{0};

  // A slot's claim and the purge of what a dead owner left in it run whole under this, and so
  // does releaseDeadOwnersCgroup: otherwise a sandbox adopted on one thread can find its cgroup
  // still registered to a dead owner's slot that another thread has just claimed but not yet
  // purged, and take the stale entry for a live one (adoptions run in parallel).
  std::mutex reclaim_mu;
  std::mutex mu;  // slots, used_slots, syscall counter state, the parent's attachment
  std::map<uint32_t, std::shared_ptr<SandboxAudit::State>> slots;
  std::vector<bool> used_slots = std::vector<bool>(AIRLOCK_MAX_SLOTS, false);
  uint32_t next_slot = 1;         // where the next claim starts looking
  uint64_t parent_cgroup_id = 0;  // the sandboxes' parent the cgroup programs were last seen on

  std::atomic<bool> stopping{false};
  std::chrono::steady_clock::time_point next_drop_check;  // read by one thread: reader or pump()

  ~Impl();

  int cgroupsFd() const { return obj.audited_cgroups.get(); }
  int slotConfigFd() const { return obj.slot_config.get(); }
  int dropsFd() const { return obj.drops.get(); }
  bool pinned() const { return !obj.pin_dir.empty(); }
  std::string lockName(const char* kind, uint32_t n) const {
    return obj.version + "." + kind + "-" + std::to_string(n);
  }

  // This process's ring buffer and what reads it (engine_reader.cc).
  Result<> claimReader();
  void dispatch(const Event& event);
  // Files one event of a sandbox: into its execution's summary and the log, with the rule list
  // of `generation` naming a connection's rule. Caller holds s.mu. (The ring's reader and
  // SandboxAudit::record share it.)
  static void fileEvent(SandboxAudit::State& s, const Event& event, uint64_t wall_ns,
                        uint8_t generation);
  static int onRecord(void* ctx, void* data, size_t size);
  void checkDrops();
  void consumeAndCheckDrops();
  void readLoop();

  // Slots in the shared maps (engine_slots.cc).
  Result<> writeSlotConfig(uint32_t slot, NetMode mode, uint32_t generation, uint32_t flags);
  Result<std::pair<uint32_t, UniqueFd>> claimSlot();  // caller holds mu
  bool purgeStaleSlot(uint32_t slot);
  void resetSlotState(uint32_t slot);
  Result<bool> releaseDeadOwnersCgroup(uint64_t cgroup_id);
  void detach(SandboxAudit::State& s);

  // A sandbox's network rules in the LPM tries (engine_network.cc).
  Result<> installRules(const CompiledRules& rules);
  void removeRules(const CompiledRules& rules);

  // Per-slot counters and the syscall counter (engine_counters.cc).
  uint64_t readDrops(uint32_t slot) const;
  airlock_net_counters readNetCounters(uint32_t slot) const;
  std::map<uint32_t, uint64_t> readSyscalls(uint32_t slot);
  Counters readCounters(const SandboxAudit::State& s);
  // Caller holds mu for these three.
  Result<> acquireSyscallCounter();
  void releaseSyscallCounter();
  int syscallCountsFd() const;  // while `syscalls` is loaded
};

}  // namespace airlock::audit
