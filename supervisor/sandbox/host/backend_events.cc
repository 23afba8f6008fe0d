#include "supervisor/sandbox/host/backend_events.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>

#include "supervisor/audit/net_rules.h"

namespace airlock::sandbox {

namespace {

// Caps on what the sandbox hands us (its fields are untrusted): as the eBPF exec record keeps.
constexpr size_t kMaxArgs = 64;
constexpr size_t kMaxArgBytes = 4096;

std::string bounded(const char* s, size_t cap) {
  if (s == nullptr) return {};
  return std::string(s, strnlen(s, cap));
}

}  // namespace

Result<std::shared_ptr<BackendEvents>> BackendEvents::start(
    std::shared_ptr<plugin::IsolationBackend> backend, airlock_sandbox_v1* sandbox,
    audit::SandboxAudit* audit, Options options) {
  std::shared_ptr<BackendEvents> self(new BackendEvents());
  self->backend_ = std::move(backend);
  self->sandbox_ = sandbox;
  self->audit_ = audit;
  self->options_ = options;
  self->stop_fd_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!self->stop_fd_) return sysError("eventfd", "backend events");
  self->thread_ = std::thread([raw = self.get()] { raw->loop(); });
  return self;
}

BackendEvents::~BackendEvents() { stop(); }

void BackendEvents::loop() {
  const int events_fd = sandbox_->events_fd;
  for (;;) {
    pollfd p[2] = {{stop_fd_.get(), POLLIN, 0}, {events_fd, POLLIN, 0}};
    int n = ::poll(p, 2, -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || (p[0].revents & POLLIN) != 0) return;
    drain();
    std::lock_guard lock(mu_);
    // A monitoring channel that broke or closed stays readable: nothing more will come.
    if (broken_ || stopped_ || (p[1].revents & (POLLHUP | POLLERR | POLLNVAL)) != 0) return;
  }
}

void BackendEvents::drain() {
  std::lock_guard lock(mu_);
  if (stopped_ || broken_) return;
  auto r = backend_->readEvents(*sandbox_,
                                [this](const airlock_sandbox_event_v1& event) { emit(event); });
  if (!r) {
    // Whatever the sandbox did from now on is not seen: count it as lost, once, so a profile
    // that fails closed fails the execution.
    broken_ = true;
    audit_->recordLost(1);
  }
}

void BackendEvents::emit(const airlock_sandbox_event_v1& e) {
  if (e.lost > 0) audit_->recordLost(e.lost);
  audit::EventOrigin origin;
  origin.time_ns = e.time_ns;
  origin.ns_pid = e.pid;
  origin.uid = e.uid;
  origin.comm = bounded(e.comm, 64);
  if (e.kind == AIRLOCK_SANDBOX_EVENT_EXEC && options_.exec) {
    audit::ExecEvent x;
    x.origin = std::move(origin);
    x.path = bounded(e.path, kMaxArgBytes);
    x.argc = e.argc;
    size_t bytes = 0;
    for (uint32_t i = 0; e.argv != nullptr && i < e.argc && i < kMaxArgs; ++i) {
      std::string arg = bounded(e.argv[i], kMaxArgBytes);
      if (bytes + arg.size() > kMaxArgBytes) break;
      bytes += arg.size();
      x.argv.push_back(std::move(arg));
    }
    x.argv_truncated = x.argv.size() < e.argc;
    audit_->record(x, e.time_ns);
  } else if (e.kind == AIRLOCK_SANDBOX_EVENT_CONNECT && options_.network &&
             (e.family == 4 || e.family == 6)) {
    policy::Cidr to;
    to.family = static_cast<int>(e.family);
    std::copy(e.address, e.address + (e.family == 4 ? 4 : 16), to.addr.begin());
    to.prefix = static_cast<uint8_t>(to.addressBits());
    auto decision = audit::decideConnection(audit_->network(), to, e.protocol, e.port);
    audit::NetEvent n;
    n.origin = std::move(origin);
    n.hook = e.family == 4 ? AIRLOCK_HOOK_CONNECT4 : AIRLOCK_HOOK_CONNECT6;
    n.allowed = decision.allowed;
    n.rule = decision.rule;
    n.family = to.family;
    n.protocol = e.protocol;
    n.port = e.port;
    n.address = policy::addressText(to.family, to.addr.data());
    audit_->record(n, e.time_ns);
  }
}

void BackendEvents::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
  }
  drain();
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
  }
  uint64_t one = 1;
  (void)!::write(stop_fd_.get(), &one, sizeof one);
  if (thread_.joinable()) thread_.join();
}

}  // namespace airlock::sandbox
