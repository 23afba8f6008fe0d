// When a supervisor dies: the journal its sandboxes leave, and the next one adopting them.
#include "supervisor/sandbox/manager.h"

#include <fcntl.h>
#include <sys/file.h>

#include "airlock/unique_fd.h"
#include "supervisor/log/log.h"
#include "supervisor/sandbox/host/orphans.h"
#include "supervisor/sandbox/journal.h"
#include "supervisor/sandbox/live_sandbox.h"
#include "supervisor/sandbox/package_access.h"

namespace airlock::sandbox {

void Manager::reclaimNetworkLeftovers() {
  // Links of sandboxes no process holds any more (their supervisor died, and they were not
  // adopted); live ones, of this or another airlock process, keep theirs.
  auto report = network_->reclaimLeftovers(sandbox::liveSandboxes(options_.state_dir));
  if (!report)
    log::warn("network.reclaim", {{"error", report.error().message()}});
  else if (!report->links_removed.empty())
    log::info("network.reclaim", {{"links_removed", report->links_removed.size()},
                                  {"why", "left by a dead supervisor"}});
}

void Manager::journal(const LiveSandbox& s) {
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
  for (const auto& m : s.mounts) r.mounts.emplace_back(m.source, m.path, m.writable);
  r.created_at = s.created_at;
  r.keep_alive_s = s.keep_alive_s;
  r.lifetime_s = s.lifetime_s;
  r.ends_at = s.ends_at;
  r.id_slot = s.box->idSlot();
  r.agent_pid = s.box->pid();
  r.agent_start_time = sandbox::processStartTime(s.box->pid());
  r.network_rules = s.network_rules;
  r.isolation = s.profile.isolation;
  // Without a record the sandbox still works; it just ends with this supervisor.
  if (auto w = writeJournal(options_.state_dir, r); !w)
    log::warn("sandbox.journal", {{"sandbox", s.id}, {"error", w.error().message()}});
}

void Manager::adoptOrphans() {
  for (auto& rec : readJournals(options_.state_dir)) {
    if (!rec) {
      log::warn("sandbox.journal", {{"error", rec.error().message()}});
      continue;
    }
    std::string lock_path = options_.state_dir + "/sandboxes/" + rec->id + ".lock";
    UniqueFd lock(open(lock_path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
    if (!lock || flock(lock.get(), LOCK_EX | LOCK_NB) != 0) continue;  // its supervisor lives
    auto prof = policy_->profile(rec->profile);
    if (!prof) {
      log::warn("sandbox.not_adopted", {{"sandbox", rec->id},
                                        {"tenant", rec->tenant},
                                        {"error", "profile '" + rec->profile + "' is gone"}});
      continue;
    }
    auto s = std::make_shared<LiveSandbox>();
    s->profile = **prof;
    s->profile.env = sandbox::profileEnvironment(**prof, options_.policy.packages.port);
    // The backend the sandbox was made on (a create request may have chosen it).
    if (!rec->isolation.empty()) s->profile.isolation = rec->isolation;
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
    if (s->profile.packages.enabled()) {
      auto proxy = packageProxy();
      if (!proxy) {
        log::warn(
            "sandbox.not_adopted",
            {{"sandbox", rec->id}, {"tenant", rec->tenant}, {"error", proxy.error().message()}});
        continue;
      }
      o.packages = *proxy;
      o.package_port = options_.policy.packages.port;
    }
    auto box = sandbox::Sandbox::adopt(registry_, o, std::move(lock));
    if (!box) {  // its lock is free again: reclaimOrphans removes it
      log::warn("sandbox.not_adopted",
                {{"sandbox", rec->id}, {"tenant", rec->tenant}, {"error", box.error().message()}});
      continue;
    }
    s->box = std::move(*box);
    s->id = rec->id;
    auto conn = hub_->attach(s->box->agent().channelFd(), s->id);
    if (!conn) {
      log::warn("sandbox.not_adopted",
                {{"sandbox", rec->id}, {"tenant", rec->tenant}, {"error", conn.error().message()}});
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
    for (const auto& [source, path, writable] : rec->mounts)
      s->mounts.push_back({source, path, writable});
    if (rec->network_rules) restoreNetworkRules(*s, *rec->network_rules);
    s->created_at = rec->created_at;
    s->last_active_at = nowMs();  // the downtime does not count as idleness
    s->keep_alive_s = rec->keep_alive_s;
    s->lifetime_s = rec->lifetime_s;
    s->ends_at = rec->ends_at;
    s->adopted = true;
    log::info("sandbox.adopt", {{"sandbox", s->id},
                                {"name", s->name},
                                {"tenant", s->tenant},
                                {"profile", s->profile_name},
                                {"backend", s->profile.isolation}});
    metrics_.sandboxes_adopted++;
    std::lock_guard guard(mu_);
    sandboxes_[s->id] = s;
    recordSandbox(*s, "adopt");
  }
}

void Manager::restoreNetworkRules(LiveSandbox& s, const std::vector<std::string>& rules) {
  auto audit = s.box->auditHandle();
  if (audit == nullptr) return;
  audit::NetPolicy policy = audit->network();
  policy.rules.clear();
  for (const auto& text : rules) {
    auto rule = audit::NetRule::parse(text);
    if (!rule) {
      log::warn("sandbox.network_rules", {{"sandbox", s.id},
                                          {"rule", text},
                                          {"error", rule.error().message()},
                                          {"effect", "keeping the profile's rules"}});
      return;
    }
    policy.rules.push_back(std::move(*rule));
  }
  // Already resolved when they were set: the same addresses as before the restart.
  if (auto r = audit->updateNetwork(policy); !r) {
    log::warn("sandbox.network_rules", {{"sandbox", s.id},
                                        {"error", r.error().message()},
                                        {"effect", "keeping the profile's rules"}});
    return;
  }
  s.network_rules = rules;
}

}  // namespace airlock::sandbox
