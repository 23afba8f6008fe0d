// The `limits` reviewer: size, line count and binary content, before any other reviewer reads
// the text (so a 50 MB line never reaches a regex or a parser).
#pragma once

#include "airlock/policy/review.h"
#include "supervisor/review/reviewer.h"

namespace airlock::review {

class LimitsReviewer final : public Reviewer {
 public:
  explicit LimitsReviewer(policy::ReviewLimits limits) : limits_(limits) {}
  const std::string& name() const override { return name_; }
  Result<Verdict> review(const Subject& subject) override;

 private:
  policy::ReviewLimits limits_;
  std::string name_ = "limits";
};

// Whether `text` is valid UTF-8 without NUL bytes (overlong forms and surrogates are invalid).
bool isTextUtf8(std::string_view text);

}  // namespace airlock::review
