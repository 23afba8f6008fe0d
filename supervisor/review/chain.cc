#include "supervisor/review/chain.h"

#include <cerrno>

#include "supervisor/review/command_reviewer.h"
#include "supervisor/review/limits_reviewer.h"
#include "supervisor/review/patterns_reviewer.h"
#include "supervisor/review/plugin_reviewer.h"
#include "supervisor/review/python_ast_reviewer.h"
#include "supervisor/review/shell_reviewer.h"
#include "supervisor/review/webhook_reviewer.h"

namespace airlock::review {

namespace {

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

Result<std::unique_ptr<Reviewer>> makeReviewer(const std::string& name,
                                               const policy::Review& review,
                                               const ChainOptions& options) {
  if (name == "limits") return std::make_unique<LimitsReviewer>(review.limits);
  if (name == "shell") return std::make_unique<ShellReviewer>(review.shell);
  if (name == "command") {
    if (!options.sandbox_runner) {
      return fail("the chain names command but no sandbox runner was given to run it in");
    }
    return std::make_unique<CommandReviewer>(review.command, options.sandbox_runner);
  }
  if (name == "patterns") {
    auto r = PatternsReviewer::create(review.patterns);
    if (!r) return Unexpected(r.error());
    return std::unique_ptr<Reviewer>(std::move(*r));
  }
  if (name == "webhook") {
    auto r = WebhookReviewer::create(review.webhook);
    if (!r) return Unexpected(r.error());
    return std::unique_ptr<Reviewer>(std::move(*r));
  }
  if (name == "python_ast") {
    if (!options.sandbox_runner) {
      return fail("the chain names python_ast but no sandbox runner was given to run it in");
    }
    return std::make_unique<PythonAstReviewer>(review.python_ast, options.sandbox_runner);
  }
  if (name.starts_with(policy::kPluginReviewerPrefix)) {
    const std::string plugin_name = name.substr(policy::kPluginReviewerPrefix.size());
    if (options.plugins == nullptr) {
      return fail("the chain names '" + name + "' but no plugin registry was given");
    }
    std::string config = "{}";
    for (const policy::ReviewPlugin& p : review.plugins) {
      if (p.name == plugin_name) config = p.config;
    }
    auto r = PluginReviewer::create(*options.plugins, plugin_name, config);
    if (!r) return Unexpected(r.error());
    return std::unique_ptr<Reviewer>(std::move(*r));
  }
  return fail("unknown reviewer '" + name + "'");
}

}  // namespace

Result<std::shared_ptr<const Chain>> Chain::build(const policy::Profile& profile,
                                                  ChainOptions options) {
  std::vector<std::unique_ptr<Reviewer>> reviewers;
  for (const std::string& name : profile.review.chain) {
    auto r = makeReviewer(name, profile.review, options);
    if (!r) {
      return Unexpected(
          std::move(r.error()).wrap("profile '" + profile.name + "': review chain: " + name));
    }
    reviewers.push_back(std::move(*r));
  }
  return fromReviewers(std::move(reviewers), profile, std::move(options));
}

std::shared_ptr<const Chain> Chain::fromReviewers(std::vector<std::unique_ptr<Reviewer>> reviewers,
                                                  const policy::Profile& profile,
                                                  ChainOptions options) {
  std::shared_ptr<Chain> chain(new Chain());
  chain->reviewers_ = std::move(reviewers);
  chain->profile_ = profile.name;
  chain->policy_hash_ = options.policy_hash;
  chain->fail_open_ = profile.review.fail_open;
  chain->hold_deadline_ = std::chrono::seconds(profile.review.hold_deadline_s);
  chain->cache_ =
      options.cache ? options.cache : std::make_shared<VerdictCache>(profile.review.cache_entries);
  chain->runner_ = std::move(options.sandbox_runner);
  return chain;
}

std::vector<std::string> Chain::names() const {
  std::vector<std::string> out;
  for (const auto& r : reviewers_) out.push_back(r->name());
  return out;
}

ReviewOutcome Chain::review(Subject subject) const {
  const auto t0 = Clock::now();
  ReviewOutcome outcome;
  if (reviewers_.empty()) return outcome;
  if (subject.profile.empty()) subject.profile = profile_;

  const std::string key = VerdictCache::key(subject, profile_, policy_hash_);
  if (auto hit = cache_->find(key)) {
    outcome.verdict = *hit;
    outcome.verdict.cached = true;
    outcome.verdict.duration_ms = msSince(t0);
    return outcome;
  }

  bool failed = false;
  for (const auto& reviewer : reviewers_) {
    const auto ts = Clock::now();
    Result<Verdict> said = [&]() -> Result<Verdict> {
      try {
        return reviewer->review(subject);
      } catch (const std::exception& e) {  // a bug in a reviewer must not take the caller down
        return fail(std::string("unexpected exception: ") + e.what());
      }
    }();
    ReviewStep step{reviewer->name(), Decision::kAllow, {}, {}, {}, msSince(ts)};
    if (!said) {
      failed = true;
      step.error = said.error().message();
      step.rule = said.error().errnum() == ETIMEDOUT ? "timeout" : "error";
      if (fail_open_) {
        step.reason = "the reviewer failed and this profile fails open: " + step.error;
        outcome.steps.push_back(std::move(step));
        continue;
      }
      step.decision = Decision::kDeny;
      step.reason = "the reviewer failed and this profile fails closed: " + step.error;
      outcome.verdict = decide(Decision::kDeny, step.rule, step.reason);
      outcome.verdict.reviewer = reviewer->name();
      outcome.steps.push_back(std::move(step));
      break;
    }
    step.decision = said->decision;
    step.rule = said->rule;
    step.reason = said->reason;
    outcome.steps.push_back(step);
    if (said->decision != Decision::kAllow) {
      outcome.verdict = std::move(*said);
      outcome.verdict.reviewer = reviewer->name();
      break;
    }
  }
  outcome.verdict.duration_ms = msSince(t0);
  // Failures may be passing (a reviewer service restarting) and holds are per request: neither
  // is remembered.
  if (!failed && outcome.verdict.decision != Decision::kHold) cache_->insert(key, outcome.verdict);
  return outcome;
}

}  // namespace airlock::review
