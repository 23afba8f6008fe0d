// AuditEngine: skeleton loading, per-sandbox attachment, the ring-buffer reader.
#include "supervisor/audit/engine.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <seccomp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "airlock/unique_fd.h"
#include "supervisor/audit/bpf_handles.h"
#include "supervisor/audit/engine_objects.h"
#include "supervisor/sys/cgroup.h"
#include "supervisor/sys/lock_file.h"
#include "syscall_count.skel.h"

namespace airlock::audit {

namespace {

using SyscallSkel = BpfSkel<airlock_syscall_count, airlock_syscall_count__destroy>;

int64_t realtimeMinusMonotonicNs() {
  timespec rt{}, mono{};
  ::clock_gettime(CLOCK_REALTIME, &rt);
  ::clock_gettime(CLOCK_MONOTONIC, &mono);
  return (int64_t{rt.tv_sec} - mono.tv_sec) * 1000000000 + (rt.tv_nsec - mono.tv_nsec);
}

// The network namespace cookie of this process: loopback there is the host's.
Result<uint64_t> ownNetnsCookie() {
  UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s) return sysError("socket", "netns cookie probe");
  uint64_t cookie = 0;
  socklen_t len = sizeof cookie;
  if (::getsockopt(s.get(), SOL_SOCKET, SO_NETNS_COOKIE, &cookie, &len) != 0) {
    return sysError("getsockopt(SO_NETNS_COOKIE)", "netns cookie probe");
  }
  return cookie;
}

// The directory `path` sits in, spelled out (for messages, and for removing it when a private
// engine ends); trailing slashes do not count.
std::string parentPathOf(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

struct Counters {
  airlock_net_counters net{};
  uint64_t drops = 0;
  std::map<uint32_t, uint64_t> syscalls;
};

std::string syscallName(uint32_t nr) {
  char* name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, static_cast<int>(nr));
  if (name == nullptr) return "nr:" + std::to_string(nr);
  std::string out(name);
  std::free(name);
  return out;
}

}  // namespace

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

  std::mutex mu;  // slots, used_slots, syscall counter state, the parent's attachment
  std::map<uint32_t, std::shared_ptr<SandboxAudit::State>> slots;
  std::vector<bool> used_slots = std::vector<bool>(AIRLOCK_MAX_SLOTS, false);
  uint32_t next_slot = 1;         // where the next claim starts looking
  uint64_t parent_cgroup_id = 0;  // the sandboxes' parent the cgroup programs were last seen on

  std::atomic<bool> stopping{false};
  std::chrono::steady_clock::time_point next_drop_check;  // read by one thread: reader or pump()

  ~Impl() {
    if (reader.joinable()) {
      stopping = true;
      uint64_t one = 1;
      // If the wake-up write fails the reader still sees the flag at its next drop check.
      (void)!::write(stop_fd.get(), &one, sizeof one);
      reader.join();
    }
    if (ring != nullptr) ring_buffer__free(ring);
    // A private engine's programs leave the sandboxes' parent with it; the parent goes too once
    // nothing else holds it (sys::SandboxCgroup left it for the programs).
    for (auto& [id, parent] : obj.parent_links) {
      parent.links.clear();
      sys::removeUnusedV2Parent(parent.path);
    }
  }

  int cgroupsFd() const { return obj.audited_cgroups.get(); }
  int slotConfigFd() const { return obj.slot_config.get(); }
  int dropsFd() const { return obj.drops.get(); }
  bool pinned() const { return !obj.pin_dir.empty(); }
  std::string lockName(const char* kind, uint32_t n) const {
    return obj.version + "." + kind + "-" + std::to_string(n);
  }

  uint64_t readDrops(uint32_t slot) const {
    std::vector<uint64_t> per_cpu(static_cast<size_t>(ncpu), 0);
    if (bpf_map_lookup_elem(dropsFd(), &slot, per_cpu.data()) != 0) return 0;
    uint64_t sum = 0;
    for (uint64_t v : per_cpu) sum += v;
    return sum;
  }

  airlock_net_counters readNetCounters(uint32_t slot) const {
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

  std::map<uint32_t, uint64_t> readSyscalls(uint32_t slot) {
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

  Counters readCounters(const SandboxAudit::State& s) {
    Counters c;
    c.net = readNetCounters(s.slot);
    c.drops = readDrops(s.slot);
    if (s.count_syscalls) c.syscalls = readSyscalls(s.slot);
    return c;
  }

  // Deletes every key of `map_fd` for which doomed(key) holds (collected first: deleting while
  // iterating would restart the walk).
  template <typename Key, typename Pred>
  void deleteKeysWhere(int map_fd, Pred doomed) {
    std::vector<Key> found;
    Key key{}, next{};
    const void* prev = nullptr;
    while (bpf_map_get_next_key(map_fd, prev, &next) == 0) {
      key = next;
      prev = &key;
      if (doomed(key)) found.push_back(key);
    }
    for (const auto& k : found) bpf_map_delete_elem(map_fd, &k);
  }
  // Every key whose leading u32 is `slot` (seen_destinations, syscall_counts).
  template <typename Key>
  void deleteSlotKeys(int map_fd, uint32_t slot) {
    deleteKeysWhere<Key>(map_fd, [slot](const Key& k) { return k.slot == slot; });
  }
  template <typename Value>
  void zeroPerCpu(int map_fd, uint32_t slot) {
    std::vector<Value> zeros(static_cast<size_t>(ncpu));
    bpf_map_update_elem(map_fd, &slot, zeros.data(), BPF_ANY);
  }

  void dispatch(const Event& event) {
    uint32_t slot = std::visit([](const auto& e) { return e.origin.slot; }, event);
    std::shared_ptr<SandboxAudit::State> state;
    {
      std::lock_guard lock(mu);
      auto it = slots.find(slot);
      if (it == slots.end()) return;  // detached meanwhile
      state = it->second;
    }
    std::lock_guard lock(state->mu);
    uint64_t mono = std::visit([](const auto& e) { return e.origin.time_ns; }, event);
    uint64_t wall = static_cast<uint64_t>(static_cast<int64_t>(mono) + realtime_offset_ns);
    RecordIds ids = state->ids;
    if (!state->in_execution) ids.execution.clear();
    if (const auto* exec_event = std::get_if<ExecEvent>(&event)) {
      if (state->in_execution) state->summary.add(*exec_event);
      if (state->log) (void)state->log->write("exec", ids, wall, execFields(*exec_event));
    } else if (const auto* net_event = std::get_if<NetEvent>(&event)) {
      const NetPolicy& policy = state->policies[net_event->generation & 1];
      if (state->in_execution) state->summary.add(*net_event, policy);
      if (state->log) (void)state->log->write("net", ids, wall, netFields(*net_event, policy));
    }
  }

  static int onRecord(void* ctx, void* data, size_t size) {
    auto* self = static_cast<Impl*>(ctx);
    auto event = decodeEvent({static_cast<const uint8_t*>(data), size});
    if (!event) {
      self->undecodable.fetch_add(1, std::memory_order_relaxed);
      return 0;
    }
    self->dispatch(*event);
    return 0;
  }

  void checkDrops() {
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
  void consumeAndCheckDrops() {
    {
      std::lock_guard lock(consume_mu);
      ring_buffer__consume(ring);
    }
    if (std::chrono::steady_clock::now() >= next_drop_check) {
      checkDrops();
      next_drop_check = std::chrono::steady_clock::now() + options.drop_check_interval;
    }
  }

  void readLoop() {
    while (!stopping.load()) {
      epoll_event ev[2];
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      next_drop_check - std::chrono::steady_clock::now())
                      .count();
      int n = ::epoll_wait(epoll.get(), ev, 2, static_cast<int>(std::max<long long>(left, 0)));
      if (n < 0 && errno != EINTR) break;
      if (stopping.load()) break;
      consumeAndCheckDrops();
    }
  }

  Result<> acquireSyscallCounter() {
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

  void releaseSyscallCounter() {
    // Caller holds mu. The last user takes the host-wide tax away.
    if (syscall_users > 0 && --syscall_users == 0) syscall_link.reset();
  }

  Result<> writeSlotConfig(uint32_t slot, NetMode mode, uint32_t generation, uint32_t flags) {
    airlock_slot_config config{AIRLOCK_NET_WORD(static_cast<uint32_t>(mode), generation), flags,
                               reader_index, AIRLOCK_SLOT_CLAIMED};
    if (bpf_map_update_elem(slotConfigFd(), &slot, &config, BPF_ANY) != 0) {
      return sysError("bpf_map_update_elem(slot_config)", std::to_string(slot));
    }
    return {};
  }

  Result<> installRules(const CompiledRules& rules) {
    int v4 = obj.rules_v4.get(), v6 = obj.rules_v6.get();
    for (const auto& [key, value] : rules.v4) {
      if (bpf_map_update_elem(v4, &key, &value, BPF_ANY) != 0) {
        int e = errno;
        removeRules(rules);
        errno = e;
        return sysError("bpf_map_update_elem(rules_v4)");
      }
    }
    for (const auto& [key, value] : rules.v6) {
      if (bpf_map_update_elem(v6, &key, &value, BPF_ANY) != 0) {
        int e = errno;
        removeRules(rules);
        errno = e;
        return sysError("bpf_map_update_elem(rules_v6)");
      }
    }
    return {};
  }

  void removeRules(const CompiledRules& rules) {
    for (const auto& [key, value] : rules.v4) bpf_map_delete_elem(obj.rules_v4.get(), &key);
    for (const auto& [key, value] : rules.v6) bpf_map_delete_elem(obj.rules_v6.get(), &key);
  }

  // Claims a free slot for a sandbox: one no sandbox of this process uses and, with a pinned
  // engine, whose lock file no other process holds. Caller holds mu.
  Result<std::pair<uint32_t, UniqueFd>> claimSlot() {
    for (uint32_t i = 0; i < AIRLOCK_MAX_SLOTS - 1; ++i) {
      uint32_t s = 1 + (next_slot - 1 + i) % (AIRLOCK_MAX_SLOTS - 1);
      if (used_slots[s]) continue;
      UniqueFd lock;
      if (pinned()) {
        AIRLOCK_TRY_CTX(fd, sys::tryLockFileIn(options.lock_dir, lockName("slot", s)),
                        "audit slot");
        if (!fd) continue;  // another airlock process's sandbox
        lock = std::move(fd);
      }
      used_slots[s] = true;
      next_slot = s % (AIRLOCK_MAX_SLOTS - 1) + 1;
      return std::pair{s, std::move(lock)};
    }
    return fail("audit: every one of " + std::to_string(AIRLOCK_MAX_SLOTS - 1) +
                " audit slots is in use");
  }

  // A slot whose configuration still says claimed was left by a process that died (killed with
  // -9) while a sandbox held it: its cgroup entries, rules and per-slot state are still in the
  // shared maps. Removes them, so the slot starts clean and no leftover rule matches. True when
  // there was something to purge.
  bool purgeStaleSlot(uint32_t slot) {
    airlock_slot_config config{};
    if (bpf_map_lookup_elem(slotConfigFd(), &slot, &config) != 0) return false;
    if (config.state != AIRLOCK_SLOT_CLAIMED) return false;
    deleteKeysWhere<uint64_t>(cgroupsFd(), [&](uint64_t cgroup_id) {
      airlock_cgroup_entry entry{};
      return bpf_map_lookup_elem(cgroupsFd(), &cgroup_id, &entry) == 0 && entry.slot == slot;
    });
    // Rule keys carry AIRLOCK_RULE_OWNER(slot, generation), big-endian.
    auto owned = [slot](const auto& key) { return (ntohl(key.owner) >> 1) == slot; };
    deleteKeysWhere<airlock_rule_key_v4>(obj.rules_v4.get(), owned);
    deleteKeysWhere<airlock_rule_key_v6>(obj.rules_v6.get(), owned);
    resetSlotState(slot);
    return true;
  }

  // Per-slot state back to zero: a later sandbox in this slot starts from zero and sees its own
  // first UDP destinations. The configuration last: while it says claimed, a crash here is purged
  // again by the next claimer.
  void resetSlotState(uint32_t slot) {
    zeroPerCpu<uint64_t>(dropsFd(), slot);
    zeroPerCpu<airlock_net_counters>(obj.net_counters.get(), slot);
    deleteSlotKeys<airlock_destination_key>(obj.seen_destinations.get(), slot);
    airlock_slot_config empty{};
    bpf_map_update_elem(slotConfigFd(), &slot, &empty, BPF_ANY);
  }

  // With a pinned engine a cgroup can still be registered by a process that died (a `serve`
  // killed with -9 whose sandbox the next one adopts). True when that slot was purged, so the
  // cgroup can be registered again; false when its owner is alive.
  Result<bool> releaseDeadOwnersCgroup(uint64_t cgroup_id) {
    airlock_cgroup_entry entry{};
    if (!pinned() || bpf_map_lookup_elem(cgroupsFd(), &cgroup_id, &entry) != 0) return false;
    {
      std::lock_guard lock(mu);
      if (used_slots[entry.slot]) return false;  // ours
    }
    AIRLOCK_TRY_CTX(fd, sys::tryLockFileIn(options.lock_dir, lockName("slot", entry.slot)),
                    "audit slot");
    if (!fd) return false;  // its owner is alive
    purgeStaleSlot(entry.slot);
    return true;
  }

  // Undoes whatever attach() got done; safe on a partial state.
  void detach(SandboxAudit::State& s) {
    {
      std::lock_guard lock(mu);
      slots.erase(s.slot);
    }
    // Unregistered first: from then on the programs leave this cgroup alone, so nothing decides
    // with a half-removed state.
    if (s.cgroup_registered) bpf_map_delete_elem(cgroupsFd(), &s.cgroup_id);
    {
      std::lock_guard lock(s.mu);
      removeRules(s.installed);
      s.installed = {};
    }
    if (s.slot == 0) return;
    resetSlotState(s.slot);
    std::lock_guard lock(mu);
    if (s.count_syscalls) {
      if (syscalls)
        deleteSlotKeys<airlock_syscall_key>(bpf_map__fd(syscalls->maps.syscall_counts), s.slot);
      releaseSyscallCounter();
    }
    used_slots[s.slot] = false;
    s.slot_lock.reset();  // after the slot is clean: the next claimer finds nothing to purge
  }

  // This process's ring: a free reader index of the ring table, and a ring buffer there. With a
  // pinned engine the ring buffer is pinned beside the maps and reused by the next process that
  // takes the same index (creating 4 MiB of ring costs ~1 ms); what a previous owner left in it
  // is read and ignored before any sandbox is attached.
  Result<> claimReader() {
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
      ring_fd.reset(bpf_map_create(BPF_MAP_TYPE_RINGBUF, "airlock_events", 0, 0, options.ring_bytes,
                                   nullptr));
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
};

// ---------------------------------------------------------------------------------------------

AuditEngine::AuditEngine() : impl_(std::make_unique<Impl>()) {}
AuditEngine::~AuditEngine() = default;

Result<std::shared_ptr<AuditEngine>> AuditEngine::load(const EngineOptions& options) {
  captureLibbpfMessages();
  long page = ::sysconf(_SC_PAGESIZE);
  if (options.ring_bytes == 0 || (options.ring_bytes & (options.ring_bytes - 1)) != 0 ||
      options.ring_bytes % static_cast<uint32_t>(page) != 0) {
    return fail("audit: ring buffer size must be a power of two and a multiple of the page size",
                std::to_string(options.ring_bytes));
  }
  std::shared_ptr<AuditEngine> engine(new AuditEngine());
  Impl& m = *engine->impl_;
  m.options = options;
  m.ncpu = libbpf_num_possible_cpus();
  if (m.ncpu <= 0) return libbpfError(m.ncpu, "libbpf_num_possible_cpus");
  m.realtime_offset_ns = realtimeMinusMonotonicNs();
  AIRLOCK_TRY_CTX(cookie, ownNetnsCookie(), "audit");
  m.host_netns_cookie = cookie;

  auto objects = openOrLoadEngineObjects({.pin_root = options.pin_root,
                                          .lock_dir = options.lock_dir,
                                          .host_netns_cookie = m.host_netns_cookie});
  if (!objects) return Unexpected(objects.error());
  m.obj = std::move(*objects);
  if (auto r = m.claimReader(); !r) return Unexpected(r.error());

  m.ring = ring_buffer__new(m.ring_fd.get(), &Impl::onRecord, &m, nullptr);
  if (m.ring == nullptr) return libbpfError(-errno, "ring_buffer__new", "events");
  // A reused ring may hold a previous owner's records: read (and ignore) them before any sandbox
  // of ours exists.
  ring_buffer__consume(m.ring);
  m.epoll.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!m.epoll) return sysError("epoll_create1", "audit reader");
  m.stop_fd.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!m.stop_fd) return sysError("eventfd", "audit reader");
  for (int fd : {ring_buffer__epoll_fd(m.ring), m.stop_fd.get()}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(m.epoll.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      return sysError("epoll_ctl", "audit reader");
    }
  }
  m.next_drop_check = std::chrono::steady_clock::now() + m.options.drop_check_interval;
  if (m.options.reader_thread) m.reader = std::thread([&m] { m.readLoop(); });
  return engine;
}

Result<std::unique_ptr<SandboxAudit>> AuditEngine::attach(const AttachOptions& options) {
  Impl& m = *impl_;
  const std::string& path = options.cgroup_v2_path;
  auto ctx = "audit attach '" + path + "'";
  auto state = std::make_shared<SandboxAudit::State>();
  state->cgroup_path = path;
  state->cgroup_fd.reset(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!state->cgroup_fd) return sysError(ctx + ": open", path);
  struct statfs fs {};
  if (::fstatfs(state->cgroup_fd.get(), &fs) != 0) return sysError(ctx + ": fstatfs", path);
  if (fs.f_type != CGROUP2_SUPER_MAGIC) {
    return fail(ctx + ": not a cgroup v2 directory (eBPF scoping needs the unified hierarchy)",
                path);
  }
  struct stat st {};
  if (::fstat(state->cgroup_fd.get(), &st) != 0) return sysError(ctx + ": fstat", path);
  state->cgroup_id = st.st_ino;  // a cgroup2 directory's inode number is its cgroup id
  state->ids = {options.sandbox_id, options.tenant, {}};
  state->enforce = options.network.has_value();
  state->fail_closed = options.fail_closed;
  state->log = options.log;
  state->on_drops = options.on_drops;
  state->audit_flags = (options.audit_exec ? uint32_t{AIRLOCK_AUDIT_EXEC} : 0u) |
                       (options.audit_net ? uint32_t{AIRLOCK_AUDIT_NET} : 0u) |
                       (options.count_syscalls ? uint32_t{AIRLOCK_AUDIT_SYSCALLS} : 0u) |
                       (state->enforce ? uint32_t{AIRLOCK_AUDIT_ENFORCE} : 0u);
  // The programs sit on the parent (engine_objects.h). Never the v2 root: that would put them on
  // every socket of the host.
  struct stat parent_st {};
  if (::fstatat(state->cgroup_fd.get(), "..", &parent_st, 0) != 0)
    return sysError(ctx + ": stat", path + "/..");
  if (parent_st.st_ino == 1) {
    return fail(ctx + ": a sandbox cgroup must not sit directly under the cgroup v2 root (the " +
                    "audit programs attach to its parent)",
                path);
  }
  {
    std::lock_guard lock(m.mu);
    if (m.parent_cgroup_id != parent_st.st_ino) {
      UniqueFd parent(::openat(state->cgroup_fd.get(), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      if (!parent) return sysError(ctx + ": open", path + "/..");
      if (auto r = attachToSandboxParent(m.obj, parent.get(), parent_st.st_ino, parentPathOf(path),
                                         m.options.lock_dir);
          !r)
        return Unexpected(std::move(r.error()).wrap(ctx));
      m.parent_cgroup_id = parent_st.st_ino;
    }
  }
  {
    std::lock_guard lock(m.mu);
    auto claimed = m.claimSlot();
    if (!claimed) return Unexpected(std::move(claimed.error()).wrap(ctx));
    state->slot = claimed->first;
    state->slot_lock = std::move(claimed->second);
  }
  if (m.purgeStaleSlot(state->slot)) {
    // Records of the dead owner's sandbox may still be in this process's ring (a reused reader
    // index): read them while the slot is not ours yet, so none is taken for this sandbox's.
    if (auto r = drain(); !r) return Unexpected(std::move(r.error()).wrap(ctx));
  }
  // From here the handle's destructor undoes whatever was done.
  std::unique_ptr<SandboxAudit> handle(new SandboxAudit(shared_from_this(), state));

  NetPolicy policy = options.network.value_or(NetPolicy{});
  if (state->enforce) {
    AIRLOCK_TRY_CTX(compiled, compileRules(policy, state->slot, 0), ctx);
    if (auto r = m.installRules(compiled); !r) return Unexpected(std::move(r.error()).wrap(ctx));
    std::lock_guard lock(state->mu);
    state->installed = std::move(compiled);
    state->policies[0] = policy;
  }
  if (auto r = m.writeSlotConfig(state->slot, policy.mode, 0, state->audit_flags); !r) {
    return Unexpected(std::move(r.error()).wrap(ctx));
  }
  airlock_cgroup_entry entry{state->slot, 0};
  int rc = bpf_map_update_elem(m.cgroupsFd(), &state->cgroup_id, &entry, BPF_NOEXIST);
  if (rc != 0 && errno == EEXIST) {
    AIRLOCK_TRY_CTX(released, m.releaseDeadOwnersCgroup(state->cgroup_id), ctx);
    if (!released) return fail(ctx + ": this cgroup is already attached", path);
    rc = bpf_map_update_elem(m.cgroupsFd(), &state->cgroup_id, &entry, BPF_NOEXIST);
  }
  if (rc != 0) {
    if (errno == EEXIST) return fail(ctx + ": this cgroup is already attached", path);
    return sysError(ctx + ": bpf_map_update_elem(audited_cgroups)", path);
  }
  state->cgroup_registered = true;
  if (options.count_syscalls) {
    std::lock_guard lock(m.mu);
    if (auto r = m.acquireSyscallCounter(); !r) return Unexpected(std::move(r.error()).wrap(ctx));
    state->count_syscalls = true;
  }
  {
    std::lock_guard lock(m.mu);
    m.slots[state->slot] = state;
  }
  return handle;
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

bool AuditEngine::syscallCounterAttached() const {
  std::lock_guard lock(impl_->mu);
  return impl_->syscall_link != nullptr;
}

uint64_t AuditEngine::undecodableRecords() const { return impl_->undecodable.load(); }

bool AuditEngine::pinned() const { return impl_->pinned(); }
bool AuditEngine::openedFromPins() const { return impl_->obj.opened_from_pins; }
const std::string& AuditEngine::version() const { return impl_->obj.version; }

// ---------------------------------------------------------------------------------------------

SandboxAudit::SandboxAudit(std::shared_ptr<AuditEngine> engine, std::shared_ptr<State> state)
    : engine_(std::move(engine)), state_(std::move(state)) {}

SandboxAudit::~SandboxAudit() { engine_->impl_->detach(*state_); }

uint32_t SandboxAudit::slot() const { return state_->slot; }
uint64_t SandboxAudit::cgroupId() const { return state_->cgroup_id; }

uint64_t SandboxAudit::dropsSinceAttach() const { return engine_->impl_->readDrops(state_->slot); }

Result<> SandboxAudit::updateNetwork(const NetPolicy& policy) {
  auto& m = *engine_->impl_;
  auto ctx = "audit: network update for '" + state_->cgroup_path + "'";
  if (!state_->enforce) return fail(ctx + ": attached without network enforcement");
  uint32_t next;
  {
    std::lock_guard lock(state_->mu);
    next = state_->generation ^ 1u;
  }
  AIRLOCK_TRY_CTX(compiled, compileRules(policy, state_->slot, next), ctx);
  if (auto r = m.installRules(compiled); !r) return Unexpected(std::move(r.error()).wrap(ctx));
  {
    std::lock_guard lock(state_->mu);
    state_->policies[next] = policy;
  }
  // One word flips mode and generation together: connects see the old rules or the new ones.
  if (auto r = m.writeSlotConfig(state_->slot, policy.mode, next, state_->audit_flags); !r) {
    m.removeRules(compiled);
    return Unexpected(std::move(r.error()).wrap(ctx));
  }
  std::lock_guard lock(state_->mu);
  m.removeRules(state_->installed);
  state_->installed = std::move(compiled);
  state_->generation = next;
  return {};
}

bool SandboxAudit::enforcesNetwork() const { return state_->enforce; }

NetPolicy SandboxAudit::network() const {
  std::lock_guard lock(state_->mu);
  return state_->policies[state_->generation];
}

void SandboxAudit::setTenant(const std::string& tenant) {
  std::lock_guard lock(state_->mu);
  state_->ids.tenant = tenant;
}

void SandboxAudit::beginExecution(const std::string& execution_id) {
  // Records of what ran before (PID 1's own exec) belong to no execution: dispatch them first,
  // whether a reader thread has got to them yet or the caller pumps the ring. An error here
  // shows again in endExecution's drain.
  (void)engine_->drain();
  Counters now = engine_->impl_->readCounters(*state_);
  std::lock_guard lock(state_->mu);
  state_->ids.execution = execution_id;
  state_->in_execution = true;
  state_->summary = AuditSummary{};
  state_->summary.fail_closed = state_->fail_closed;
  state_->summary.syscalls_counted = state_->count_syscalls;
  state_->at_begin = std::move(now);
}

Result<AuditSummary> SandboxAudit::endExecution() {
  auto& m = *engine_->impl_;
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
  out.events_dropped = now.drops - then.drops;
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

}  // namespace airlock::audit
