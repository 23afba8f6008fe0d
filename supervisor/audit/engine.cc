// AuditEngine: loading, attaching a sandbox, and the engine's public calls. The parts live beside
// it (engine_impl.h): the ring reader, slots, network rules, counters.
#include "supervisor/audit/engine.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "supervisor/audit/engine_impl.h"
#include "supervisor/sys/cgroup.h"

namespace airlock::audit {

namespace {

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

}  // namespace

AuditEngine::Impl::~Impl() {
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
  std::unique_lock reclaim(m.reclaim_mu);
  {
    std::lock_guard lock(m.mu);
    auto claimed = m.claimSlot();
    if (!claimed) return Unexpected(std::move(claimed.error()).wrap(ctx));
    state->slot = claimed->first;
    state->slot_lock = std::move(claimed->second);
  }
  const bool purged = m.purgeStaleSlot(state->slot);
  reclaim.unlock();
  if (purged) {
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

bool AuditEngine::pinned() const { return impl_->pinned(); }
bool AuditEngine::openedFromPins() const { return impl_->obj.opened_from_pins; }
const std::string& AuditEngine::version() const { return impl_->obj.version; }

// ---------------------------------------------------------------------------------------------

SandboxAudit::SandboxAudit(std::shared_ptr<AuditEngine> engine, std::shared_ptr<State> state)
    : engine_(std::move(engine)), state_(std::move(state)) {}

SandboxAudit::~SandboxAudit() { engine_->impl_->detach(*state_); }

uint32_t SandboxAudit::slot() const { return state_->slot; }
uint64_t SandboxAudit::cgroupId() const { return state_->cgroup_id; }

void SandboxAudit::setTenant(const std::string& tenant) {
  std::lock_guard lock(state_->mu);
  state_->ids.tenant = tenant;
}

}  // namespace airlock::audit
