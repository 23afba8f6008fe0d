// Sandboxes begin and end: create (warm or cold), lifetimes and idling, destroy.
#include "supervisor/sandbox/manager.h"

#include <algorithm>

#include "supervisor/audit/lifecycle_records.h"
#include "supervisor/log/log.h"
#include "supervisor/sandbox/host/rootfs_view.h"
#include "supervisor/sandbox/hostdir_mounts.h"
#include "supervisor/sandbox/live_sandbox.h"
#include "supervisor/sandbox/package_access.h"

namespace airlock::sandbox {

SResult<SandboxInfo> Manager::createSandbox(const Caller& caller, const SandboxSpec& spec) {
  auto t0 = Clock::now();
  auto pol_ref = currentPolicy();  // a reload mid-create does not change this request's view
  const auto& pol = *pol_ref;
  auto tenant = pol.tenant(caller.tenant);
  if (!tenant) return serviceError(ErrorCode::kForbidden, "unknown tenant '" + caller.tenant + "'");
  std::string profile_name = spec.profile.empty() ? pol.default_profile : spec.profile;
  auto prof = pol.profile(profile_name);
  if (!prof) return serviceError(ErrorCode::kBadRequest, "profile: " + prof.error().message());
  if (!(*tenant)->allowsProfile(profile_name)) {
    metrics_.reject("profile_forbidden");
    return serviceError(ErrorCode::kForbidden, "tenant '" + caller.tenant +
                                                   "' may not use profile '" + profile_name + "'");
  }
  // The profile, on the backend the request chose where the profile lets it choose.
  policy::Profile chosen;
  const bool other_isolation = !spec.isolation.empty() && spec.isolation != (*prof)->isolation;
  if (other_isolation) {
    const auto& choices = (*prof)->isolation_choices;
    if (std::find(choices.begin(), choices.end(), spec.isolation) == choices.end()) {
      std::string allowed = "'" + (*prof)->isolation + "'";
      for (const auto& c : choices) allowed += ", '" + c + "'";
      return serviceError(ErrorCode::kBadRequest, "isolation '" + spec.isolation + "': profile '" +
                                                      profile_name + "' allows " + allowed +
                                                      " (its isolation_choices)");
    }
    chosen = **prof;
    chosen.isolation = spec.isolation;
  }
  const policy::Profile& profile = other_isolation ? chosen : **prof;
  if (!spec.name.empty() && !validName(spec.name))
    return serviceError(ErrorCode::kBadRequest,
                        "name '" + spec.name + "': use 1 to 63 of A-Z a-z 0-9 . _ -");
  if (spec.persistent && spec.name.empty())
    return serviceError(ErrorCode::kBadRequest,
                        "field 'persistent': needs a 'name' (the workspace is kept under it)");
  std::string lang = spec.language.empty() ? profile.languages.front() : spec.language;
  if (std::find(profile.languages.begin(), profile.languages.end(), lang) ==
      profile.languages.end())
    return serviceError(ErrorCode::kBadRequest,
                        "profile '" + profile_name + "' does not allow language '" + lang + "'");
  auto keep_alive_r = profile.lifetime.keepAliveFor(spec.keep_alive_s);
  if (!keep_alive_r) return serviceError(ErrorCode::kBadRequest, keep_alive_r.error().message());
  auto lifetime_r = profile.lifetime.lifetimeFor(spec.lifetime_s);
  if (!lifetime_r) return serviceError(ErrorCode::kBadRequest, lifetime_r.error().message());
  int64_t keep_alive = *keep_alive_r;
  int64_t lifetime = *lifetime_r;
  uint64_t memory = profile.limits.memory_mb;
  // Host directories are opened now, beneath their roots: a bad one is refused before anything
  // starts.
  std::vector<MountSpec> mounts = spec.mounts;
  std::vector<HostMount> host_mounts;
  if (!mounts.empty()) {
    auto opened = openHostdirMounts(profile, pol.transfer, mounts);
    if (!opened) return std::unexpected(opened.error());
    host_mounts = std::move(*opened);
  }

  // Quotas and the name are checked and reserved under the lock; the slow start is outside it.
  if (auto r = reserve(caller, pol, **tenant, memory, spec.name, false); !r)
    return std::unexpected(r.error());
  auto unreserve = [&] { this->unreserve(caller.tenant, memory, false); };

  // A persistent workspace is mounted when the sandbox starts: never from the warm pool.
  std::string image;
  if (spec.persistent) {
    auto made = workspaces_.imageFor(caller.tenant, spec.name, profile.limits.workspace_mb << 20);
    if (!made) {
      unreserve();
      return serviceError(ErrorCode::kInternal, made.error().message());
    }
    image = std::move(*made);
  }
  // A warm sandbox of the profile if the pool has one (the pool runs the profile's own
  // isolation); else a new one.
  // Host directories are bound when the sandbox starts: never from the warm pool either.
  std::shared_ptr<LiveSandbox> s =
      spec.persistent || other_isolation || !host_mounts.empty() ? nullptr : takeWarm(profile_name);
  bool warm = s != nullptr;
  if (!warm) {
    auto started = startBox(profile, image, caller.tenant, host_mounts);
    if (!started) {
      unreserve();
      metrics_.create_failures++;
      return std::unexpected(started.error());
    }
    s = *started;
  }
  s->tenant = caller.tenant;
  if (auto* audit = s->box->audit()) audit->setTenant(caller.tenant);
  s->name = spec.name;
  s->persistent = spec.persistent;
  s->workspace_image = image;
  s->mounts = std::move(mounts);
  s->profile_name = profile_name;
  s->language = lang;
  s->env = spec.env;
  s->metadata = spec.metadata;
  s->created_at = nowMs();
  s->last_active_at = s->created_at;
  s->keep_alive_s = keep_alive;
  s->lifetime_s = lifetime;
  s->ends_at = s->created_at + lifetime * 1000;
  journal(*s);
  {
    std::lock_guard lock(mu_);
    --reserved_;
    --reserved_by_tenant_[caller.tenant];
    reserved_memory_by_tenant_[caller.tenant] -= memory;
    sandboxes_[s->id] = s;
  }
  recordSandbox(*s, "create");
  // A host directory reaching a sandbox is a transfer for the audit trail: direction "mount"
  // (read-only) or "mount-writable".
  for (const auto& m : s->mounts) {
    TransferOutcome t;
    t.direction = m.writable ? "mount-writable" : "mount";
    t.plugin = "hostdir";
    t.location = m.source;
    t.sandbox_path = m.path;
    recordTransfer({s->id, s->tenant, ""}, t);
  }
  (warm ? metrics_.warm_creates : metrics_.cold_creates)++;
  metrics_.created.add({s->tenant, s->profile_name, s->profile.isolation, warm ? "warm" : "cold"});
  metrics_.create_seconds.observe({s->profile_name, s->profile.isolation}, secondsSince(t0));
  log::info("sandbox.create", {{"sandbox", s->id},
                               {"tenant", caller.tenant},
                               {"profile", profile_name},
                               {"backend", s->profile.isolation},
                               {"start", warm ? "warm" : "cold"},
                               {"ms", secondsSince(t0) * 1000}});
  reaper_cv_.notify_all();
  if (warm) pool_cv_.notify_all();  // refill
  return infoOf(*s);
}

SResult<> Manager::reserve(const Caller& caller, const policy::Policy& pol,
                           const policy::Tenant& tenant, uint64_t memory, const std::string& name,
                           bool run) {
  std::lock_guard lock(mu_);
  if (draining_) return serviceError(ErrorCode::kUnavailable, "the supervisor is shutting down");
  int64_t live = reserved_by_tenant_[caller.tenant];
  uint64_t live_memory = reserved_memory_by_tenant_[caller.tenant];
  for (const auto& [id, s] : sandboxes_) {
    if (s->tenant != caller.tenant) continue;
    ++live;
    live_memory += s->profile.limits.memory_mb;
    if (!name.empty() && s->name == name)
      return serviceError(ErrorCode::kConflict,
                          "a sandbox named '" + name + "' already exists (" + s->id + ")");
  }
  // Warm sandboxes are not counted: policy validation keeps the pools within the maximum.
  if (sandboxes_.size() + reserved_ >= pol.server.max_sandboxes) {
    metrics_.reject("host_sandboxes");
    return serviceError(ErrorCode::kTooManyRequests, "this host runs its maximum of " +
                                                         std::to_string(pol.server.max_sandboxes) +
                                                         " sandboxes (server.max_sandboxes)");
  }
  if (live >= static_cast<int64_t>(tenant.max_sandboxes)) {
    metrics_.reject("tenant_sandboxes");
    return serviceError(ErrorCode::kTooManyRequests,
                        "tenant '" + caller.tenant + "' has its maximum of " +
                            std::to_string(tenant.max_sandboxes) + " sandboxes");
  }
  if (live_memory + memory > tenant.max_memory_mb) {
    metrics_.reject("tenant_memory");
    return serviceError(ErrorCode::kTooManyRequests,
                        "tenant '" + caller.tenant + "' would use " +
                            std::to_string(live_memory + memory) + " MiB of memory, over its " +
                            std::to_string(tenant.max_memory_mb) + " MiB");
  }
  ++reserved_;
  ++reserved_by_tenant_[caller.tenant];
  reserved_memory_by_tenant_[caller.tenant] += memory;
  if (run) ++metrics_.runs_running;
  return {};
}

void Manager::unreserve(const std::string& tenant, uint64_t memory, bool run) {
  std::lock_guard lock(mu_);
  --reserved_;
  --reserved_by_tenant_[tenant];
  reserved_memory_by_tenant_[tenant] -= memory;
  if (run) --metrics_.runs_running;
}

SResult<std::shared_ptr<LiveSandbox>> Manager::startBox(const policy::Profile& profile,
                                                        const std::string& workspace_image,
                                                        const std::string& tenant,
                                                        const std::vector<HostMount>& host_mounts) {
  auto s = std::make_shared<LiveSandbox>();
  s->profile = profile;
  // Every execution in it, interpreters of contexts and pools included, finds the package proxy.
  s->profile.env = sandbox::profileEnvironment(profile, options_.policy.packages.port);
  // The sandbox sees what every language of its profile needs.
  std::vector<std::string> image_paths;
  for (const auto& l : profile.languages) {
    auto plugin = registry_.language(l);
    if (!plugin) continue;  // a language without a plugin is refused when used
    for (const auto& p : (*plugin)->image_paths) image_paths.push_back(p);
  }
  sandbox::SandboxOptions opts;
  if (!options_.node.empty()) opts.id = policy::fleetIdPrefix(options_.node) + newSandboxId();
  opts.profile = &s->profile;
  opts.mounts = sandbox::composeView(image_paths, profile.filesystem.readonly_paths);
  opts.agent_path = options_.agent_path;
  opts.state_dir = options_.state_dir;
  opts.workspace_image = workspace_image;
  opts.host_mounts = host_mounts;
  // How long it outlives this supervisor's death, waiting to be adopted (sandbox_journal.h).
  opts.reattach_grace_ms = static_cast<int>(currentPolicy()->server.reattach_grace_s) * 1000;
  opts.audit = audit_;
  opts.tenant = tenant;
  opts.network = network_;
  if (auto r = preparePackages(profile, opts); !r)
    return serviceError(ErrorCode::kInternal, "creating the sandbox: " + r.error().message());
  auto box = sandbox::Sandbox::create(registry_, opts);
  if (!box)
    return serviceError(ErrorCode::kInternal, "creating the sandbox: " + box.error().message());
  s->box = std::move(*box);
  s->id = s->box->id();
  auto conn = hub_->attach(s->box->agent().channelFd(), s->id);
  if (!conn) {
    (void)s->box->destroy();
    return serviceError(ErrorCode::kInternal, "sandbox " + s->id + ": " + conn.error().message());
  }
  s->conn = *conn;
  s->conn->setAgentFeatures(s->box->agentFeatures());
  return s;
}

SResult<std::vector<SandboxInfo>> Manager::listSandboxes(
    const Caller& caller, const std::map<std::string, std::string>& metadata) {
  std::vector<std::shared_ptr<LiveSandbox>> mine;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, s] : sandboxes_) {
      if (s->tenant != caller.tenant) continue;
      bool match = std::all_of(metadata.begin(), metadata.end(), [&](const auto& kv) {
        auto it = s->metadata.find(kv.first);
        return it != s->metadata.end() && it->second == kv.second;
      });
      if (match) mine.push_back(s);
    }
  }
  std::vector<SandboxInfo> out;
  for (const auto& s : mine) out.push_back(infoOf(*s));
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.created_at < b.created_at; });
  return out;
}

