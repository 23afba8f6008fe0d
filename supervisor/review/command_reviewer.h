// The `command` reviewer: an operator's program gets the subject as one JSON document on stdin
// and answers one verdict document on stdout (external_verdict.h). It is started with
// posix_spawn (no shell), gets an empty environment but PATH, and is killed (its whole process
// group) when it passes its timeout. A crash, a non-zero exit, a timeout or a bad answer is an
// Error, so the chain fails closed.
#pragma once

#include "airlock/policy/review.h"
#include "supervisor/review/reviewer.h"

namespace airlock::review {

class CommandReviewer final : public Reviewer {
 public:
  explicit CommandReviewer(policy::ReviewCommand command) : command_(std::move(command)) {}
  const std::string& name() const override { return name_; }
  Result<Verdict> review(const Subject& subject) override;

 private:
  policy::ReviewCommand command_;
  std::string name_ = "command";
};

}  // namespace airlock::review
