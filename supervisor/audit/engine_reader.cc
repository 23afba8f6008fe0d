// The audit engine's ring buffer: claiming this process's ring, the reader thread or pump(), and
// dispatching each record to the sandbox it belongs to.
#include "supervisor/audit/engine_impl.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/epoll.h>

#include <cerrno>
#include <variant>

#include "supervisor/sys/lock_file.h"

namespace airlock::audit {

// This process's ring: a free reader index of the ring table, and a ring buffer there. With a
// pinned engine the ring buffer is pinned beside the maps and reused by the next process that
// takes the same index (creating 4 MiB of ring costs ~1 ms); what a previous owner left in it
// is read and ignored before any sandbox is attached.
Result<> AuditEngine::Impl::claimReader() {
  uint32_t index = 0;
  if (pinned()) {
    bool found = false;
    for (uint32_t k = 0; k < AIRLOCK_MAX_READERS && !found; ++k) {
      AIRLOCK_TRY_CTX(fd, sys::tryLockFileIn(options.lock_dir, lockName("reader", k)),
                      "audit reader");
      if (!fd) continue;
      reader_lock = std::move(fd);
      index = k;
      found = true;
    }
    if (!found) {
      return fail("audit: every one of " + std::to_string(AIRLOCK_MAX_READERS) +
                  " ring buffers of the pinned engine is taken by a running airlock process");
    }
  }
  reader_index = index;
  const std::string pin = pinned() ? obj.pin_dir + "/ring-" + std::to_string(index) : "";
  if (!pin.empty()) {
    UniqueFd existing(bpf_obj_get(pin.c_str()));
    bpf_map_info info{};
    uint32_t len = sizeof info;
    if (existing && bpf_obj_get_info_by_fd(existing.get(), &info, &len) == 0 &&
        info.type == BPF_MAP_TYPE_RINGBUF && info.max_entries == options.ring_bytes) {
      ring_fd = std::move(existing);
    }
  }
  if (!ring_fd) {
    ring_fd.reset(
        bpf_map_create(BPF_MAP_TYPE_RINGBUF, "airlock_events", 0, 0, options.ring_bytes, nullptr));
    if (!ring_fd)
      return sysError("bpf_map_create(ring buffer)", std::to_string(options.ring_bytes));
    if (!pin.empty()) {
      ::unlink(pin.c_str());
      if (bpf_obj_pin(ring_fd.get(), pin.c_str()) != 0) return sysError("bpf_obj_pin", pin);
    }
  }
  // An update of a map-in-map waits for an RCU grace period (~10 ms here): skipped when the
  // table already holds this ring (a reused pin), which is the common case.
  bpf_map_info info{};
  uint32_t len = sizeof info;
  uint32_t in_table = 0;
  if (bpf_obj_get_info_by_fd(ring_fd.get(), &info, &len) == 0 &&
      bpf_map_lookup_elem(obj.rings.get(), &index, &in_table) == 0 && in_table == info.id)
    return {};
  int fd = ring_fd.get();
  if (bpf_map_update_elem(obj.rings.get(), &index, &fd, BPF_ANY) != 0) {
    return sysError("bpf_map_update_elem(rings)", std::to_string(index));
  }
  return {};
}

void AuditEngine::Impl::dispatch(const Event& event) {
  uint32_t slot = std::visit([](const auto& e) { return e.origin.slot; }, event);
  std::shared_ptr<SandboxAudit::State> state;
  {
    std::lock_guard lock(mu);
    auto it = slots.find(slot);
    if (it == slots.end()) return;  // detached meanwhile
    state = it->second;
  }
  uint64_t mono = std::visit([](const auto& e) { return e.origin.time_ns; }, event);
  uint64_t wall = static_cast<uint64_t>(static_cast<int64_t>(mono) + realtime_offset_ns);
  const uint8_t generation =
      std::holds_alternative<NetEvent>(event) ? std::get<NetEvent>(event).generation : 0;
  std::lock_guard lock(state->mu);
  fileEvent(*state, event, wall, generation);
}

void AuditEngine::Impl::fileEvent(SandboxAudit::State& s, const Event& event, uint64_t wall_ns,
                                  uint8_t generation) {
  RecordIds ids = s.ids;
  if (!s.in_execution) ids.execution.clear();
  if (const auto* exec_event = std::get_if<ExecEvent>(&event)) {
    if (s.in_execution) s.summary.add(*exec_event);
    if (s.log) (void)s.log->write("exec", ids, wall_ns, execFields(*exec_event));
  } else if (const auto* net_event = std::get_if<NetEvent>(&event)) {
    const NetPolicy& policy = s.policies[generation & 1];
    if (s.in_execution) s.summary.add(*net_event, policy);
    if (s.log) (void)s.log->write("net", ids, wall_ns, netFields(*net_event, policy));
  }
}

int AuditEngine::Impl::onRecord(void* ctx, void* data, size_t size) {
  auto* self = static_cast<Impl*>(ctx);
  auto event = decodeEvent({static_cast<const uint8_t*>(data), size});
  if (!event) {
    self->undecodable.fetch_add(1, std::memory_order_relaxed);
    return 0;
  }
  self->dispatch(*event);
  return 0;
}

void AuditEngine::Impl::checkDrops() {
  std::vector<std::shared_ptr<SandboxAudit::State>> states;
  {
    std::lock_guard lock(mu);
    for (const auto& [slot, s] : slots) states.push_back(s);
  }
  for (const auto& s : states) {
    if (!s->on_drops) continue;
    uint64_t d = readDrops(s->slot);
    if (d > s->reported_drops) {
      s->reported_drops = d;
      s->on_drops(d);
    }
  }
}

// Dispatches what waits in the ring, and checks the drop counters once drop_check_interval
// has passed: the reader thread's loop body, or the caller's pump() without a thread.
void AuditEngine::Impl::consumeAndCheckDrops() {
  {
    std::lock_guard lock(consume_mu);
    ring_buffer__consume(ring);
  }
  if (std::chrono::steady_clock::now() >= next_drop_check) {
    checkDrops();
    next_drop_check = std::chrono::steady_clock::now() + options.drop_check_interval;
  }
}

void AuditEngine::Impl::readLoop() {
  while (!stopping.load()) {
    epoll_event ev[2];
    // Rounded up: truncated, the last millisecond before a drop check was a busy loop of
    // epoll_wait(0) calls (~500 a second on an idle supervisor).
    auto left = std::chrono::ceil<std::chrono::milliseconds>(next_drop_check -
                                                             std::chrono::steady_clock::now())
                    .count();
    int n = ::epoll_wait(epoll.get(), ev, 2, static_cast<int>(std::max<long long>(left, 0)));
    if (n < 0 && errno != EINTR) break;
    if (stopping.load()) break;
    consumeAndCheckDrops();
  }
}

Result<> AuditEngine::drain() {
  std::lock_guard lock(impl_->consume_mu);
  int n = ring_buffer__consume(impl_->ring);
  if (n < 0) return libbpfError(n, "ring_buffer__consume", "events");
  return {};
}

int AuditEngine::readableFd() const {
  return impl_->options.reader_thread ? -1 : ring_buffer__epoll_fd(impl_->ring);
}

void AuditEngine::pump() { impl_->consumeAndCheckDrops(); }

uint64_t AuditEngine::undecodableRecords() const { return impl_->undecodable.load(); }

}  // namespace airlock::audit
