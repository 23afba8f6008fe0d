// The manager: start and stop, the policy in force, finding a caller's sandboxes.
#include "supervisor/sandbox/manager.h"

#include <algorithm>
#include <cstdlib>

#include "airlock/whole_file.h"
#include "supervisor/log/log.h"

#include "supervisor/sandbox/host/orphans.h"
#include "supervisor/sandbox/live_sandbox.h"
#include "supervisor/sandbox/package_access.h"

namespace airlock::sandbox {

Manager::Manager(ManagerOptions options)
    : options_(std::move(options)),
      approvals_(policy::fleetIdPrefix(options_.node)),
      registry_(plugin::Registry::loadDirectory(options_.plugin_dir)),
      policy_(std::make_shared<const policy::Policy>(options_.policy)) {}

Result<std::unique_ptr<Manager>> Manager::start(ManagerOptions options) {
  std::unique_ptr<Manager> s(new Manager(std::move(options)));
  const bool serve = s->options_.mode == ManagerOptions::Mode::kServe;
  auto hub = ChannelHub::start(serve ? ChannelHub::Mode::kThread : ChannelHub::Mode::kInline);
  if (!hub) return Unexpected(hub.error());
  s->hub_ = std::move(*hub);
  if (auto r = s->startAudit(); !r) return Unexpected(r.error());
  if (!serve) {
    if (s->options_.cancel_fd >= 0) {
      auto w = s->hub_->watch(s->options_.cancel_fd, [p = s.get()] {
        p->cancelAll();
        return false;  // the byte is the front end's to read
      });
      if (!w) return Unexpected(std::move(w.error()).wrap("cancel pipe"));
    }
    return s;
  }
  if (auto r = s->startNetwork(); !r) return Unexpected(r.error());
  // Sandboxes of a supervisor that died are adopted when their agent still waits, and cleaned
  // up otherwise, before new ones are made.
  {
    std::lock_guard lock(s->mu_);
    s->buildChains(*s->policy_);
  }
  s->adoptOrphans();
  if (auto r = sandbox::reclaimOrphans(s->options_.state_dir, sandbox::Reclaim::kAll); !r)
    log::warn("sandbox.reclaim", {{"error", r.error().message()}});
  s->reclaimNetworkLeftovers();
  if (int n = s->workspaces_.removeHalfMade(); n > 0)
    log::info("workspace.reclaim",
              {{"images_removed", n}, {"why", "half-made, left by a dead supervisor"}});
  s->reaper_ = std::thread([p = s.get()] { p->reaperLoop(); });
  s->pool_thread_ = std::thread([p = s.get()] { p->poolLoop(); });
  return s;
}

Result<> Manager::startAudit() {
  const policy::AuditSettings& settings = options_.policy.audit;
  if (!settings.log.empty()) {
    auto log = audit::AuditLog::open({.path = settings.log,
                                      .max_bytes = uint64_t{settings.max_mb} << 20,
                                      .keep = static_cast<int>(settings.keep)});
    if (!log) return Unexpected(std::move(log.error()).wrap("[audit] log"));
    audit_log_ = std::move(*log);
  }
  if (!settings.webhook_url.empty() && audit_log_ != nullptr) {
    auto hook = audit::webhookOptionsFrom(settings);
    if (!hook) return Unexpected(hook.error());
    webhooks_ = audit::WebhookSink::start(std::move(*hook));
    audit_log_->setObserver(
        [sink = webhooks_.get()](std::string_view type, const nlohmann::json& record) {
          sink->offer(type, record);
        });
  }
  if (options_.mode == ManagerOptions::Mode::kServe) audit_ = auditContext();
  return {};
}

std::shared_ptr<const AuditContext> Manager::auditContext() {
  std::lock_guard lock(lazy_mu_);
  if (audit_ != nullptr) return audit_;
  const policy::AuditSettings& settings = options_.policy.audit;
  const bool serve = options_.mode == ManagerOptions::Mode::kServe;
  auto ctx = std::make_shared<sandbox::AuditContext>();
  ctx->log = audit_log_.get();
  // One run reads its ring from the inline hub while it waits for the agent, not a thread.
  auto engine = audit::AuditEngine::load(
      {.ring_bytes = (serve ? settings.ring_kb : settings.run_ring_kb) << 10,
       .pin_root = audit::kEnginePinRoot,
       .reader_thread = serve});
  if (engine) {
    ctx->engine = std::move(*engine);
    if (!serve) {
      std::shared_ptr<audit::AuditEngine> e = ctx->engine;
      if (auto w = hub_->watch(e->readableFd(),
                               [e] {
                                 e->pump();
                                 return true;
                               });
          !w)
        log::warn("audit.engine", {{"error", w.error().message()}});
    }
  } else {
    ctx->load_error = engine.error().message();
    if (serve) {
      std::string auditing;
      for (const auto& [name, profile] : options_.policy.profiles) {
        if (sandbox::needsAudit(profile)) auditing += (auditing.empty() ? "" : ", ") + name;
      }
      // Not fatal: profiles that audit nothing still work; the others refuse to create
      // sandboxes.
      log::error("audit.engine", {{"error", "the eBPF engine did not load: " + ctx->load_error},
                                  {"refused_profiles", auditing}});
    }
  }
  audit_ = std::move(ctx);
  return audit_;
}

Result<> Manager::startNetwork() {
  auto host = networkHost();
  if (!host) return Unexpected(host.error());
  return {};
}

Result<std::shared_ptr<net::NetworkHost>> Manager::networkHost() {
  std::lock_guard lock(lazy_mu_);
  if (network_ != nullptr) return network_;
  // Shares the nft table and the address ranges with other airlock processes (lock files).
  auto host = net::NetworkHost::create(sandbox::networkOptionsFor(options_.policy));
  // Validated with the policy; nothing on the host is touched until a sandbox needs a link.
  if (!host) return Unexpected(std::move(host.error()).wrap("[egress]"));
  network_ = std::move(*host);
  return network_;
}

Result<std::shared_ptr<packages::Proxy>> Manager::packageProxy() {
  std::lock_guard lock(lazy_mu_);
  if (packages_ != nullptr) return packages_;
  audit::AuditLog* log = audit_log_.get();
  auto sink = [log](const packages::DownloadEvent& e) {
    if (log == nullptr) return;
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    nlohmann::json fields = {
        {"ecosystem", e.ecosystem == packages::Ecosystem::pypi ? "pypi" : "npm"},
        {"package", e.package},
        {"version", e.version},
        {"file", e.file},
        {"sha256", e.sha256},
        {"bytes", e.bytes},
        {"cached", e.cached},
        {"verdict", e.verdict},
        {"rule", e.rule},
        {"reason", e.reason}};
    if (auto r = log->write("package", {.sandbox = e.sandbox, .tenant = e.tenant},
                            static_cast<uint64_t>(
                                std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()),
                            fields);
        !r)
      log::error("audit.write", {{"error", r.error().message()}});
  };
  auto proxy =
      packages::Proxy::create(sandbox::proxyOptionsFor(options_.policy.packages), std::move(sink));
  if (!proxy) return Unexpected(std::move(proxy.error()).wrap("[packages] proxy"));
  packages_ = std::move(*proxy);
  return packages_;
}

Result<> Manager::preparePackages(const policy::Profile& profile, sandbox::SandboxOptions& opts) {
  if (!profile.packages.enabled()) return {};
  auto proxy = packageProxy();
  if (!proxy) return Unexpected(std::move(proxy.error()));
  opts.packages = *proxy;
  opts.package_port = options_.policy.packages.port;
  return {};
}

void Manager::cancelAll() {
  cancelled_ = true;
  hub_->failAll("interrupted by a signal");
}

Manager::~Manager() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  reaper_cv_.notify_all();
  pool_cv_.notify_all();
  if (reaper_.joinable()) reaper_.join();
  if (pool_thread_.joinable()) pool_thread_.join();
  destroyAll();
  stopWebhooks();  // after the last records (shutdown's destroys)
}

