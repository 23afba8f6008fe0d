#include "supervisor/service/sandbox_service.h"

#include <fcntl.h>
#include <sys/file.h>

#include "airlock/unique_fd.h"
#include "supervisor/audit/review_record.h"
#include "supervisor/service/execution_audit.h"
#include "supervisor/service/review_sandbox_runner.h"
#include "supervisor/service/sandbox_journal.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <regex>

#include "supervisor/run/environment.h"
#include "supervisor/sandbox/orphans.h"
#include "supervisor/sandbox/rootfs_view.h"
#include "supervisor/service/file_ops.h"
#include "supervisor/service/live_sandbox.h"

namespace airlock::service {

namespace proto = airlock::protocol;

namespace {

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

bool validName(const std::string& name) {
  static const std::regex re("[A-Za-z0-9._-]{1,63}");
  return std::regex_match(name, re);
}

// Keeps a sandbox from idling out while a stream of it is open, and counts the activity. Closes
// the execution's audit at its last event ("exit" or "end"), which then carries the review
// verdict and the audit summary; an audit that failed closed fails the execution.
class TouchingStream : public EventStream {
 public:
  // `review`, when not null, is added to the final event. `audit` may be null (not audited).
  TouchingStream(std::unique_ptr<EventStream> inner, std::shared_ptr<LiveSandbox> sb,
                 Json review = nullptr, std::unique_ptr<ExecutionAudit> audit = nullptr,
                 Metrics* metrics = nullptr)
      : inner_(std::move(inner)),
        sb_(std::move(sb)),
        review_(std::move(review)),
        audit_(std::move(audit)),
        metrics_(metrics) {
    ++sb_->busy;
  }
  ~TouchingStream() override {
    inner_.reset();  // first: an abandoned run is stopped while the sandbox is still busy
    audit_.reset();  // then its audit is closed (and logged) with everything it did
    sb_->last_active_at = nowMs();
    --sb_->busy;
  }
  std::optional<Json> next(Clock::time_point deadline) override {
    if (held_) {
      auto event = std::move(held_);
      held_.reset();
      return event;
    }
    auto event = inner_->next(deadline);
    if (!event) return event;
    auto type = event->value("type", "");
    if (type != "exit" && type != "end") return event;
    if (!review_.is_null()) (*event)["review"] = review_;
    if (audit_ == nullptr) return event;
    auto outcome = audit_->end();
    (*event)["audit"] = outcome.audit;
    if (metrics_ != nullptr) metrics_->audit_drops += outcome.dropped;
    if (outcome.failure.empty()) return event;
    if (type == "exit") {
      (*event)["error"] = outcome.failure;
      return event;
    }
    // A code run fails the way code runs fail: an error event, then "end" with status error.
    (*event)["status"] = "error";
    held_ = std::move(event);
    return Json{{"type", "error"},
                {"name", "AuditIncomplete"},
                {"value", outcome.failure},
                {"traceback", Json::array()}};
  }
  bool done() const override { return !held_ && inner_->done(); }

 private:
  std::unique_ptr<EventStream> inner_;
  std::shared_ptr<LiveSandbox> sb_;
  Json review_;
  std::unique_ptr<ExecutionAudit> audit_;
  Metrics* metrics_;
  std::optional<Json> held_;  // the final event, after an error event we put before it
};

// A stream that has already ended with the given events (background command starts).
class FixedStream : public EventStream {
 public:
  explicit FixedStream(std::vector<Json> events) : events_(std::move(events)) {}
  std::optional<Json> next(Clock::time_point) override {
    if (pos_ >= events_.size()) return std::nullopt;
    return events_[pos_++];
  }
  bool done() const override { return pos_ >= events_.size(); }

 private:
  std::vector<Json> events_;
  size_t pos_ = 0;
};

}  // namespace

SandboxService::SandboxService(ServiceOptions options)
    : options_(std::move(options)),
      registry_(plugin::Registry::loadDirectory(options_.plugin_dir)),
      policy_(std::make_shared<const policy::Policy>(options_.policy)) {}

Result<std::unique_ptr<SandboxService>> SandboxService::start(ServiceOptions options) {
  std::unique_ptr<SandboxService> s(new SandboxService(std::move(options)));
  auto hub = ChannelHub::start();
  if (!hub) return Unexpected(hub.error());
  s->hub_ = std::move(*hub);
  if (auto r = s->startAudit(); !r) return Unexpected(r.error());
  if (auto r = s->startNetwork(); !r) return Unexpected(r.error());
  // Sandboxes of a supervisor that died are adopted when their agent still waits, and cleaned
  // up otherwise, before new ones are made.
  s->buildChains(*s->policy_);
  s->adoptOrphans();
  if (auto r = sandbox::reclaimOrphans(s->options_.state_dir, sandbox::Reclaim::kAll); !r)
    std::fprintf(stderr, "airlock: warning: %s\n", r.error().message().c_str());
  s->reclaimNetworkLeftovers();
  s->reaper_ = std::thread([p = s.get()] { p->reaperLoop(); });
  s->pool_thread_ = std::thread([p = s.get()] { p->poolLoop(); });
  return s;
}

Result<> SandboxService::startAudit() {
  const policy::AuditSettings& settings = options_.policy.audit;
  auto ctx = std::make_shared<sandbox::AuditContext>();
  if (!settings.log.empty()) {
    auto log = audit::AuditLog::open({.path = settings.log,
                                      .max_bytes = uint64_t{settings.max_mb} << 20,
                                      .keep = static_cast<int>(settings.keep)});
    if (!log) return Unexpected(std::move(log.error()).wrap("[audit] log"));
    audit_log_ = std::move(*log);
    ctx->log = audit_log_.get();
  }
  auto engine = audit::AuditEngine::load(
      {.ring_bytes = settings.ring_kb << 10, .pin_root = audit::kEnginePinRoot});
  if (engine) {
    ctx->engine = std::move(*engine);
  } else {
    ctx->load_error = engine.error().message();
    std::string auditing;
    for (const auto& [name, profile] : options_.policy.profiles) {
      if (sandbox::needsAudit(profile)) auditing += (auditing.empty() ? "" : ", ") + name;
    }
    // Not fatal: profiles that audit nothing still work; the others refuse to create sandboxes.
    std::fprintf(
        stderr, "airlock: audit: the eBPF engine did not load: %s%s\n", ctx->load_error.c_str(),
        auditing.empty() ? ""
                         : ("; sandboxes of these profiles will be refused: " + auditing).c_str());
  }
  audit_ = std::move(ctx);
  return {};
}

Result<> SandboxService::startNetwork() {
  auto host = net::NetworkHost::create(sandbox::networkOptionsFor(options_.policy));
  // Validated with the policy; nothing on the host is touched until a sandbox needs a link.
  if (!host) return Unexpected(std::move(host.error()).wrap("[egress]"));
  network_ = std::move(*host);
  return {};
}

void SandboxService::reclaimNetworkLeftovers() {
  // Links of sandboxes no process holds any more (their supervisor died, and they were not
  // adopted); live ones, of this or another airlock process, keep theirs.
  auto report = network_->reclaimLeftovers(sandbox::liveSandboxes(options_.state_dir));
  if (!report)
    std::fprintf(stderr, "airlock: warning: %s\n", report.error().message().c_str());
  else if (!report->links_removed.empty())
    std::fprintf(stderr, "airlock: removed %zu sandbox network link(s) left by a dead supervisor\n",
                 report->links_removed.size());
}

SandboxService::~SandboxService() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  reaper_cv_.notify_all();
  pool_cv_.notify_all();
  if (reaper_.joinable()) reaper_.join();
  if (pool_thread_.joinable()) pool_thread_.join();
  destroyAll();
}

