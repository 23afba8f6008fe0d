// AuditEngine: skeleton loading, per-sandbox attachment, the ring-buffer reader.
#include "supervisor/audit/engine.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <seccomp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
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
#include "exec_audit.skel.h"
#include "min_core_btf.h"
#include "net_policy.skel.h"
#include "supervisor/audit/bpf_handles.h"
#include "syscall_count.skel.h"

namespace airlock::audit {

namespace {

using ExecSkel = BpfSkel<airlock_exec_audit, airlock_exec_audit__destroy>;
using NetSkel = BpfSkel<airlock_net_policy, airlock_net_policy__destroy>;
using SyscallSkel = BpfSkel<airlock_syscall_count, airlock_syscall_count__destroy>;

int64_t realtimeMinusMonotonicNs() {
  timespec rt{}, mono{};
  ::clock_gettime(CLOCK_REALTIME, &rt);
  ::clock_gettime(CLOCK_MONOTONIC, &mono);
  return (int64_t{rt.tv_sec} - mono.tv_sec) * 1000000000 + (rt.tv_nsec - mono.tv_nsec);
}

// The programs' CO-RE relocations need the running kernel's BTF. libbpf reads the whole
// /sys/kernel/btf/vmlinux for every object it opens (~40 ms each here), unless it is given a
// smaller BTF: the build extracted the few types the programs use (bpf/embed_min_btf.cmake).
// That extract is valid only on the kernel it came from, so it is offered only when
// /proc/version is the same; otherwise (another kernel, a read error) the fd is invalid and
// libbpf uses vmlinux as usual.
UniqueFd minimalKernelBtf() {
  std::ifstream in("/proc/version");
  std::string running((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!running.empty() && (running.back() == '\n' || running.back() == ' ')) running.pop_back();
  if (running.empty() || running != airlock::bpf::kMinCoreBtfKernel) return {};
  UniqueFd fd(::memfd_create("airlock-min-core-btf", MFD_CLOEXEC));
  if (!fd) return {};
  const auto* data = airlock::bpf::kMinCoreBtf;
  size_t left = sizeof airlock::bpf::kMinCoreBtf;
  while (left > 0) {
    ssize_t n = ::write(fd.get(), data, left);
    if (n <= 0) return {};
    data += n;
    left -= static_cast<size_t>(n);
  }
  return fd;
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
  std::vector<BpfLink> links;

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
  ExecSkel exec;
  NetSkel net;
  SyscallSkel syscalls;
  BpfLink exec_link;
  BpfLink syscall_link;
  int syscall_users = 0;  // under mu
  uint64_t host_netns_cookie = 0;
  UniqueFd min_btf;  // minimalKernelBtf(): kept for the syscall counter's later open
  std::string min_btf_path;
  int ncpu = 1;

  bpf_object_open_opts openOptions() const {
    bpf_object_open_opts o{};
    o.sz = sizeof o;
    o.btf_custom_path = min_btf_path.empty() ? nullptr : min_btf_path.c_str();
    return o;
  }
  int64_t realtime_offset_ns = 0;

  ring_buffer* ring = nullptr;
  std::mutex consume_mu;  // ring_buffer__consume is not reentrant: reader and drain() share it
  UniqueFd epoll;
  UniqueFd stop_fd;
  std::thread reader;
  std::atomic<uint64_t> undecodable{0};

  std::mutex mu;  // slots, used_slots, syscall counter state
  std::map<uint32_t, std::shared_ptr<SandboxAudit::State>> slots;
  std::vector<bool> used_slots = std::vector<bool>(AIRLOCK_MAX_SLOTS, false);

  std::atomic<bool> stopping{false};

  ~Impl() {
    if (reader.joinable()) {
      stopping = true;
      uint64_t one = 1;
      // If the wake-up write fails the reader still sees the flag at its next drop check.
      (void)!::write(stop_fd.get(), &one, sizeof one);
      reader.join();
    }
    if (ring != nullptr) ring_buffer__free(ring);
  }

  int mapFd(bpf_map* map) const { return bpf_map__fd(map); }
  int cgroupsFd() const { return mapFd(exec->maps.audited_cgroups); }
  int slotConfigFd() const { return mapFd(exec->maps.slot_config); }
  int dropsFd() const { return mapFd(exec->maps.drops); }

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
    if (bpf_map_lookup_elem(mapFd(net->maps.net_counters), &slot, per_cpu.data()) != 0) return sum;
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
    int fd = mapFd(syscalls->maps.syscall_counts);
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

  // Deletes every key of `map_fd` whose leading u32 is `slot` (seen_destinations,
  // syscall_counts), and zeroes the per-CPU counters of the slot.
  template <typename Key>
  void deleteSlotKeys(int map_fd, uint32_t slot) {
    std::vector<Key> doomed;
    Key key{}, next{};
    const void* prev = nullptr;
    while (bpf_map_get_next_key(map_fd, prev, &next) == 0) {
      key = next;
      prev = &key;
      if (key.slot == slot) doomed.push_back(key);
    }
    for (const auto& k : doomed) bpf_map_delete_elem(map_fd, &k);
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

  void readLoop() {
    auto next_check = std::chrono::steady_clock::now() + options.drop_check_interval;
    while (!stopping.load()) {
      epoll_event ev[2];
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      next_check - std::chrono::steady_clock::now())
                      .count();
      int n = ::epoll_wait(epoll.get(), ev, 2, static_cast<int>(std::max<long long>(left, 0)));
      if (n < 0 && errno != EINTR) break;
      if (stopping.load()) break;
      {
        std::lock_guard lock(consume_mu);
        ring_buffer__consume(ring);
      }
      if (std::chrono::steady_clock::now() >= next_check) {
        checkDrops();
        next_check = std::chrono::steady_clock::now() + options.drop_check_interval;
      }
    }
  }

  Result<> acquireSyscallCounter() {
    // Caller holds mu.
    if (!syscalls) {
      auto open_opts = openOptions();
      SyscallSkel skel(airlock_syscall_count__open_opts(&open_opts));
      if (!skel) return libbpfError(-errno, "open bpf object", "syscall_count");
      // One cgroup table, one config, one ring and one drop counter for every object.
      bpf_map__reuse_fd(skel->maps.audited_cgroups, cgroupsFd());
      bpf_map__reuse_fd(skel->maps.slot_config, slotConfigFd());
      bpf_map__reuse_fd(skel->maps.events, mapFd(exec->maps.events));
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
    airlock_slot_config config{AIRLOCK_NET_WORD(static_cast<uint32_t>(mode), generation), flags};
    if (bpf_map_update_elem(slotConfigFd(), &slot, &config, BPF_ANY) != 0) {
      return sysError("bpf_map_update_elem(slot_config)", std::to_string(slot));
    }
    return {};
  }

  Result<> installRules(const CompiledRules& rules) {
    int v4 = mapFd(net->maps.rules_v4), v6 = mapFd(net->maps.rules_v6);
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
    for (const auto& [key, value] : rules.v4) bpf_map_delete_elem(mapFd(net->maps.rules_v4), &key);
    for (const auto& [key, value] : rules.v6) bpf_map_delete_elem(mapFd(net->maps.rules_v6), &key);
  }

  // Undoes whatever attach() got done; safe on a partial state.
  void detach(SandboxAudit::State& s) {
    {
      std::lock_guard lock(mu);
      slots.erase(s.slot);
    }
    s.links.clear();  // programs off the cgroup first: nothing decides with a half-removed state
    if (s.cgroup_registered) bpf_map_delete_elem(cgroupsFd(), &s.cgroup_id);
    {
      std::lock_guard lock(s.mu);
      removeRules(s.installed);
      s.installed = {};
    }
    if (s.slot == 0) return;
    airlock_slot_config empty{};
    bpf_map_update_elem(slotConfigFd(), &s.slot, &empty, BPF_ANY);
    // A later sandbox in this slot starts from zero and sees its own first UDP destinations.
    zeroPerCpu<uint64_t>(dropsFd(), s.slot);
    zeroPerCpu<airlock_net_counters>(mapFd(net->maps.net_counters), s.slot);
    deleteSlotKeys<airlock_destination_key>(mapFd(net->maps.seen_destinations), s.slot);
    std::lock_guard lock(mu);
    if (s.count_syscalls) {
      if (syscalls)
        deleteSlotKeys<airlock_syscall_key>(mapFd(syscalls->maps.syscall_counts), s.slot);
      releaseSyscallCounter();
    }
    used_slots[s.slot] = false;
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

  m.min_btf = minimalKernelBtf();
  if (m.min_btf) m.min_btf_path = "/proc/self/fd/" + std::to_string(m.min_btf.get());
  auto open_opts = m.openOptions();
  m.exec.reset(airlock_exec_audit__open_opts(&open_opts));
  if (!m.exec) return libbpfError(-errno, "open bpf object", "exec_audit");
  bpf_map__set_max_entries(m.exec->maps.events, options.ring_bytes);
  if (int rc = airlock_exec_audit__load(m.exec.get()); rc != 0) {
    return libbpfError(rc, "load bpf program", "exec_audit (raw_tp/sched_process_exec)");
  }

  m.net.reset(airlock_net_policy__open_opts(&open_opts));
  if (!m.net) return libbpfError(-errno, "open bpf object", "net_policy");
  m.net->rodata->host_netns_cookie = m.host_netns_cookie;
  bpf_map__reuse_fd(m.net->maps.audited_cgroups, m.cgroupsFd());
  bpf_map__reuse_fd(m.net->maps.slot_config, m.slotConfigFd());
  bpf_map__reuse_fd(m.net->maps.events, m.mapFd(m.exec->maps.events));
  bpf_map__reuse_fd(m.net->maps.drops, m.dropsFd());
  if (int rc = airlock_net_policy__load(m.net.get()); rc != 0) {
    return libbpfError(rc, "load bpf program",
                       "net_policy (cgroup/connect4|6, cgroup/sendmsg4|6, cgroup_skb)");
  }
  const auto& ranges = protectedRanges();
  for (uint32_t i = 0; i < ranges.size(); ++i) {
    auto cidr = Cidr::parse(ranges[i].cidr);
    if (!cidr) return Unexpected(std::move(cidr.error()).wrap("protected range table"));
    int rc;
    if (cidr->family == 4) {
      airlock_range_key_v4 key{cidr->prefix, {}};
      std::memcpy(key.addr, cidr->addr.data(), 4);
      rc = bpf_map_update_elem(m.mapFd(m.net->maps.protected_v4), &key, &i, BPF_ANY);
    } else {
      airlock_range_key_v6 key{cidr->prefix, {}};
      std::memcpy(key.addr, cidr->addr.data(), 16);
      rc = bpf_map_update_elem(m.mapFd(m.net->maps.protected_v6), &key, &i, BPF_ANY);
    }
    if (rc != 0) return sysError("bpf_map_update_elem(protected ranges)", ranges[i].cidr);
  }

  // The exec hook is global but returns at once for tasks outside audited cgroups.
  bpf_link* link = bpf_program__attach(m.exec->progs.on_exec);
  if (link == nullptr) return libbpfError(-errno, "attach", "raw_tp/sched_process_exec");
  m.exec_link.reset(link);

  m.ring = ring_buffer__new(m.mapFd(m.exec->maps.events), &Impl::onRecord, &m, nullptr);
  if (m.ring == nullptr) return libbpfError(-errno, "ring_buffer__new", "events");
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
  m.reader = std::thread([&m] { m.readLoop(); });
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
                       (options.count_syscalls ? uint32_t{AIRLOCK_AUDIT_SYSCALLS} : 0u);
  {
    std::lock_guard lock(m.mu);
    for (uint32_t s = 1; s < AIRLOCK_MAX_SLOTS; ++s) {
      if (!m.used_slots[s]) {
        m.used_slots[s] = true;
        state->slot = s;
        break;
      }
    }
  }
  if (state->slot == 0) {
    return fail(ctx + ": every one of " + std::to_string(AIRLOCK_MAX_SLOTS - 1) +
                " audit slots is in use");
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
  if (bpf_map_update_elem(m.cgroupsFd(), &state->cgroup_id, &entry, BPF_NOEXIST) != 0) {
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
  std::vector<bpf_program*> programs = {m.net->progs.count_egress, m.net->progs.count_ingress};
  if (state->enforce) {
    programs.insert(programs.end(), {m.net->progs.connect4, m.net->progs.connect6,
                                     m.net->progs.sendmsg4, m.net->progs.sendmsg6});
  }
  for (bpf_program* prog : programs) {
    AIRLOCK_TRY_CTX(link, attachToCgroup(prog, state->cgroup_fd.get(), path), ctx);
    state->links.push_back(std::move(link));
  }
  return handle;
}

Result<> AuditEngine::drain() {
  std::lock_guard lock(impl_->consume_mu);
  int n = ring_buffer__consume(impl_->ring);
  if (n < 0) return libbpfError(n, "ring_buffer__consume", "events");
  return {};
}

bool AuditEngine::syscallCounterAttached() const {
  std::lock_guard lock(impl_->mu);
  return impl_->syscall_link != nullptr;
}

uint64_t AuditEngine::undecodableRecords() const { return impl_->undecodable.load(); }

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
