// Warm pools: ready sandboxes per profile, so that create is a hand-over.
#include "supervisor/sandbox/manager.h"

#include <cstdio>

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

// Keeps every profile's pool at its pool_size, one sandbox at a time, within the host's
// max_sandboxes. A failure backs off instead of spinning.
void Manager::poolLoop() {
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

}  // namespace airlock::sandbox
