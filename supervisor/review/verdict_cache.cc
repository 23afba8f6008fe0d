#include "supervisor/review/verdict_cache.h"

namespace airlock::review {

std::string VerdictCache::key(const Subject& subject, const std::string& profile,
                              const std::string& policy_hash) {
  return subject.sha256() + "/" + profile + "/" + policy_hash;
}

std::optional<Verdict> VerdictCache::find(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void VerdictCache::insert(const std::string& key, const Verdict& verdict) {
  if (capacity_ == 0) return;
  std::lock_guard lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) {
    it->second->second = verdict;
    lru_.splice(lru_.begin(), lru_, it->second);
    return;
  }
  lru_.emplace_front(key, verdict);
  index_[key] = lru_.begin();
  if (lru_.size() > capacity_) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

size_t VerdictCache::size() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

}  // namespace airlock::review
