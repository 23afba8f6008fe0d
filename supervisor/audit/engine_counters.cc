// A sandbox's counters in the audit engine's maps (drops, bytes, syscalls), the syscall counter
// loaded on first demand, and the per-execution summaries built from them.
#include "supervisor/audit/engine_impl.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <seccomp.h>
#include <time.h>

#include <cerrno>
#include <cstdlib>

#include "syscall_count.skel.h"

namespace airlock::audit {

namespace {

std::string syscallName(uint32_t nr) {
  char* name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, static_cast<int>(nr));
  if (name == nullptr) return "nr:" + std::to_string(nr);
  std::string out(name);
  std::free(name);
  return out;
}

}  // namespace

void SyscallSkelDeleter::operator()(airlock_syscall_count* skel) const {
  airlock_syscall_count__destroy(skel);
}

uint64_t AuditEngine::Impl::readDrops(uint32_t slot) const {
  std::vector<uint64_t> per_cpu(static_cast<size_t>(ncpu), 0);
  if (bpf_map_lookup_elem(dropsFd(), &slot, per_cpu.data()) != 0) return 0;
  uint64_t sum = 0;
  for (uint64_t v : per_cpu) sum += v;
  return sum;
}

airlock_net_counters AuditEngine::Impl::readNetCounters(uint32_t slot) const {
  std::vector<airlock_net_counters> per_cpu(static_cast<size_t>(ncpu));
  airlock_net_counters sum{};
  if (bpf_map_lookup_elem(obj.net_counters.get(), &slot, per_cpu.data()) != 0) return sum;
  for (const auto& c : per_cpu) {
    sum.tx_bytes += c.tx_bytes;
    sum.rx_bytes += c.rx_bytes;
    sum.tx_packets += c.tx_packets;
    sum.rx_packets += c.rx_packets;
  }
  return sum;
}

std::map<uint32_t, uint64_t> AuditEngine::Impl::readSyscalls(uint32_t slot) {
  std::map<uint32_t, uint64_t> out;
  std::lock_guard lock(mu);
  if (!syscalls) return out;
  int fd = bpf_map__fd(syscalls->maps.syscall_counts);
  std::vector<uint64_t> per_cpu(static_cast<size_t>(ncpu));
  airlock_syscall_key key{}, next{};
  const void* prev = nullptr;
  while (bpf_map_get_next_key(fd, prev, &next) == 0) {
    key = next;
    prev = &key;
    if (key.slot != slot) continue;
    if (bpf_map_lookup_elem(fd, &key, per_cpu.data()) != 0) continue;
    uint64_t sum = 0;
    for (uint64_t v : per_cpu) sum += v;
    out[key.nr] = sum;
  }
  return out;
}

Counters AuditEngine::Impl::readCounters(const SandboxAudit::State& s) {
  Counters c;
  c.net = readNetCounters(s.slot);
  std::function<SandboxAudit::Traffic()> traffic;
  {
    std::lock_guard lock(s.source_mu);
    traffic = s.traffic_source;
  }
  if (traffic) {
    const SandboxAudit::Traffic t = traffic();
    c.net.tx_bytes += t.sent_bytes;
    c.net.rx_bytes += t.received_bytes;
    c.net.tx_packets += t.sent_packets;
    c.net.rx_packets += t.received_packets;
  }
  c.drops = readDrops(s.slot);
  if (s.count_syscalls) c.syscalls = readSyscalls(s.slot);
  return c;
}

Result<> AuditEngine::Impl::acquireSyscallCounter() {
  // Caller holds mu.
  if (!syscalls) {
    ObjectOpenOptions open_opts;
    SyscallSkel skel(airlock_syscall_count__open_opts(open_opts.get()));
    if (!skel) return libbpfError(-errno, "open bpf object", "syscall_count");
    // The engine's cgroup table, slot configuration, ring table and drop counter.
    bpf_map__reuse_fd(skel->maps.audited_cgroups, cgroupsFd());
    bpf_map__reuse_fd(skel->maps.slot_config, slotConfigFd());
    bpf_map__reuse_fd(skel->maps.rings, obj.rings.get());
    bpf_map__reuse_fd(skel->maps.drops, dropsFd());
    if (int rc = airlock_syscall_count__load(skel.get()); rc != 0) {
      return libbpfError(rc, "load bpf program", "syscall_count (raw_tp/sys_enter)");
    }
    syscalls = std::move(skel);
  }
  if (syscall_users == 0) {
    bpf_link* link = bpf_program__attach(syscalls->progs.count_syscall);
    if (link == nullptr) return libbpfError(-errno, "attach", "raw_tp/sys_enter");
    syscall_link.reset(link);
  }
  ++syscall_users;
  return {};
}