std::shared_ptr<const policy::Policy> Manager::currentPolicy() {
  std::lock_guard lock(mu_);
  return policy_;
}

void Manager::reloadPolicy(policy::Policy policy) {
  auto next = std::make_shared<const policy::Policy>(std::move(policy));
  std::vector<std::shared_ptr<LiveSandbox>> stale;
  {
    std::lock_guard lock(mu_);
    policy_ = next;
    buildChains(*next);
    // Warm sandboxes were made under the old profiles: replace them. Live sandboxes keep the
    // profile they were created with.
    for (auto& [name, q] : pool_)
      for (auto& s : q) stale.push_back(s);
    pool_.clear();
    for (auto& [key, q] : prestarted_)
      for (auto& p : q) stale.push_back(p->live);
    prestarted_.clear();
  }
  pool_cv_.notify_all();
  for (auto& s : stale) destroyLive(s, "reload");
}

void Manager::drain() {
  {
    std::lock_guard lock(mu_);
    draining_ = true;
  }
  approvals_.cancelAll("the supervisor is shutting down");
  pool_cv_.notify_all();
}

size_t Manager::sandboxCount() {
  std::lock_guard lock(mu_);
  return sandboxes_.size();
}

void Manager::destroyAll() {
  std::vector<std::shared_ptr<LiveSandbox>> all;
  std::deque<std::pair<std::shared_ptr<LiveSandbox>, std::function<void()>>> retiring;
  {
    std::lock_guard lock(mu_);
    retiring.swap(retiring_);
    for (auto& [id, s] : sandboxes_) all.push_back(s);
    sandboxes_.clear();
    for (auto& [name, q] : pool_)
      for (auto& s : q) all.push_back(s);
    pool_.clear();
    for (auto& [key, q] : prestarted_)
      for (auto& p : q) all.push_back(p->live);
    prestarted_.clear();
  }
  for (auto& [s, done] : retiring) {
    destroyLive(s, "one-shot");
    if (done) done();
  }
  for (auto& s : all) destroyLive(s, "shutdown");
}