SResult<SandboxInfo> Manager::getSandbox(const Caller& caller, const std::string& sb) {
  auto s = find(caller, sb);
  if (!s) return std::unexpected(s.error());
  return infoOf(**s);
}

SResult<> Manager::destroySandbox(const Caller& caller, const std::string& sb) {
  auto s = find(caller, sb);
  if (!s) return std::unexpected(s.error());
  {
    std::lock_guard lock(mu_);
    if (sandboxes_.erase((*s)->id) == 0)
      return serviceError(ErrorCode::kNotFound, "sandbox '" + sb + "' not found");
  }
  destroyLive(*s, "deleted");
  return {};
}

void Manager::destroyLive(const std::shared_ptr<LiveSandbox>& s, const char* reason) {
  {
    std::lock_guard lock(s->mu);
    if (s->state != "running") return;
    s->state = "stopping";
  }
  // Streams waiting on this sandbox end now with an error event, not at their timeout.
  if (s->conn) hub_->detach(s->conn);
  endTransfers(*s);
  std::map<std::string, std::shared_ptr<CodeContext>> contexts;
  std::map<std::string, std::shared_ptr<Command>> commands;
  {
    std::lock_guard lock(s->mu);
    contexts.swap(s->contexts);
    commands.swap(s->commands);
  }
  contexts.clear();
  commands.clear();
  if (s->box) {
    if (auto r = s->box->destroy(); !r)
      log::error("sandbox.teardown",
                 {{"sandbox", s->id}, {"reason", reason}, {"error", r.error().message()}});
  }
  // Pool, pre-started and review sandboxes belong to no tenant and had no create line: debug.
  log::write(s->tenant.empty() ? log::Level::kDebug : log::Level::kInfo, "sandbox.destroy",
             {{"sandbox", s->id},
              {"tenant", s->tenant},
              {"profile", s->profile.name},
              {"reason", reason}});
  {
    std::lock_guard lock(s->mu);
    s->state = "stopped";
  }
  metrics_.sandboxes_destroyed++;
  if (!s->tenant.empty()) recordSandbox(*s, "destroy", audit::destroyReason(reason));
  if (std::string(reason) == "idle" || std::string(reason) == "lifetime") metrics_.reap(reason);
}

