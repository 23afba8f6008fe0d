// When a supervisor dies: the journal its sandboxes leave, and the next one adopting them.
#include "supervisor/sandbox/manager.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

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
  // Reaching each agent again is the slow part where the backend does it (gVisor: two runsc
  // starts, ~90 ms), and sandboxes are independent: they are reattached a few at a time, as
  // concurrent creates are, then taken over one by one in journal order.
  struct Orphan {
    JournalRecord rec;
    UniqueFd lock;
    std::shared_ptr<LiveSandbox> s;
    sandbox::AdoptOptions o;
    Result<std::unique_ptr<sandbox::Sandbox>> box = fail("not reattached");
    double reattach_ms = 0;
  };
  std::vector<std::unique_ptr<Orphan>> orphans;
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
    auto orphan = std::make_unique<Orphan>();
    orphan->rec = std::move(*rec);
    orphan->lock = std::move(lock);
    const JournalRecord& r = orphan->rec;
    auto s = std::make_shared<LiveSandbox>();
    s->profile = **prof;
    s->profile.env = sandbox::profileEnvironment(**prof, options_.policy.packages.port);
    // The backend the sandbox was made on (a create request may have chosen it).
    if (!r.isolation.empty()) s->profile.isolation = r.isolation;
    s->profile_name = r.profile;
    sandbox::AdoptOptions& o = orphan->o;
    o.id = r.id;
    o.profile = &s->profile;
    o.state_dir = options_.state_dir;
    o.id_slot = r.id_slot;
    o.agent_pid = static_cast<pid_t>(r.agent_pid);
    o.agent_start_time = r.agent_start_time;
    o.workspace_image = r.workspace_image;
    o.audit = audit_;
    o.tenant = r.tenant;
    o.network = network_;
    if (s->profile.packages.enabled()) {
      auto proxy = packageProxy();
      if (!proxy) {
        log::warn("sandbox.not_adopted",
                  {{"sandbox", r.id}, {"tenant", r.tenant}, {"error", proxy.error().message()}});
        continue;
      }
      o.packages = *proxy;
      o.package_port = options_.policy.packages.port;
    }
    orphan->s = std::move(s);
    orphans.push_back(std::move(orphan));
  }

  std::atomic<size_t> next{0};
  auto reattach = [&] {
    for (size_t i; (i = next.fetch_add(1)) < orphans.size();) {
      Orphan& orphan = *orphans[i];
      const auto started = Clock::now();
      orphan.box = sandbox::Sandbox::adopt(registry_, orphan.o, std::move(orphan.lock));
      orphan.reattach_ms = secondsSince(started) * 1000;
    }
  };
  const size_t workers = std::min<size_t>(
      orphans.size(), std::clamp<size_t>(std::thread::hardware_concurrency(), 2, 8));
  std::vector<std::thread> threads;
  for (size_t i = 1; i < workers; ++i) threads.emplace_back(reattach);
  reattach();
  for (auto& t : threads) t.join();

  for (auto& orphan : orphans) {
    const JournalRecord& rec = orphan->rec;
    auto& s = orphan->s;
    auto& box = orphan->box;
    if (!box) {  // its lock is free again: reclaimOrphans removes it
      log::warn("sandbox.not_adopted",
                {{"sandbox", rec.id}, {"tenant", rec.tenant}, {"error", box.error().message()}});
      continue;
    }
    s->box = std::move(*box);
    s->id = rec.id;
    auto conn = hub_->attach(s->box->agent().channelFd(), s->id);
    if (!conn) {
      log::warn("sandbox.not_adopted",
                {{"sandbox", rec.id}, {"tenant", rec.tenant}, {"error", conn.error().message()}});
      (void)s->box->destroy();
      continue;
    }
    s->conn = *conn;
    s->conn->setAgentFeatures(s->box->agentFeatures());
    s->name = rec.name;
    s->tenant = rec.tenant;
    s->language = rec.language;
    s->env = rec.env;
    s->metadata = rec.metadata;
    s->persistent = rec.persistent;
    s->workspace_image = rec.workspace_image;
    for (const auto& [source, path, writable] : rec.mounts)
      s->mounts.push_back({source, path, writable});
    if (rec.network_rules) restoreNetworkRules(*s, *rec.network_rules);
    s->created_at = rec.created_at;
    s->last_active_at = nowMs();  // the downtime does not count as idleness
    s->keep_alive_s = rec.keep_alive_s;
    s->lifetime_s = rec.lifetime_s;
    s->ends_at = rec.ends_at;
    s->adopted = true;
    const auto adopt_started = Clock::now();
    adoptExecutions(*s);
    log::info("sandbox.adopt", {{"sandbox", s->id},
                                {"name", s->name},
                                {"tenant", s->tenant},
                                {"profile", s->profile_name},
                                {"backend", s->profile.isolation},
                                {"commands", s->commands.size()},
                                {"contexts", s->contexts.size()},
                                {"reattach_ms", orphan->reattach_ms},
                                {"ms", secondsSince(adopt_started) * 1000}});
    metrics_.sandboxes_adopted++;
    std::lock_guard guard(mu_);
    sandboxes_[s->id] = s;
    recordSandbox(*s, "adopt");
  }
}