std::shared_ptr<const policy::Policy> SandboxService::currentPolicy() {
  std::lock_guard lock(mu_);
  return policy_;
}

void SandboxService::reloadPolicy(policy::Policy policy) {
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
  }
  pool_cv_.notify_all();
  for (auto& s : stale) destroyLive(s, "reload");
}

void SandboxService::drain() {
  {
    std::lock_guard lock(mu_);
    draining_ = true;
  }
  approvals_.cancelAll("the supervisor is shutting down");
  pool_cv_.notify_all();
}

size_t SandboxService::sandboxCount() {
  std::lock_guard lock(mu_);
  return sandboxes_.size();
}

void SandboxService::destroyAll() {
  std::vector<std::shared_ptr<LiveSandbox>> all;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, s] : sandboxes_) all.push_back(s);
    sandboxes_.clear();
    for (auto& [name, q] : pool_)
      for (auto& s : q) all.push_back(s);
    pool_.clear();
  }
  for (auto& s : all) destroyLive(s, "shutdown");
}

SResult<std::shared_ptr<plugin::Language>> SandboxService::language(const std::string& name) {
  auto l = registry_.language(name);
  if (!l)
    return serviceError(ErrorCode::kBadRequest, "language '" + name + "': " + l.error().message());
  return *l;
}

