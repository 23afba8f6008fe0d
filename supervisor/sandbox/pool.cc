// Warm pools: ready sandboxes per profile, so that create is a hand-over.
#include "supervisor/log/log.h"
#include "supervisor/sandbox/manager.h"

#include "supervisor/sandbox/live_sandbox.h"

namespace airlock::sandbox {

std::shared_ptr<LiveSandbox> Manager::takeWarm(const std::string& profile) {
  std::lock_guard lock(mu_);
  auto it = pool_.find(profile);
  if (it == pool_.end() || it->second.empty()) return nullptr;
  auto s = it->second.front();
  it->second.pop_front();
  return s;
}

size_t Manager::warmCount() {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [p, q] : pool_) n += q.size();
  return n;
}

// Keeps every profile's pools at their pool_size, one sandbox at a time, within the host's
// max_sandboxes: first the warm sandboxes for creates, then the pre-started interpreters of each
// of its languages (prestart.cc: checkers, plain, preloaded). A failure backs off instead of
// spinning.
void Manager::poolLoop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    std::shared_ptr<const policy::Policy> pol = policy_;  // a reload must not free `want`
    const policy::Profile* want = nullptr;
    std::string want_language;  // empty: a warm sandbox
    PrestartKind want_kind = PrestartKind::kPlain;
    if (!draining_) {
      size_t live = sandboxes_.size() + static_cast<size_t>(reserved_);
      for (const auto& [name, q] : pool_) live += q.size();
      for (const auto& [key, q] : prestarted_) live += q.size();
      for (const auto& [name, profile] : pol->profiles) {
        if (live >= pol->server.max_sandboxes) continue;
        if (pool_[name].size() < profile.lifetime.pool_size) {
          want = &profile;
          break;
        }
        // The checkers and plain interpreters first: they are ready in tens of milliseconds, the
        // preloaded ones in seconds.
        for (PrestartKind kind :
             {PrestartKind::kChecker, PrestartKind::kPlain, PrestartKind::kPreloaded}) {
          for (const auto& l : profile.languages) {
            if (cannot_prestart_.count(l) != 0) continue;
            if (prestarted_[{name, l, kind}].size() < prestartTarget(profile, l, kind)) {
              want = &profile;
              want_language = l;
              want_kind = kind;
              break;
            }
          }
          if (want != nullptr) break;
        }
        if (want != nullptr) break;
      }
    }
    if (want == nullptr) {
      pool_cv_.wait(lock);
      continue;
    }
    lock.unlock();
    std::shared_ptr<LiveSandbox> warm;
    std::shared_ptr<Prestarted> pre;
    std::string failure;
    if (want_language.empty()) {
      auto s = startBox(*want);
      if (s)
        warm = *s;
      else
        failure = s.error().message;
    } else {
      auto p = startPrestarted(*want, want_language, want_kind);
      if (p)
        pre = *p;
      else
        failure = p.error().message;
    }
    lock.lock();
    if (!failure.empty() && cannot_prestart_.count(want_language) != 0) continue;  // shell
    if (!failure.empty()) {
      log::warn("pool.start_failed", {{"pool", want_language.empty() ? "warm" : want_language},
                                      {"profile", want->name},
                                      {"error", failure}});
      pool_cv_.wait_for(lock, std::chrono::seconds(5));
      continue;
    }
    if (stopping_ || draining_ || pol != policy_) {  // or made under a policy since replaced
      lock.unlock();
      if (pre) pre->run.reset();
      destroyLive(warm ? warm : pre->live, "shutdown");
      lock.lock();
      continue;
    }
    if (warm) {
      pool_[want->name].push_back(warm);
    } else {
      prestarted_[{want->name, want_language, want_kind}].push_back(pre);
    }
  }
}

}  // namespace airlock::sandbox
