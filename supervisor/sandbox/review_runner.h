// The sandbox runner of every review chain (review/sandbox_runner.h): reviewers that must run
// code to judge it (python_ast) ask the manager for a one-shot program in a fresh sandbox of the
// reviewed profile, which holds nothing else, is neither reviewed nor audited itself (the checker
// is airlock's own code, and its result is the verdict), and is destroyed right after. The code
// under review travels on stdin, never in argv or a file.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "airlock/policy/policy.h"
#include "supervisor/review/sandbox_runner.h"

namespace airlock::sandbox {

class Manager;

class ReviewSandboxRunner final : public review::SandboxRunner {
 public:
  // `manager` owns the chain that owns this runner, so it outlives it.
  ReviewSandboxRunner(Manager& manager, std::string profile)
      : manager_(manager), profile_(std::move(profile)) {}
  Result<review::SandboxJobResult> run(const review::SandboxJob& job) override;

 private:
  Manager& manager_;
  const std::string profile_;
};

// The same for chains built outside a manager (`airlock review`'s dry run, benchmarks, tests):
// the first job starts a one-shot manager of `policy`, which every later job reuses.
class StandaloneReviewRunner final : public review::SandboxRunner {
 public:
  StandaloneReviewRunner(policy::Policy policy, std::string profile, std::string plugin_dir,
                         std::string agent_path);
  ~StandaloneReviewRunner() override;
  Result<review::SandboxJobResult> run(const review::SandboxJob& job) override;

 private:
  policy::Policy policy_;
  const std::string profile_, plugin_dir_, agent_path_;
  std::mutex mu_;
  std::unique_ptr<Manager> manager_;  // under mu_
};

}  // namespace airlock::sandbox