SResult<SandboxInfo> SandboxService::createSandbox(const Caller& caller, const SandboxSpec& spec) {
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
  const policy::Profile& profile = **prof;
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

  // Quotas and the name are checked and reserved under the lock; the slow start is outside it.
  {
    std::lock_guard lock(mu_);
    if (draining_) return serviceError(ErrorCode::kUnavailable, "the supervisor is shutting down");
    int live = 0;
    uint64_t live_memory = 0;
    for (const auto& [id, s] : sandboxes_) {
      if (s->tenant != caller.tenant) continue;
      ++live;
      live_memory += s->profile.limits.memory_mb;
      if (!spec.name.empty() && s->name == spec.name)
        return serviceError(ErrorCode::kConflict,
                            "a sandbox named '" + spec.name + "' already exists (" + s->id + ")");
    }
    live += reserved_by_tenant_[caller.tenant];
    live_memory += reserved_memory_by_tenant_[caller.tenant];
    // Warm sandboxes are not counted: policy validation keeps the pools within the maximum.
    if (sandboxes_.size() + reserved_ >= pol.server.max_sandboxes) {
      metrics_.reject("host_sandboxes");
      return serviceError(ErrorCode::kTooManyRequests,
                          "this host runs its maximum of " +
                              std::to_string(pol.server.max_sandboxes) +
                              " sandboxes (server.max_sandboxes)");
    }
    if (live >= static_cast<int64_t>((*tenant)->max_sandboxes)) {
      metrics_.reject("tenant_sandboxes");
      return serviceError(ErrorCode::kTooManyRequests,
                          "tenant '" + caller.tenant + "' has its maximum of " +
                              std::to_string((*tenant)->max_sandboxes) + " sandboxes");
    }
    if (live_memory + memory > (*tenant)->max_memory_mb) {
      metrics_.reject("tenant_memory");
      return serviceError(ErrorCode::kTooManyRequests,
                          "tenant '" + caller.tenant + "' would use " +
                              std::to_string(live_memory + memory) + " MiB of memory, over its " +
                              std::to_string((*tenant)->max_memory_mb) + " MiB");
    }
    ++reserved_;
    ++reserved_by_tenant_[caller.tenant];
    reserved_memory_by_tenant_[caller.tenant] += memory;
  }
  auto unreserve = [&] {
    std::lock_guard lock(mu_);
    --reserved_;
    --reserved_by_tenant_[caller.tenant];
    reserved_memory_by_tenant_[caller.tenant] -= memory;
  };

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
  // A warm sandbox of the profile if the pool has one; else a new one.
  std::shared_ptr<LiveSandbox> s = spec.persistent ? nullptr : takeWarm(profile_name);
  bool warm = s != nullptr;
  if (!warm) {
    auto started = startBox(profile, image, caller.tenant);
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
  metrics_.sandboxes_created++;
  (warm ? metrics_.warm_creates : metrics_.cold_creates)++;
  metrics_.create_seconds.observe(secondsSince(t0));
  reaper_cv_.notify_all();
  if (warm) pool_cv_.notify_all();  // refill
  return infoOf(*s);
}

void SandboxService::restoreNetworkRules(LiveSandbox& s, const std::vector<std::string>& rules) {
  auto audit = s.box->auditHandle();
  if (audit == nullptr) return;
  audit::NetPolicy policy = audit->network();
  policy.rules.clear();
  for (const auto& text : rules) {
    auto rule = audit::NetRule::parse(text);
    if (!rule) {
      std::fprintf(stderr,
                   "airlock: sandbox %s: journaled network rule '%s': %s; keeping the "
                   "profile's rules\n",
                   s.id.c_str(), text.c_str(), rule.error().message().c_str());
      return;
    }
    policy.rules.push_back(std::move(*rule));
  }
  // Already resolved when they were set: the same addresses as before the restart.
  if (auto r = audit->updateNetwork(policy); !r) {
    std::fprintf(stderr,
                 "airlock: sandbox %s: journaled network rules: %s; keeping the "
                 "profile's rules\n",
                 s.id.c_str(), r.error().message().c_str());
    return;
  }
  s.network_rules = rules;
}

void SandboxService::journal(const LiveSandbox& s) {
  JournalRecord r;
  r.id = s.id;
  r.name = s.name;
  r.tenant = s.tenant;
  r.profile = s.profile_name;
  r.language = s.language;
  r.env = s.env;
  r.metadata = s.metadata;
  r.persistent = s.persistent;
  r.workspace_image = s.workspace_image;
  r.created_at = s.created_at;
  r.keep_alive_s = s.keep_alive_s;
  r.lifetime_s = s.lifetime_s;
  r.ends_at = s.ends_at;
  r.id_slot = s.box->idSlot();
  r.agent_pid = s.box->pid();
  r.agent_start_time = sandbox::processStartTime(s.box->pid());
  r.network_rules = s.network_rules;
  // Without a record the sandbox still works; it just ends with this supervisor.
  if (auto w = writeJournal(options_.state_dir, r); !w)
    std::fprintf(stderr, "airlock: sandbox %s: journal: %s\n", s.id.c_str(),
                 w.error().message().c_str());
}

void SandboxService::buildChains(const policy::Policy& pol) {
  chains_.clear();
  for (const auto& [name, profile] : pol.profiles) {
    review::ChainOptions o;
    o.policy_hash = pol.hash;
    o.plugins = &registry_;
    o.sandbox_runner = std::make_shared<ReviewSandboxRunner>(
        registry_, profile, options_.agent_path, options_.state_dir);
    auto chain = review::Chain::build(profile, std::move(o));
    if (chain) {
      chains_[name] = {*chain, ""};
    } else {
      std::fprintf(stderr, "airlock: profile '%s': review chain: %s; its executions are denied\n",
                   name.c_str(), chain.error().message().c_str());
      chains_[name] = {nullptr, chain.error().message()};
    }
  }
}

SResult<Json> SandboxService::reviewGate(const Caller& caller, const LiveSandbox& box,
                                         review::Subject subject, const std::string& execution_id) {
  subject.profile = box.profile_name;
  subject.tenant = caller.tenant;
  subject.sandbox_id = box.id;
  // Operators must be able to see who let an execution run (or why not) next to what it did.
  auto record = [&](const review::Verdict& v) {
    if (audit_log_ == nullptr) return;
    if (auto w = audit::writeReview(*audit_log_, {box.id, caller.tenant, execution_id}, v, subject);
        !w)
      std::fprintf(stderr, "airlock: audit log: %s\n", w.error().message().c_str());
  };
  ReviewChain rc;
  {
    std::lock_guard lock(mu_);
    auto it = chains_.find(box.profile_name);
    if (it != chains_.end()) rc = it->second;
  }
  if (rc.chain == nullptr && rc.error.empty()) return Json();  // a profile no longer in policy
  if (rc.chain == nullptr) {
    review::Verdict v;
    v.decision = review::Decision::kDeny;
    v.reviewer = "chain";
    v.rule = "unavailable";
    v.reason = "the review chain could not be built: " + rc.error;
    record(v);
    return std::unexpected(ServiceError{ErrorCode::kDeniedByReview, v.message(), v.toJson()});
  }
  if (rc.chain->empty()) return Json();
  auto outcome = rc.chain->review(subject);
  review::Verdict verdict = outcome.verdict;
  if (verdict.decision == review::Decision::kHold) {
    ++metrics_.reviews_held;
    verdict = approvals_.await(subject, verdict, Clock::now() + rc.chain->holdDeadline());
  }
  record(verdict);
  if (!verdict.allowed()) {
    metrics_.reject("denied_by_review");
    return std::unexpected(
        ServiceError{ErrorCode::kDeniedByReview, verdict.message(), verdict.toJson()});
  }
  return verdict.toJson();
}

SResult<Json> SandboxService::listReviews(const Caller& caller) {
  Json list = Json::array();
  // The default tenant (the Unix socket's operator) sees every tenant's held requests.
  for (const auto& p : approvals_.pending(caller.tenant == "default" ? "" : caller.tenant))
    list.push_back(p.toJson());
  return Json{{"reviews", list}};
}

SResult<> SandboxService::decideReview(const Caller& caller, const std::string& review_id,
                                       bool approve, const std::string& reason) {
  auto notWaiting = [&] {
    return serviceError(ErrorCode::kNotFound,
                        "no held execution '" + review_id + "' is waiting for a decision");
  };
  if (caller.tenant != "default") {  // another tenant's held requests do not exist for it
    auto mine = approvals_.pending(caller.tenant);
    if (std::none_of(mine.begin(), mine.end(),
                     [&](const auto& p) { return p.review_id == review_id; }))
      return notWaiting();
  }
  auto r = approve ? approvals_.approve(review_id, reason) : approvals_.reject(review_id, reason);
  if (!r) return notWaiting();
  return {};
}

void SandboxService::adoptOrphans() {
  for (auto& rec : readJournals(options_.state_dir)) {
    if (!rec) {
      std::fprintf(stderr, "airlock: warning: %s\n", rec.error().message().c_str());
      continue;
    }
    std::string lock_path = options_.state_dir + "/sandboxes/" + rec->id + ".lock";
    UniqueFd lock(open(lock_path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
    if (!lock || flock(lock.get(), LOCK_EX | LOCK_NB) != 0) continue;  // its supervisor lives
    auto prof = policy_->profile(rec->profile);
    if (!prof) {
      std::fprintf(stderr, "airlock: sandbox %s: not adopted: profile '%s' is gone\n",
                   rec->id.c_str(), rec->profile.c_str());
      continue;
    }
    auto s = std::make_shared<LiveSandbox>();
    s->profile = **prof;
    s->profile_name = rec->profile;
    sandbox::AdoptOptions o;
    o.id = rec->id;
    o.profile = &s->profile;
    o.state_dir = options_.state_dir;
    o.id_slot = rec->id_slot;
    o.agent_pid = static_cast<pid_t>(rec->agent_pid);
    o.agent_start_time = rec->agent_start_time;
    o.workspace_image = rec->workspace_image;
    o.audit = audit_;
    o.tenant = rec->tenant;
    o.network = network_;
    auto box = sandbox::Sandbox::adopt(registry_, o, std::move(lock));
    if (!box) {  // its lock is free again: reclaimOrphans removes it
      std::fprintf(stderr, "airlock: %s\n", box.error().message().c_str());
      continue;
    }
    s->box = std::move(*box);
    s->id = rec->id;
    auto conn = hub_->attach(s->box->agent().channelFd(), s->id);
    if (!conn) {
      std::fprintf(stderr, "airlock: sandbox %s: not adopted: %s\n", rec->id.c_str(),
                   conn.error().message().c_str());
      (void)s->box->destroy();
      continue;
    }
    s->conn = *conn;
    // Command ids continue above the dead supervisor's; its commands that were still running
    // keep their ids with how they ended, for clients that come back to ask.
    const auto& left = s->box->leftBehind();
    s->conn->continueAfter(left.last_request_id);
    for (const auto& ended : left.ended) {
      if (ended.code_context) continue;  // contexts start afresh (docs/api.md)
      auto cmd = Command::endedByRestart(s->conn, ended);
      s->commands[cmd->info().command_id] = cmd;
    }
    s->name = rec->name;
    s->tenant = rec->tenant;
    s->language = rec->language;
    s->env = rec->env;
    s->metadata = rec->metadata;
    s->persistent = rec->persistent;
    s->workspace_image = rec->workspace_image;
    if (rec->network_rules) restoreNetworkRules(*s, *rec->network_rules);
    s->created_at = rec->created_at;
    s->last_active_at = nowMs();  // the downtime does not count as idleness
    s->keep_alive_s = rec->keep_alive_s;
    s->lifetime_s = rec->lifetime_s;
    s->ends_at = rec->ends_at;
    s->adopted = true;
    std::fprintf(stderr, "airlock: adopted sandbox %s%s%s of tenant '%s'\n", s->id.c_str(),
                 s->name.empty() ? "" : " ", s->name.c_str(), s->tenant.c_str());
    metrics_.sandboxes_adopted++;
    std::lock_guard guard(mu_);
    sandboxes_[s->id] = s;
  }
}

SResult<std::vector<WorkspaceInfo>> SandboxService::listWorkspaces(const Caller& caller) {
  auto list = workspaces_.list(caller.tenant);
  if (!list) return serviceError(ErrorCode::kInternal, list.error().message());
  return *list;
}

SResult<> SandboxService::deleteWorkspace(const Caller& caller, const std::string& name) {
  if (!validName(name))
    return serviceError(ErrorCode::kBadRequest,
                        "workspace '" + name + "': use 1 to 63 of A-Z a-z 0-9 . _ -");
  auto r = workspaces_.remove(caller.tenant, name);
  if (r) return {};
  int e = r.error().errnum();
  if (e == ENOENT) return serviceError(ErrorCode::kNotFound, "workspace '" + name + "' not found");
  if (e == EBUSY)
    return serviceError(ErrorCode::kConflict,
                        "workspace '" + name + "' is in use by a running sandbox");
  return serviceError(ErrorCode::kInternal, r.error().message());
}

SResult<std::shared_ptr<LiveSandbox>> SandboxService::startBox(const policy::Profile& profile,
                                                               const std::string& workspace_image,
                                                               const std::string& tenant) {
  auto s = std::make_shared<LiveSandbox>();
  s->profile = profile;
  // The sandbox sees what every language of its profile needs.
  std::vector<std::string> image_paths;
  for (const auto& l : profile.languages) {
    auto plugin = registry_.language(l);
    if (!plugin) continue;  // a language without a plugin is refused when used
    for (const auto& p : (*plugin)->image_paths) image_paths.push_back(p);
  }
  sandbox::SandboxOptions opts;
  opts.profile = &s->profile;
  opts.mounts = sandbox::composeView(image_paths, profile.filesystem.readonly_paths);
  opts.agent_path = options_.agent_path;
  opts.state_dir = options_.state_dir;
  opts.workspace_image = workspace_image;
  // How long it outlives this supervisor's death, waiting to be adopted (sandbox_journal.h).
  opts.reattach_grace_ms = static_cast<int>(currentPolicy()->server.reattach_grace_s) * 1000;
  opts.audit = audit_;
  opts.tenant = tenant;
  opts.network = network_;
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
  return s;
}

std::shared_ptr<LiveSandbox> SandboxService::takeWarm(const std::string& profile) {
  std::lock_guard lock(mu_);
  auto it = pool_.find(profile);
  if (it == pool_.end() || it->second.empty()) return nullptr;
  auto s = it->second.front();
  it->second.pop_front();
  return s;
}

size_t SandboxService::warmCount() {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [p, q] : pool_) n += q.size();
  return n;
}

// Keeps every profile's pool at its pool_size, one sandbox at a time, within the host's
// max_sandboxes. A failure backs off instead of spinning.
void SandboxService::poolLoop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    const policy::Profile* want = nullptr;
    if (!draining_) {
      size_t live = sandboxes_.size() + static_cast<size_t>(reserved_);
      for (const auto& [name, q] : pool_) live += q.size();
      for (const auto& [name, profile] : policy_->profiles) {
        if (profile.lifetime.pool_size == 0) continue;
        if (pool_[name].size() < profile.lifetime.pool_size &&
            live < policy_->server.max_sandboxes) {
          want = &profile;
          break;
        }
      }
    }
    if (want == nullptr) {
      pool_cv_.wait(lock);
      continue;
    }
    lock.unlock();
    auto s = startBox(*want);
    lock.lock();
    if (!s) {
      std::fprintf(stderr, "airlock: warm pool of '%s': %s\n", want->name.c_str(),
                   s.error().message.c_str());
      pool_cv_.wait_for(lock, std::chrono::seconds(5));
      continue;
    }
    if (stopping_ || draining_) {
      lock.unlock();
      destroyLive(*s, "shutdown");
      lock.lock();
      continue;
    }
    pool_[want->name].push_back(*s);
  }
}

