// The review gate: each profile's chain, the verdict before anything reaches a sandbox, and
// the operator's decisions on held executions.
#include "supervisor/sandbox/manager.h"

#include <algorithm>

#include "supervisor/audit/review_record.h"
#include "supervisor/log/log.h"
#include "supervisor/sandbox/live_sandbox.h"
#include "supervisor/sandbox/review_runner.h"

namespace airlock::sandbox {

void Manager::buildChains(const policy::Policy& pol) {
  chains_.clear();
  for (const auto& [name, profile] : pol.profiles) chains_[name] = buildChain(pol, profile);
}

Manager::ReviewChain Manager::buildChain(const policy::Policy& pol,
                                         const policy::Profile& profile) {
  review::ChainOptions o;
  o.policy_hash = pol.hash;
  o.plugins = &registry_;
  // Reviewers that must run code to judge it get their sandboxes from this manager.
  o.sandbox_runner = std::make_shared<ReviewSandboxRunner>(*this, profile.name);
  auto chain = review::Chain::build(profile, std::move(o));
  if (chain) return {*chain, ""};
  if (options_.mode == ManagerOptions::Mode::kServe)
    log::error("review.chain_unavailable", {{"profile", profile.name},
                                            {"error", chain.error().message()},
                                            {"effect", "its executions are denied"}});
  return {nullptr, chain.error().message()};
}

Manager::ReviewChain Manager::chainFor(const std::string& profile) {
  std::lock_guard lock(mu_);
  if (auto it = chains_.find(profile); it != chains_.end()) return it->second;
  auto p = policy_->profile(profile);
  if (!p) return {};  // a profile no longer in policy
  return chains_[profile] = buildChain(*policy_, **p);
}

std::optional<review::Verdict> Manager::judge(const std::string& profile, review::Subject subject,
                                              const audit::RecordIds& ids) {
  const auto t0 = Clock::now();
  subject.profile = profile;
  subject.tenant = ids.tenant;
  subject.sandbox_id = ids.sandbox;
  // Operators must be able to see who let an execution run (or why not) next to what it did.
  auto record = [&](const review::Verdict& v) {
    if (!v.allowed()) metrics_.review_denials.add({profile, v.reviewer});
    log::info("review.verdict", {{"sandbox", ids.sandbox},
                                 {"tenant", ids.tenant},
                                 {"profile", profile},
                                 {"verdict", review::decisionName(v.decision)},
                                 {"reviewer", v.reviewer},
                                 {"rule", v.rule},
                                 {"ms", secondsSince(t0) * 1000}});
    if (audit_log_ == nullptr) return;
    if (auto w = audit::writeReview(*audit_log_, ids, v, subject); !w)
      log::error("audit.write", {{"error", w.error().message()}});
  };
  ReviewChain rc = chainFor(profile);
  if (rc.chain == nullptr && rc.error.empty()) return std::nullopt;
  if (rc.chain == nullptr) {
    review::Verdict v;
    v.decision = review::Decision::kDeny;
    v.reviewer = "chain";
    v.rule = "unavailable";
    v.reason = "the review chain could not be built: " + rc.error;
    record(v);
    return v;
  }
  if (rc.chain->empty()) return std::nullopt;
  const auto review_started = Clock::now();
  review::Verdict verdict = rc.chain->review(subject).verdict;
  metrics_.review_seconds.observe(
      {std::string(review::decisionName(verdict.decision))},
      std::chrono::duration<double>(Clock::now() - review_started).count());
  if (verdict.decision == review::Decision::kHold) {
    if (options_.mode == ManagerOptions::Mode::kServe) {
      ++metrics_.reviews_held;
      verdict = approvals_.await(subject, verdict, Clock::now() + rc.chain->holdDeadline());
    } else {
      verdict.decision = review::Decision::kDeny;
      verdict.reason = std::string(kHoldNeedsServe) + " (" + verdict.reason + ")";
    }
  }
  record(verdict);
  return verdict;
}

SResult<Json> Manager::reviewGate(const Caller& caller, const LiveSandbox& box,
                                  review::Subject subject, const std::string& execution_id) {
  auto verdict = judge(box.profile_name, std::move(subject), {box.id, caller.tenant, execution_id});
  if (!verdict) return Json();
  if (!verdict->allowed()) {
    // A chain that could not be built is the operator's problem, not a review's denial.
    if (verdict->reviewer != "chain") {
      metrics_.reject("denied_by_review");
      ++box.review_denials;
    }
    return std::unexpected(
        ServiceError{ErrorCode::kDeniedByReview, verdict->message(), verdict->toJson()});
  }
  return verdict->toJson();
}

SResult<Json> Manager::listReviews(const Caller& caller) {
  Json list = Json::array();
  // The default tenant (the Unix socket's operator) sees every tenant's held requests.
  for (const auto& p : approvals_.pending(caller.tenant == "default" ? "" : caller.tenant))
    list.push_back(p.toJson());
  return Json{{"reviews", list}};
}

SResult<> Manager::decideReview(const Caller& caller, const std::string& review_id, bool approve,
                                const std::string& reason) {
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

}  // namespace airlock::sandbox
