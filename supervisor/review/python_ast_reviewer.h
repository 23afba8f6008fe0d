// The `python_ast` reviewer: parses Python code with Python's own `ast` module and looks for
// denied imports, denied calls (after resolving import aliases, getattr with constant names and
// builtins), dynamic getattr, and escape-hatch attributes such as __subclasses__. The parse runs
// in a throwaway sandbox (sandbox_runner.h): a hostile input that crashes or hangs the parser
// takes down only that sandbox, and the reviewer then fails (an Error, so the chain fails
// closed). Code that is not valid Python is allowed: the interpreter refuses it the same way.
#pragma once

#include <memory>

#include "airlock/policy/review.h"
#include "supervisor/review/reviewer.h"
#include "supervisor/review/sandbox_runner.h"

namespace airlock::review {

class PythonAstReviewer final : public Reviewer {
 public:
  PythonAstReviewer(policy::ReviewPythonAst config, std::shared_ptr<SandboxRunner> runner)
      : config_(std::move(config)), runner_(std::move(runner)) {}
  const std::string& name() const override { return name_; }
  Result<Verdict> review(const Subject& subject) override;

  // The checker program (python_ast_check.py) and the request it reads on stdin; exposed for
  // tests and the benchmark.
  static const std::string& checkerScript();
  std::string checkerRequest(const Subject& subject) const;

 private:
  policy::ReviewPythonAst config_;
  std::shared_ptr<SandboxRunner> runner_;
  std::string name_ = "python_ast";
};

}  // namespace airlock::review
