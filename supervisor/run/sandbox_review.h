// The review chain in `airlock run`: its sandbox runner (a fresh one-shot sandbox per python_ast
// check, through runOnce) and the chain of the run's profile.
#pragma once

#include <memory>
#include <string>

#include "airlock/policy/policy.h"
#include "supervisor/review/chain.h"
#include "supervisor/review/sandbox_runner.h"
#include "supervisor/run/one_shot.h"

namespace airlock::run {

// Runs each job in its own sandbox of `profile` of `policy_file` (the profile's own review chain
// is not run for it), then removes the sandbox. The job's timeout covers everything: at that
// point the run is cancelled and torn down.
class OneShotSandboxRunner final : public review::SandboxRunner {
 public:
  OneShotSandboxRunner(std::string policy_file, std::string profile, RunPaths paths)
      : policy_file_(std::move(policy_file)),
        profile_(std::move(profile)),
        paths_(std::move(paths)) {}
  Result<review::SandboxJobResult> run(const review::SandboxJob& job) override;

 private:
  std::string policy_file_, profile_;
  RunPaths paths_;
};

// What `airlock run` tells about a hold: there is no operator to ask.
inline constexpr const char* kHoldNeedsServe = "held for approval, which needs airlock serve";

}  // namespace airlock::run