SandboxInfo SandboxService::infoOf(const LiveSandbox& s) {
  SandboxInfo i;
  i.id = s.id;
  i.name = s.name;
  i.tenant = s.tenant;
  i.profile = s.profile.name;
  i.language = s.language;
  i.metadata = s.metadata;
  i.persistent = s.persistent;
  i.created_at = s.created_at;
  i.last_active_at = s.last_active_at;
  i.keep_alive_s = s.keep_alive_s;
  i.idle_expires_at = i.last_active_at + i.keep_alive_s * 1000;
  i.lifetime_s = s.lifetime_s;
  i.ends_at = s.ends_at;
  std::lock_guard lock(s.mu);
  i.state = s.state;
  for (const auto& [id, c] : s.commands) i.commands_running += c->running() ? 1 : 0;
  i.contexts = static_cast<int>(s.contexts.size());
  return i;
}

SResult<std::shared_ptr<LiveSandbox>> SandboxService::find(const Caller& caller,
                                                           const std::string& sb) {
  std::lock_guard lock(mu_);
  auto it = sandboxes_.find(sb);
  if (it != sandboxes_.end() && it->second->tenant == caller.tenant) return it->second;
  for (const auto& [id, s] : sandboxes_)
    if (!s->name.empty() && s->name == sb && s->tenant == caller.tenant) return s;
  // Another tenant's sandbox is "not found" too: ids must not leak across tenants.
  return serviceError(ErrorCode::kNotFound, "sandbox '" + sb + "' not found");
}