SResult<std::shared_ptr<plugin::Language>> Manager::language(const std::string& name) {
  auto l = registry_.language(name);
  if (!l)
    return serviceError(ErrorCode::kBadRequest, "language '" + name + "': " + l.error().message());
  return *l;
}

SandboxInfo Manager::infoOf(const LiveSandbox& s) {
  SandboxInfo i;
  i.id = s.id;
  i.node = options_.node;
  i.name = s.name;
  i.tenant = s.tenant;
  i.profile = s.profile.name;
  i.language = s.language;
  i.isolation = s.profile.isolation;
  i.metadata = s.metadata;
  i.persistent = s.persistent;
  i.mounts = s.mounts;
  i.created_at = s.created_at;
  i.last_active_at = s.last_active_at;
  i.keep_alive_s = s.keep_alive_s;
  i.idle_expires_at = i.last_active_at + i.keep_alive_s * 1000;
  i.lifetime_s = s.lifetime_s;
  i.ends_at = s.ends_at;
  std::lock_guard lock(s.mu);
  i.state = s.state;
  i.review_denials = s.review_denials;
  // The longest-running execution: a command (foreground or background) or a code run.
  int64_t oldest = s.code_started_at;
  if (oldest > 0)
    i.current_execution = Json{{"kind", "code"}, {"id", nullptr}, {"started_at", oldest}};
  for (const auto& [id, c] : s.commands) {
    if (!c->running()) continue;
    ++i.commands_running;
    auto ci = c->info();
    if (oldest > 0 && ci.started_at >= oldest) continue;
    oldest = ci.started_at;
    i.current_execution =
        Json{{"kind", "command"}, {"id", ci.command_id}, {"started_at", ci.started_at}};
  }
  i.contexts = static_cast<int>(s.contexts.size());
  return i;
}

