// The `command` reviewer: an operator's program gets the subject as one JSON document on stdin
// and answers one verdict document on stdout (external_verdict.h). It runs as a one-shot program
// in a throwaway sandbox of the reviewed profile (sandbox_runner.h), never on the host and never
// as root: its directory is bound read-only, its network is the profile's, and the sandbox (with
// everything the program started) is destroyed after the answer or at its timeout. A crash, a
// non-zero exit, a timeout or a bad answer is an Error, so the chain fails closed.
#pragma once

#include <memory>

#include "airlock/policy/review.h"
#include "supervisor/review/reviewer.h"
#include "supervisor/review/sandbox_runner.h"

namespace airlock::review {

class CommandReviewer final : public Reviewer {
 public:
  CommandReviewer(policy::ReviewCommand command, std::shared_ptr<SandboxRunner> runner)
      : command_(std::move(command)), runner_(std::move(runner)) {}
  const std::string& name() const override { return name_; }
  Result<Verdict> review(const Subject& subject) override;

 private:
  policy::ReviewCommand command_;
  std::shared_ptr<SandboxRunner> runner_;
  std::string name_ = "command";
};

}  // namespace airlock::review
