#include "supervisor/review/patterns_reviewer.h"

#include <algorithm>

namespace airlock::review {

namespace {

// Big enough for any rule a person writes; a rule over it fails to compile instead of eating
// memory at match time.
constexpr int64_t kMaxProgramMemory = 8 << 20;

Decision decisionOf(const std::string& action) {
  if (action == "allow") return Decision::kAllow;
  if (action == "hold") return Decision::kHold;
  return Decision::kDeny;
}

}  // namespace

Result<std::unique_ptr<PatternsReviewer>> PatternsReviewer::create(
    const policy::ReviewPatterns& patterns) {
  std::unique_ptr<PatternsReviewer> reviewer(new PatternsReviewer());
  reviewer->max_scan_bytes_ = patterns.max_scan_bytes;
  RE2::Options options;
  options.set_log_errors(false);
  options.set_max_mem(kMaxProgramMemory);
  for (const policy::ReviewRule& rule : patterns.rules) {
    auto re = std::make_unique<RE2>(rule.pattern, options);
    if (!re->ok()) {
      return fail("review.patterns: rule '" + rule.id + "': invalid regular expression '" +
                  rule.pattern + "': " + re->error());
    }
    reviewer->rules_.push_back({rule, decisionOf(rule.action), std::move(re)});
  }
  return reviewer;
}

Result<Verdict> PatternsReviewer::review(const Subject& subject) {
  if (subject.text.size() > max_scan_bytes_) {
    return fail("the text is " + std::to_string(subject.text.size()) +
                " bytes, above review.patterns.max_scan_bytes = " +
                std::to_string(max_scan_bytes_) + ", so it was not scanned");
  }
  for (const Rule& r : rules_) {
    const auto& langs = r.rule.languages;
    // A transfer's listing is not code: only rules that name "transfer" look at it, so a rule
    // written for code never refuses a dataset whose file names happen to match.
    if (langs.empty() ? subject.kind == SubjectKind::kTransfer
                      : std::ranges::find(langs, subject.language) == langs.end())
      continue;
    if (!RE2::PartialMatch(subject.text, *r.re)) continue;
    std::string reason =
        r.rule.reason.empty() ? "matches pattern rule '" + r.rule.id + "'" : r.rule.reason;
    return decide(r.decision, r.rule.id, std::move(reason));
  }
  return allow();
}

}  // namespace airlock::review
