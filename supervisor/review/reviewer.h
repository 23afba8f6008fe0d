// A reviewer: one link of a profile's review chain (chain.h).
#pragma once

#include <string>

#include "airlock/result.h"
#include "supervisor/review/verdict.h"

namespace airlock::review {

class Reviewer {
 public:
  virtual ~Reviewer() = default;

  // "limits", "patterns", ..., "plugin:example": the name verdicts carry.
  virtual const std::string& name() const = 0;

  // Allow, deny or hold (rule and reason set; reviewer, duration and cached are the chain's).
  // An Error means the reviewer could not decide: it crashed, timed out (errnum ETIMEDOUT) or
  // answered nonsense; the chain then denies unless the profile fails open. Reviewers bound their
  // own time. Called from many threads at once: implementations are thread-safe.
  virtual Result<Verdict> review(const Subject& subject) = 0;
};

// A verdict a reviewer returns.
inline Verdict decide(Decision decision, std::string rule, std::string reason) {
  Verdict v;
  v.decision = decision;
  v.rule = std::move(rule);
  v.reason = std::move(reason);
  return v;
}
inline Verdict allow() { return {}; }

}  // namespace airlock::review