SResult<SandboxInfo> Manager::keepAlive(const Caller& caller, const std::string& sb,
                                        std::optional<int64_t> keep_alive_s,
                                        std::optional<int64_t> lifetime_s) {
  auto s = findRunning(caller, sb);
  if (!s) return std::unexpected(s.error());
  const auto& lt = (*s)->profile.lifetime;
  // Both are checked before either changes: a bad request changes nothing.
  auto keep_alive =
      keep_alive_s ? lt.keepAliveFor(keep_alive_s) : Result<int64_t>((*s)->keep_alive_s);
  if (!keep_alive) return serviceError(ErrorCode::kBadRequest, keep_alive.error().message());
  auto lifetime = lifetime_s ? lt.lifetimeFor(lifetime_s) : Result<int64_t>((*s)->lifetime_s);
  if (!lifetime) return serviceError(ErrorCode::kBadRequest, lifetime.error().message());
  (*s)->keep_alive_s = *keep_alive;
  (*s)->lifetime_s = *lifetime;
  (*s)->ends_at = (*s)->created_at + *lifetime * 1000;
  if (keep_alive_s || lifetime_s) journal(**s);
  reaper_cv_.notify_all();
  return infoOf(**s);
}

void Manager::retire(std::shared_ptr<LiveSandbox> s, std::function<void()> done) {
  {
    std::lock_guard lock(mu_);
    retiring_.emplace_back(std::move(s), std::move(done));
  }
  reaper_cv_.notify_all();
}