void Manager::adoptExecutions(LiveSandbox& s) {
  // Command ids continue above the dead supervisor's, so an id a client holds never names
  // another execution.
  const auto& left = s.box->leftBehind();
  s.conn->continueAfter(left.last_request_id);
  // An agent built before kFeatureKeepSessions ended everything when its supervisor died: its
  // commands keep their ids with how they ended; its contexts start afresh (docs/api.md).
  for (const auto& ended : left.ended) {
    if (ended.code_context) {
      ++s.contexts_lost;
      continue;
    }
    auto cmd = Command::endedByRestart(s.conn, ended);
    s.commands[cmd->info().command_id] = cmd;
  }
  for (const auto& live : left.live) {
    Json note = Json::parse(live.note, nullptr, false);
    const std::string kind = note.is_object() ? note.value("kind", "") : "";
    if (kind == "command") {
      auto cmd = Command::adopt(s.conn, live, note);
      s.commands[cmd->info().command_id] = cmd;
      continue;
    }
    if (kind == "context" && live.code_context) {
      std::string short_name;
      auto launch = driverLaunch(s, note.value("language", ""), note.value("cwd", ""), short_name);
      const std::string id = note.value("context_id", "");
      if (launch && !id.empty() && !s.contexts.contains(id)) {
        auto ctx = CodeContext::adopt(s.conn, live, note, std::move(*launch));
        s.contexts[id] = ctx;
        // Context names continue above the dead supervisor's too ("python-3").
        if (auto dash = id.rfind('-'); dash != std::string::npos)
          s.next_context = std::max(s.next_context, std::atoi(id.c_str() + dash + 1));
        continue;
      }
    }
    // Nothing this supervisor can take over (a one-shot program, a language no longer
    // allowed): it ends, and its frames are dropped.
    s.conn->openAt(live.request_id, [](const protocol::FrameHeader& h, std::string_view) {
      return h.type == protocol::MsgType::kExited || isChannelFailure(h);
    });
    if (!live.exited) {
      std::string frame;
      protocol::encode(frame, live.request_id, protocol::Signal{SIGKILL});
      (void)s.conn->send(frame);
    }
  }
  if (!s.conn->keepsSessions()) {
    log::warn("sandbox.adopt_ended_sessions",
              {{"sandbox", s.id},
               {"ended", left.ended.size()},
               {"why", "its agent predates session keeping (protocol feature keep_sessions)"}});
    return;
  }
  // Every execution has its handler: the agent may send what it held, then live frames.
  uint32_t resume_id = s.conn->open([](const protocol::FrameHeader& h, std::string_view) {
    return h.type == protocol::MsgType::kOk || h.type == protocol::MsgType::kError ||
           isChannelFailure(h);
  });
  std::string frame;
  protocol::encode(frame, resume_id, protocol::Resume{});
  if (auto r = s.conn->send(frame); !r)
    log::warn("sandbox.adopt", {{"sandbox", s.id}, {"error", r.error().message()}});
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
  // A sandbox with its own network stack is held by its link's filter, which adopting it set
  // back to the profile's rules.
  if (auto r = s.box->replaceNetworkRules(policy); !r) {
    log::warn("sandbox.network_rules", {{"sandbox", s.id},
                                        {"error", r.error().message()},
                                        {"effect", "the link keeps the profile's rules"}});
    return;
  }
  s.network_rules = rules;
}

}  // namespace airlock::sandbox
