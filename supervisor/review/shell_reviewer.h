// The `shell` reviewer: shell code and commands may run only allowlisted commands ("no arbitrary
// shell commands"), or none at all (mode "off"). Code in other languages passes untouched.
#pragma once

#include "airlock/policy/review.h"
#include "supervisor/review/reviewer.h"

namespace airlock::review {

class ShellReviewer final : public Reviewer {
 public:
  explicit ShellReviewer(policy::ReviewShell shell) : shell_(std::move(shell)) {}
  const std::string& name() const override { return name_; }
  Result<Verdict> review(const Subject& subject) override;

 private:
  // Whether one command word may run: a bare name must be listed; a path must be listed exactly
  // (a bare "ls" does not allow "/tmp/ls").
  bool allowed(const std::string& command) const;

  policy::ReviewShell shell_;
  std::string name_ = "shell";
};

}  // namespace airlock::review