SResult<std::shared_ptr<LiveSandbox>> SandboxService::findRunning(const Caller& caller,
                                                                  const std::string& sb) {
  auto s = find(caller, sb);
  if (!s) return s;
  (*s)->last_active_at = nowMs();
  std::lock_guard lock((*s)->mu);
  if ((*s)->state != "running")
    return serviceError(ErrorCode::kConflict, "sandbox '" + sb + "' is " + (*s)->state);
  return s;
}

SResult<std::vector<SandboxInfo>> SandboxService::listSandboxes(
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

SResult<SandboxInfo> SandboxService::getSandbox(const Caller& caller, const std::string& sb) {
  auto s = find(caller, sb);
  if (!s) return std::unexpected(s.error());
  return infoOf(**s);
}

SResult<> SandboxService::destroySandbox(const Caller& caller, const std::string& sb) {
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

void SandboxService::destroyLive(const std::shared_ptr<LiveSandbox>& s, const char* reason) {
  {
    std::lock_guard lock(s->mu);
    if (s->state != "running") return;
    s->state = "stopping";
  }
  // Streams waiting on this sandbox end now with an error event, not at their timeout.
  if (s->conn) hub_->detach(s->conn);
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
      std::fprintf(stderr, "airlock: sandbox %s (%s): teardown: %s\n", s->id.c_str(), reason,
                   r.error().message().c_str());
  }
  {
    std::lock_guard lock(s->mu);
    s->state = "stopped";
  }
  metrics_.sandboxes_destroyed++;
  if (std::string(reason) == "idle" || std::string(reason) == "lifetime") metrics_.reap(reason);
}

namespace {

// The rules the kernel enforces and, for a sandbox with a routed link, its addresses (null with
// loopback only).
Json networkJson(const audit::NetPolicy& policy, const net::SandboxNetwork* link) {
  Json rules = Json::array();
  for (const auto& r : policy.rules) rules.push_back(r.toString());
  Json out = {{"mode", audit::netModeName(policy.mode)}, {"rules", rules}, {"link", nullptr}};
  if (link != nullptr) {
    const auto& a = link->addresses();
    out["link"] = {{"host_link", link->hostLink()},
                   {"address_v4", a.sandbox_v4},
                   {"gateway_v4", a.host_v4},
                   {"address_v6", a.sandbox_v6.empty() ? Json(nullptr) : Json(a.sandbox_v6)},
                   {"gateway_v6", a.host_v6.empty() ? Json(nullptr) : Json(a.host_v6)}};
  }
  return out;
}

}  // namespace

SResult<Json> SandboxService::getNetwork(const Caller& caller, const std::string& sb) {
  auto s = findRunning(caller, sb);
  if (!s) return std::unexpected(s.error());
  auto audit = (*s)->box->auditHandle();
  if (audit == nullptr || !audit->enforcesNetwork())
    return serviceError(ErrorCode::kConflict,
                        "sandbox '" + sb +
                            "' has no kernel-enforced network rules (its profile audits nothing "
                            "and has no network.rules, or the eBPF engine is not loaded)");
  return networkJson(audit->network(), (*s)->box->network());
}

SResult<Json> SandboxService::setNetwork(const Caller& caller, const std::string& sb,
                                         const std::vector<std::string>& rules) {
  auto s = findRunning(caller, sb);
  if (!s) return std::unexpected(s.error());
  auto audit = (*s)->box->auditHandle();
  if (audit == nullptr || !audit->enforcesNetwork())
    return serviceError(ErrorCode::kConflict,
                        "sandbox '" + sb +
                            "' has no kernel-enforced network rules (its profile audits nothing "
                            "and has no network.rules, or the eBPF engine is not loaded)");
  audit::NetPolicy policy = audit->network();  // the mode stays the profile's
  policy.rules.clear();
  for (size_t i = 0; i < rules.size(); ++i) {
    auto rule = audit::NetRule::parse(rules[i]);
    if (!rule)
      return serviceError(ErrorCode::kBadRequest,
                          "rules[" + std::to_string(i) + "]: " + rule.error().message());
    policy.rules.push_back(std::move(*rule));
  }
  auto resolved = audit::resolveHosts(policy, audit::systemResolver());
  if (!resolved)
    return serviceError(ErrorCode::kBadRequest, "rules: " + resolved.error().message());
  policy = std::move(*resolved);
  // compileRules refuses too many rules or overlaps, naming the rule.
  if (auto r = audit->updateNetwork(policy); !r)
    return serviceError(ErrorCode::kBadRequest, "rules: " + r.error().message());
  (*s)->last_active_at = nowMs();
  std::vector<std::string> applied;
  for (const auto& rule : policy.rules) applied.push_back(rule.toString());
  (*s)->network_rules = std::move(applied);
  journal(**s);
  return networkJson(audit->network(), (*s)->box->network());
}

SResult<SandboxInfo> SandboxService::keepAlive(const Caller& caller, const std::string& sb,
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

void SandboxService::reaperLoop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
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

SResult<std::unique_ptr<EventStream>> SandboxService::runCommand(const Caller& caller,
                                                                 const std::string& sb,
                                                                 const CommandSpec& spec) {
  auto s = findRunning(caller, sb);
  if (!s) return std::unexpected(s.error());
  LiveSandbox& box = **s;
  if (spec.argv.empty() == spec.cmd.empty())
    return serviceError(ErrorCode::kBadRequest, "give exactly one of 'argv' and 'cmd'");
  proto::Exec exec;
  if (!spec.cmd.empty()) {
    exec.argv = {"/bin/sh", "-c", spec.cmd};
  } else if (spec.argv[0].starts_with("/")) {
    exec.argv = spec.argv;
  } else {
    // The agent runs absolute paths only; env looks the name up on the sandbox's PATH.
    exec.argv = {"/usr/bin/env", "--"};
    exec.argv.insert(exec.argv.end(), spec.argv.begin(), spec.argv.end());
  }
  auto env = box.env;
  for (const auto& [k, v] : spec.env) env[k] = v;
  exec.env = run::executionEnvironment({}, box.profile.env, env);
  if (!spec.cwd.empty()) {
    auto cwd = files::checkPath(spec.cwd, "cwd");
    if (!cwd) return std::unexpected(cwd.error());
    exec.cwd = *cwd;
  }
  double limit = static_cast<double>(box.profile.limits.timeout_s);
  if (spec.timeout_s && (*spec.timeout_s <= 0 || *spec.timeout_s > 86400))
    return serviceError(ErrorCode::kBadRequest, "timeout_s must be in (0, 86400]");
  double timeout = spec.timeout_s ? std::min(*spec.timeout_s, spec.background ? 86400.0 : limit)
                                  : (spec.background ? 0.0 : limit);
  exec.timeout_ms = static_cast<uint64_t>(timeout * 1000);
  exec.stdout_cap = exec.stderr_cap = box.profile.limits.output_bytes;
  exec.stdin_pipe = spec.background || !spec.stdin_data.empty();
  exec.kill_scope = proto::ExecKillScope::kSession;

  // Reviewed before anything reaches the sandbox.
  const std::string execution_id = sandbox::newSandboxId();
  auto review = reviewGate(caller, box,
                           spec.cmd.empty() ? review::Subject::commandArgv(spec.argv)
                                            : review::Subject::commandLine(spec.cmd),
                           execution_id);
  if (!review) return std::unexpected(review.error());
  // A foreground command is one audited execution, begun before the agent hears of it. A
  // background one outlives this request: its events are logged, in no execution's summary.
  auto audit = spec.background ? nullptr : ExecutionAudit::begin(*s, execution_id);

  CommandInfo info;
  info.argv = spec.cmd.empty() ? spec.argv : std::vector<std::string>{"/bin/sh", "-c", spec.cmd};
  info.background = spec.background;
  auto cmd = Command::start(box.conn, std::move(exec), std::move(info), spec.stdin_data);
  if (!cmd) return std::unexpected(cmd.error());
  metrics_.commands++;
  auto ci = (*cmd)->info();
  {
    std::lock_guard lock(box.mu);
    // Exited commands are forgotten once the list grows, newest kept.
    if (box.commands.size() >= 256) {
      for (auto it = box.commands.begin(); it != box.commands.end();) {
        if (!it->second->running())
          it = box.commands.erase(it);
        else
          ++it;
      }
    }
    box.commands[ci.command_id] = *cmd;
  }
  if (spec.background) {
    return std::unique_ptr<EventStream>(std::make_unique<FixedStream>(std::vector<Json>{
        Json{{"type", "start"}, {"command_id", ci.command_id}, {"pid", ci.pid}}}));
  }
  return std::unique_ptr<EventStream>(std::make_unique<TouchingStream>(
      (*cmd)->foregroundStream(), *s, std::move(*review), std::move(audit), &metrics_));
}

SResult<std::vector<CommandInfo>> SandboxService::listCommands(const Caller& caller,
                                                               const std::string& sb) {
  auto s = find(caller, sb);
  if (!s) return std::unexpected(s.error());
  std::vector<CommandInfo> out;
  std::lock_guard lock((*s)->mu);
  for (const auto& [id, c] : (*s)->commands) out.push_back(c->info());
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.started_at < b.started_at; });
  return out;
}