SResult<std::shared_ptr<LiveSandbox>> Manager::find(const Caller& caller, const std::string& sb) {
  std::lock_guard lock(mu_);
  auto it = sandboxes_.find(sb);
  if (it != sandboxes_.end() && it->second->tenant == caller.tenant) return it->second;
  // A name, bare or as a fleet addresses it: "<node>_<name>" (the node's own prefix only).
  std::string_view name = sb;
  if (const auto prefix = policy::fleetIdPrefix(options_.node);
      !prefix.empty() && name.starts_with(prefix))
    name.remove_prefix(prefix.size());
  for (const auto& [id, s] : sandboxes_)
    if (!s->name.empty() && (s->name == sb || s->name == name) && s->tenant == caller.tenant)
      return s;
  // Another tenant's sandbox is "not found" too: ids must not leak across tenants.
  return serviceError(ErrorCode::kNotFound, "sandbox '" + sb + "' not found");
}

SResult<std::shared_ptr<LiveSandbox>> Manager::findRunning(const Caller& caller,
                                                           const std::string& sb) {
  auto s = find(caller, sb);
  if (!s) return s;
  (*s)->last_active_at = nowMs();
  std::lock_guard lock((*s)->mu);
  if ((*s)->state != "running")
    return serviceError(ErrorCode::kConflict, "sandbox '" + sb + "' is " + (*s)->state);
  return s;
}

Json Manager::health() {
  Json h;
  {
    std::lock_guard lock(mu_);
    h = Json{{"status", draining_ ? "draining" : "ok"},
             {"sandboxes", sandboxes_.size()},
             {"draining", draining_}};
  }
  if (options_.node.empty()) return h;
  const Capacity c = capacity();
  h["node"] = c.node;
  h["capacity"] = {{"max_sandboxes", c.max_sandboxes},
                   {"memory_available_mb", c.memory_available_mb},
                   {"sandbox_memory_mb", c.sandbox_memory_mb},
                   {"free", c.free}};
  return h;
}

namespace {

// MemAvailable: what the kernel could hand out now without swapping (page cache included).
uint64_t memoryAvailableMb() {
  auto text = readWholeFile("/proc/meminfo");
  if (!text) return 0;
  const auto at = text->find("MemAvailable:");
  if (at == std::string::npos) return 0;
  return std::strtoull(text->c_str() + at + 13, nullptr, 10) >> 10;  // kB
}

}  // namespace

Capacity Manager::capacity() {
  const auto pol = currentPolicy();
  Capacity c;
  c.node = options_.node;
  c.max_sandboxes = pol->server.max_sandboxes;
  {
    std::lock_guard lock(mu_);
    c.draining = draining_;
    c.sandboxes = static_cast<uint32_t>(sandboxes_.size()) + static_cast<uint32_t>(reserved_);
  }
  c.memory_available_mb = memoryAvailableMb();
  if (auto prof = pol->profile(pol->default_profile))
    c.sandbox_memory_mb = (*prof)->limits.memory_mb;
  c.computeFree();
  return c;
}

void Capacity::computeFree() {
  const uint64_t by_count = max_sandboxes > sandboxes ? max_sandboxes - sandboxes : 0;
  const uint64_t by_memory =
      sandbox_memory_mb == 0 ? by_count : memory_available_mb / sandbox_memory_mb;
  free = static_cast<uint32_t>(std::min(by_count, by_memory));
}

std::string Capacity::agentCheckLine() const {
  if (draining || free == 0) return "drain\n";
  return "up ready " + std::to_string(std::min<uint32_t>(free, 256) * 100) + "%\n";
}

}  // namespace airlock::sandbox