void Manager::reaperLoop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    if (!retiring_.empty()) {
      auto batch = std::exchange(retiring_, {});
      lock.unlock();
      for (auto& [s, done] : batch) {
        destroyLive(s, "one-shot");
        if (done) done();
      }
      lock.lock();
      continue;
    }
    int64_t now = nowMs();
    int64_t next = now + 1000;
    std::vector<std::pair<std::shared_ptr<LiveSandbox>, const char*>> expired;
    for (auto it = sandboxes_.begin(); it != sandboxes_.end();) {
      auto& s = it->second;
      int64_t idle_at = s->last_active_at + s->keep_alive_s * 1000;
      if (s->busy > 0) idle_at = now + s->keep_alive_s * 1000;
      const char* why = now >= s->ends_at ? "lifetime" : now >= idle_at ? "idle" : nullptr;
      if (why != nullptr) {
        expired.emplace_back(s, why);
        it = sandboxes_.erase(it);
        continue;
      }
      next = std::min({next, idle_at, s->ends_at.load()});
      ++it;
    }
    if (!expired.empty()) {
      lock.unlock();
      for (auto& [s, why] : expired) destroyLive(s, why);
      lock.lock();
      continue;
    }
    reaper_cv_.wait_for(lock, std::chrono::milliseconds(std::max<int64_t>(10, next - now)));
  }
}

}  // namespace airlock::sandbox