namespace {

// A command or context of the sandbox by id; "not found" names both.
template <typename T>
SResult<std::shared_ptr<T>> memberOf(LiveSandbox& s, std::map<std::string, std::shared_ptr<T>>& m,
                                     const std::string& id, const char* what) {
  std::lock_guard lock(s.mu);
  auto it = m.find(id);
  if (it == m.end())
    return serviceError(ErrorCode::kNotFound,
                        std::string(what) + " '" + id + "' not found in sandbox " + s.id);
  return it->second;
}

SResult<std::shared_ptr<Command>> commandOf(LiveSandbox& s, const std::string& id) {
  return memberOf(s, s.commands, id, "command");
}

SResult<std::shared_ptr<CodeContext>> contextOf(LiveSandbox& s, const std::string& id) {
  return memberOf(s, s.contexts, id, "context");
}

}  // namespace

SResult<std::unique_ptr<EventStream>> SandboxService::attachCommand(const Caller& caller,
                                                                    const std::string& sb,
                                                                    const std::string& id) {
  auto s = findRunning(caller, sb);
  if (!s) return std::unexpected(s.error());
  auto c = commandOf(**s, id);
  if (!c) return std::unexpected(c.error());
  if (!(*c)->info().background)
    return serviceError(ErrorCode::kConflict, "command '" + id +
                                                  "' streams to the client that started it; only "
                                                  "background commands can be attached");
  return (*c)->attach();
}

SResult<> SandboxService::sendStdin(const Caller& caller, const std::string& sb,
                                    const std::string& id, std::string data, bool eof) {
  auto s = findRunning(caller, sb);
  if (!s) return std::unexpected(s.error());
  auto c = commandOf(**s, id);
  if (!c) return std::unexpected(c.error());
  if (!(*c)->info().background)
    return serviceError(ErrorCode::kConflict, "command '" + id + "' has no stdin pipe");
  return (*c)->sendStdin(std::move(data), eof);
}

SResult<> SandboxService::signalCommand(const Caller& caller, const std::string& sb,
                                        const std::string& id, int signo) {
  auto s = findRunning(caller, sb);
  if (!s) return std::unexpected(s.error());
  if (signo < 1 || signo > 64)
    return serviceError(ErrorCode::kBadRequest,
                        "signal " + std::to_string(signo) + " is not 1..64");
  auto c = commandOf(**s, id);
  if (!c) return std::unexpected(c.error());
  return (*c)->signal(signo);
}

SResult<ContextInfo> SandboxService::createContext(const Caller& caller, const std::string& sb,
                                                   const std::string& language) {
  return startContext(caller, sb, language, false);
}

