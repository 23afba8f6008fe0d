// The `patterns` reviewer: the profile's regex rules, tried in order, the first match deciding.
// RE2 runs in time linear in the input with bounded memory and no recursion, so hostile text can
// neither stall nor crash it; text above max_scan_bytes is not scanned at all (an Error: the
// reviewer cannot vouch for it).
#pragma once

#include <re2/re2.h>

#include <memory>
#include <vector>

#include "airlock/policy/review.h"
#include "supervisor/review/reviewer.h"

namespace airlock::review {

class PatternsReviewer final : public Reviewer {
 public:
  // Compiles every rule; an error names the rule (the policy check already caught these).
  static Result<std::unique_ptr<PatternsReviewer>> create(const policy::ReviewPatterns& patterns);

  const std::string& name() const override { return name_; }
  Result<Verdict> review(const Subject& subject) override;

 private:
  struct Rule {
    policy::ReviewRule rule;
    Decision decision;
    std::unique_ptr<RE2> re;
  };
  PatternsReviewer() = default;
  std::vector<Rule> rules_;
  uint64_t max_scan_bytes_ = 0;
  std::string name_ = "patterns";
};

}  // namespace airlock::review
