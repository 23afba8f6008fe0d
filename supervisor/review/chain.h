// A profile's review chain: its reviewers in the policy's order, run on every code run and
// command before anything reaches a sandbox. The first deny or hold decides; a reviewer that
// fails (crash, timeout, bad answer) denies, unless the profile sets fail_open. Verdicts are
// cached (verdict_cache.h).
//
//   auto chain = Chain::build(profile, {.policy_hash = policy.hash, .sandbox_runner = runner});
//   ReviewOutcome o = (*chain)->review(Subject::code("python", code));
//   if (!o.verdict.allowed()) ...  // deny: refuse; hold: ApprovalQueue (approval_queue.h)
//
// A built chain is immutable and thread-safe: share one per profile and call review() from any
// thread. Rebuild it when the policy changes.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "airlock/policy/policy.h"
#include "airlock/result.h"
#include "supervisor/review/reviewer.h"
#include "supervisor/review/sandbox_runner.h"
#include "supervisor/review/verdict_cache.h"

namespace airlock::plugin {
class Registry;
}

namespace airlock::review {

struct ChainOptions {
  std::string policy_hash;  // Policy::hash; part of every cache key
  // Runs the python_ast checker in a throwaway sandbox. Required when the chain names
  // python_ast; kept by the chain.
  std::shared_ptr<SandboxRunner> sandbox_runner;
  // Where "plugin:<name>" reviewers are found; used only while building. Required when the
  // chain names a plugin.
  plugin::Registry* plugins = nullptr;
  // A cache shared with other chains (e.g. across reloads); null: the chain keeps its own of
  // review.cache_entries entries.
  std::shared_ptr<VerdictCache> cache;
};

// What one reviewer said, for dry runs, logs and the audit trail.
struct ReviewStep {
  std::string reviewer;
  Decision decision = Decision::kAllow;  // kDeny when it failed and the profile fails closed
  std::string rule, reason;
  std::string error;  // why it failed; "" when it decided
  double duration_ms = 0;
};

struct ReviewOutcome {
  Verdict verdict;                // what the chain decided (docs/api.md's "review" object)
  std::vector<ReviewStep> steps;  // each reviewer that ran; empty for a cached verdict
};

class Chain {
 public:
  // The chain of profile.review: every reviewer created now, so a missing plugin, an unreadable
  // token file or a bad pattern is an error here rather than at the first request.
  static Result<std::shared_ptr<const Chain>> build(const policy::Profile& profile,
                                                    ChainOptions options);
  // A chain of the given reviewers with profile.review's fail_open and cache settings (tests,
  // embedders).
  static std::shared_ptr<const Chain> fromReviewers(
      std::vector<std::unique_ptr<Reviewer>> reviewers, const policy::Profile& profile,
      ChainOptions options);

  // Reviews one subject (its profile is filled in when empty). Thread-safe; never throws.
  ReviewOutcome review(Subject subject) const;

  bool empty() const { return reviewers_.empty(); }
  std::vector<std::string> names() const;
  const std::string& profile() const { return profile_; }
  // How long a held request waits for an operator (review.hold_deadline_s).
  std::chrono::seconds holdDeadline() const { return hold_deadline_; }
  const VerdictCache* cache() const { return cache_.get(); }

 private:
  Chain() = default;
  std::vector<std::unique_ptr<Reviewer>> reviewers_;
  std::string profile_;
  std::string policy_hash_;
  bool fail_open_ = false;
  std::chrono::seconds hold_deadline_{600};
  std::shared_ptr<VerdictCache> cache_;
  std::shared_ptr<SandboxRunner> runner_;
};

}  // namespace airlock::review