SResult<ContextInfo> SandboxService::startContext(const Caller& caller, const std::string& sb,
                                                  const std::string& language, bool as_default) {
  auto s = findRunning(caller, sb);
  if (!s) return std::unexpected(s.error());
  LiveSandbox& box = **s;
  std::string lang_name = language.empty() ? box.language : language;
  auto lang = this->language(lang_name);
  if (!lang) return std::unexpected(lang.error());
  std::string short_name = (*lang)->name();
  if (std::find(box.profile.languages.begin(), box.profile.languages.end(), short_name) ==
      box.profile.languages.end())
    return serviceError(
        ErrorCode::kBadRequest,
        "profile '" + box.profile.name + "' does not allow language '" + short_name + "'");
  auto cmd = (*lang)->buildSession();
  if (!cmd) return serviceError(ErrorCode::kBadRequest, cmd.error().message());
  DriverLaunch launch;
  launch.language = short_name;
  launch.exec.argv = cmd->argv;
  launch.exec.env = run::executionEnvironment(cmd->env, box.profile.env, box.env);
  launch.output_cap = box.profile.limits.output_bytes;
  std::string id;
  {
    std::lock_guard lock(box.mu);
    if (box.contexts.size() >= 32)
      return serviceError(ErrorCode::kTooManyRequests,
                          "sandbox " + box.id + " already has 32 contexts");
    // A language's default context (the one code runs use when they name none) is named after
    // it; every context created explicitly is a new one.
    id = as_default ? short_name : short_name + "-" + std::to_string(++box.next_context);
  }
  auto ctx = std::make_shared<CodeContext>(box.conn, id, std::move(launch));
  if (auto r = ctx->start(); !r) return std::unexpected(r.error());
  std::lock_guard lock(box.mu);
  if (box.contexts.count(id) != 0)
    return serviceError(ErrorCode::kConflict, "context '" + id + "' was created concurrently");
  box.contexts[id] = ctx;
  return ctx->info();
}

SResult<std::vector<ContextInfo>> SandboxService::listContexts(const Caller& caller,
                                                               const std::string& sb) {
  auto s = find(caller, sb);
  if (!s) return std::unexpected(s.error());
  std::vector<ContextInfo> out;
  std::lock_guard lock((*s)->mu);
  for (const auto& [id, c] : (*s)->contexts) out.push_back(c->info());
  return out;
}

SResult<ContextInfo> SandboxService::restartContext(const Caller& caller, const std::string& sb,
                                                    const std::string& id) {
  auto s = findRunning(caller, sb);
  if (!s) return std::unexpected(s.error());
  auto c = contextOf(**s, id);
  if (!c) return std::unexpected(c.error());
  if (auto r = (*c)->restart(); !r) return std::unexpected(r.error());
  return (*c)->info();
}

SResult<> SandboxService::destroyContext(const Caller& caller, const std::string& sb,
                                         const std::string& id) {
  auto s = findRunning(caller, sb);
  if (!s) return std::unexpected(s.error());
  std::shared_ptr<CodeContext> c;
  {
    std::lock_guard lock((*s)->mu);
    auto it = (*s)->contexts.find(id);
    if (it == (*s)->contexts.end())
      return serviceError(ErrorCode::kNotFound,
                          "context '" + id + "' not found in sandbox " + (*s)->id);
    c = it->second;
    (*s)->contexts.erase(it);
  }
  c->stop();
  return {};
}

SResult<std::unique_ptr<EventStream>> SandboxService::runCode(const Caller& caller,
                                                              const std::string& sb,
                                                              const CodeSpec& spec) {
  auto s = findRunning(caller, sb);
  if (!s) return std::unexpected(s.error());
  LiveSandbox& box = **s;
  std::shared_ptr<CodeContext> ctx;
  if (!spec.context_id.empty()) {
    auto c = contextOf(box, spec.context_id);
    if (!c) return std::unexpected(c.error());
    ctx = *c;
  } else {
    std::string lang_name = spec.language.empty() ? box.language : spec.language;
    auto lang = this->language(lang_name);
    if (!lang) return std::unexpected(lang.error());
    auto existing = contextOf(box, (*lang)->name());
    if (existing) {
      ctx = *existing;
    } else {
      auto created = startContext(caller, sb, (*lang)->name(), true);
      if (!created && created.error().code != ErrorCode::kConflict)
        return std::unexpected(created.error());
      auto c = contextOf(box, (*lang)->name());
      if (!c) return std::unexpected(c.error());
      ctx = *c;
    }
  }
  if (spec.timeout_s && (*spec.timeout_s <= 0 || *spec.timeout_s > 86400))
    return serviceError(ErrorCode::kBadRequest, "timeout_s must be in (0, 86400]");
  double limit = static_cast<double>(box.profile.limits.timeout_s);
  double timeout = spec.timeout_s ? std::min(*spec.timeout_s, limit) : limit;
  const std::string execution_id = sandbox::newSandboxId();
  auto review =
      reviewGate(caller, box, review::Subject::code(ctx->info().language, spec.code), execution_id);
  if (!review) return std::unexpected(review.error());
  auto audit = ExecutionAudit::begin(*s, execution_id);
  auto stream =
      ctx->run(spec.code, std::chrono::milliseconds(static_cast<int64_t>(timeout * 1000)));
  if (!stream) return std::unexpected(stream.error());
  metrics_.code_runs++;
  return std::unique_ptr<EventStream>(std::make_unique<TouchingStream>(
      std::move(*stream), *s, std::move(*review), std::move(audit), &metrics_));
}

// Every file operation: a running sandbox of the caller's, a checked path, then the agent.
// The sandbox counts as busy meanwhile, so a long transfer never idles it out.
template <typename Op>
auto SandboxService::fileOp(const Caller& caller, const std::string& sb, const std::string& path,
                            Op&& op) -> decltype(op(std::declval<AgentConnection&>(), path)) {
  auto s = findRunning(caller, sb);
  if (!s) return std::unexpected(s.error());
  auto p = files::checkPath(path);
  if (!p) return std::unexpected(p.error());
  metrics_.file_ops++;
  ++(*s)->busy;
  auto r = op(*(*s)->conn, *p);
  --(*s)->busy;
  (*s)->last_active_at = nowMs();
  return r;
}