void AuditEngine::Impl::releaseSyscallCounter() {
  // Caller holds mu. The last user takes the host-wide tax away.
  if (syscall_users > 0 && --syscall_users == 0) syscall_link.reset();
}

int AuditEngine::Impl::syscallCountsFd() const {
  return bpf_map__fd(syscalls->maps.syscall_counts);
}

bool AuditEngine::syscallCounterAttached() const {
  std::lock_guard lock(impl_->mu);
  return impl_->syscall_link != nullptr;
}

uint64_t SandboxAudit::dropsSinceAttach() const { return engine_->impl_->readDrops(state_->slot); }

void SandboxAudit::beginExecution(const std::string& execution_id) {
  // Records of what ran before (PID 1's own exec) belong to no execution: dispatch them first,
  // whether a reader thread has got to them yet or the caller pumps the ring. An error here
  // shows again in endExecution's drain.
  pullBackendEvents();
  (void)engine_->drain();
  Counters now = engine_->impl_->readCounters(*state_);
  std::lock_guard lock(state_->mu);
  state_->backend_lost_at_begin = state_->backend_lost;
  state_->ids.execution = execution_id;
  state_->in_execution = true;
  state_->summary = AuditSummary{};
  state_->summary.fail_closed = state_->fail_closed;
  state_->summary.syscalls_counted = state_->count_syscalls;
  state_->at_begin = std::move(now);
}

Result<AuditSummary> SandboxAudit::endExecution() {
  auto& m = *engine_->impl_;
  pullBackendEvents();
  if (auto r = engine_->drain(); !r) return Unexpected(std::move(r.error()).wrap("audit"));
  Counters now = m.readCounters(*state_);
  std::lock_guard lock(state_->mu);
  if (!state_->in_execution) return fail("audit: endExecution without beginExecution");
  AuditSummary out = std::move(state_->summary);
  const Counters& then = state_->at_begin;
  out.bytes_sent = now.net.tx_bytes - then.net.tx_bytes;
  out.bytes_received = now.net.rx_bytes - then.net.rx_bytes;
  out.packets_sent = now.net.tx_packets - then.net.tx_packets;
  out.packets_received = now.net.rx_packets - then.net.rx_packets;
  out.events_dropped =
      now.drops - then.drops + (state_->backend_lost - state_->backend_lost_at_begin);
  for (const auto& [nr, count] : now.syscalls) {
    auto it = then.syscalls.find(nr);
    uint64_t before = it == then.syscalls.end() ? 0 : it->second;
    if (count > before) out.syscalls[syscallName(nr)] += count - before;
  }
  if (state_->log) {
    timespec rt{};
    ::clock_gettime(CLOCK_REALTIME, &rt);
    uint64_t wall = static_cast<uint64_t>(rt.tv_sec) * 1000000000ull + rt.tv_nsec;
    (void)state_->log->write("execution", state_->ids, wall, {{"summary", out.toJson()}});
  }
  state_->in_execution = false;
  state_->summary = AuditSummary{};
  state_->ids.execution.clear();
  return out;
}

void SandboxAudit::setEventSource(std::function<void()> pull) {
  std::lock_guard lock(state_->source_mu);
  state_->event_source = std::move(pull);
}

void SandboxAudit::pullBackendEvents() {
  std::function<void()> pull;
  {
    std::lock_guard lock(state_->source_mu);
    pull = state_->event_source;
  }
  if (pull) pull();  // calls record(): not under state_->mu
}

void SandboxAudit::record(const Event& event, uint64_t wall_ns) {
  std::lock_guard lock(state_->mu);
  // Decided by the caller with the rules in force: the current generation's.
  AuditEngine::Impl::fileEvent(*state_, event, wall_ns, static_cast<uint8_t>(state_->generation));
}

void SandboxAudit::recordLost(uint64_t count) {
  std::lock_guard lock(state_->mu);
  state_->backend_lost += count;
}

void SandboxAudit::setTrafficSource(std::function<Traffic()> read) {
  std::lock_guard lock(state_->source_mu);
  state_->traffic_source = std::move(read);
}

}  // namespace airlock::audit
