// Verdicts already given, so the same code under the same policy is not reviewed twice: keyed by
// the subject's sha256 (kind, language, text), the profile and the policy hash, so a changed
// policy (a reload, another file) never reuses an old verdict. Least recently used entries go
// first. Thread-safe; one cache may be shared by many chains.
#pragma once

#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "supervisor/review/verdict.h"

namespace airlock::review {

class VerdictCache {
 public:
  explicit VerdictCache(size_t capacity) : capacity_(capacity) {}

  static std::string key(const Subject& subject, const std::string& profile,
                         const std::string& policy_hash);

  std::optional<Verdict> find(const std::string& key);
  void insert(const std::string& key, const Verdict& verdict);
  size_t size() const;
  size_t capacity() const { return capacity_; }

 private:
  using Entry = std::pair<std::string, Verdict>;
  const size_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recent first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

}  // namespace airlock::review