SResult<FileEntry> SandboxService::writeFile(const Caller& caller, const std::string& sb,
                                             const std::string& path, uint32_t mode,
                                             const ByteSource& source) {
  if (mode > 07777) return serviceError(ErrorCode::kBadRequest, "mode must be at most 07777");
  return fileOp(caller, sb, path, [&](AgentConnection& c, const std::string& p) {
    return files::write(c, p, mode, source);
  });
}

SResult<> SandboxService::readFile(const Caller& caller, const std::string& sb,
                                   const std::string& path,
                                   const std::function<void(uint64_t)>& on_size,
                                   const ByteSink& sink) {
  return fileOp(caller, sb, path, [&](AgentConnection& c, const std::string& p) {
    return files::read(c, p, 0, on_size, sink);
  });
}

SResult<std::vector<FileEntry>> SandboxService::listFiles(const Caller& caller,
                                                          const std::string& sb,
                                                          const std::string& path) {
  return fileOp(caller, sb, path,
                [](AgentConnection& c, const std::string& p) { return files::list(c, p); });
}

SResult<FileEntry> SandboxService::statFile(const Caller& caller, const std::string& sb,
                                            const std::string& path) {
  return fileOp(caller, sb, path,
                [](AgentConnection& c, const std::string& p) { return files::stat(c, p); });
}

SResult<> SandboxService::makeDirectory(const Caller& caller, const std::string& sb,
                                        const std::string& path, bool parents) {
  return fileOp(caller, sb, path, [&](AgentConnection& c, const std::string& p) {
    return files::mkdir(c, p, parents);
  });
}

SResult<> SandboxService::removeFile(const Caller& caller, const std::string& sb,
                                     const std::string& path, bool recursive) {
  return fileOp(caller, sb, path, [&](AgentConnection& c, const std::string& p) {
    return files::remove(c, p, recursive);
  });
}

SResult<> SandboxService::renameFile(const Caller& caller, const std::string& sb,
                                     const std::string& from, const std::string& to) {
  // Both named as the request names them ("from", "to") when they are not absolute.
  if (auto f = files::checkPath(from, "from"); !f) return std::unexpected(f.error());
  auto t = files::checkPath(to, "to");
  if (!t) return std::unexpected(t.error());
  return fileOp(caller, sb, from,
                [&](AgentConnection& c, const std::string& f) { return files::rename(c, f, *t); });
}

Json SandboxService::health() {
  std::lock_guard lock(mu_);
  return Json{{"status", draining_ ? "draining" : "ok"},
              {"sandboxes", sandboxes_.size()},
              {"draining", draining_}};
}

std::string SandboxService::metricsText() {
  std::map<std::string, int> by_state;
  size_t contexts = 0, commands_running = 0, warm = 0;
  {
    std::lock_guard lock(mu_);
    for (const auto& [p, q] : pool_) warm += q.size();
    by_state["starting"] = reserved_;
    for (const auto& [id, s] : sandboxes_) {
      std::lock_guard slock(s->mu);
      ++by_state[s->state];
      contexts += s->contexts.size();
      for (const auto& [cid, c] : s->commands) commands_running += c->running() ? 1 : 0;
    }
  }
  std::string out;
  out += "# HELP airlock_sandboxes Live sandboxes by state.\n# TYPE airlock_sandboxes gauge\n";
  for (const char* st : {"starting", "running", "stopping"})
    out += std::string("airlock_sandboxes{state=\"") + st + "\"} " + std::to_string(by_state[st]) +
           "\n";
  out +=
      "# TYPE airlock_warm_sandboxes gauge\nairlock_warm_sandboxes " + std::to_string(warm) + "\n";
  out += "# TYPE airlock_sandbox_creates_total counter\n";
  out += "airlock_sandbox_creates_total{path=\"warm\"} " +
         std::to_string(metrics_.warm_creates.load()) + "\n";
  out += "airlock_sandbox_creates_total{path=\"cold\"} " +
         std::to_string(metrics_.cold_creates.load()) + "\n";
  out += "# TYPE airlock_code_contexts gauge\nairlock_code_contexts " + std::to_string(contexts) +
         "\n";
  out += "# TYPE airlock_commands_running gauge\nairlock_commands_running " +
         std::to_string(commands_running) + "\n";
  out += "# TYPE airlock_sandboxes_created_total counter\nairlock_sandboxes_created_total " +
         std::to_string(metrics_.sandboxes_created.load()) + "\n";
  out += "# TYPE airlock_sandboxes_destroyed_total counter\nairlock_sandboxes_destroyed_total " +
         std::to_string(metrics_.sandboxes_destroyed.load()) + "\n";
  out += "# TYPE airlock_sandboxes_adopted_total counter\nairlock_sandboxes_adopted_total " +
         std::to_string(metrics_.sandboxes_adopted.load()) + "\n";
  out += "# TYPE airlock_reviews_held_total counter\nairlock_reviews_held_total " +
         std::to_string(metrics_.reviews_held.load()) + "\n";
  out +=
      "# TYPE airlock_sandbox_create_failures_total "
      "counter\nairlock_sandbox_create_failures_total " +
      std::to_string(metrics_.create_failures.load()) + "\n";
  out += "# TYPE airlock_executions_total counter\n";
  out += "airlock_executions_total{kind=\"command\"} " + std::to_string(metrics_.commands.load()) +
         "\n";
  out +=
      "airlock_executions_total{kind=\"code\"} " + std::to_string(metrics_.code_runs.load()) + "\n";
  out +=
      "airlock_executions_total{kind=\"file\"} " + std::to_string(metrics_.file_ops.load()) + "\n";
  out +=
      "# HELP airlock_create_seconds Time to create a sandbox until it is ready.\n"
      "# TYPE airlock_create_seconds histogram\n";
  metrics_.create_seconds.render(out, "airlock_create_seconds", "");
  std::lock_guard lock(metrics_.mu);
  out += "# TYPE airlock_rejections_total counter\n";
  for (const auto& [reason, n] : metrics_.rejections)
    out += "airlock_rejections_total{reason=\"" + reason + "\"} " + std::to_string(n) + "\n";
  out += "# TYPE airlock_sandboxes_reaped_total counter\n";
  for (const auto& [reason, n] : metrics_.reaped)
    out += "airlock_sandboxes_reaped_total{reason=\"" + reason + "\"} " + std::to_string(n) + "\n";
  out += "# TYPE airlock_audit_drops_total counter\nairlock_audit_drops_total " +
         std::to_string(metrics_.audit_drops.load()) + "\n";
  return out;
}

}  // namespace airlock::service
