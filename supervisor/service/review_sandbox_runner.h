// The sandbox runner of `airlock serve`'s review chains (review/sandbox_runner.h): each python_ast
// check runs in a fresh sandbox of the reviewed profile, which holds nothing else and is destroyed
// right after. The code under review travels on stdin, never in argv or a file.
#pragma once

#include <string>

#include "airlock/policy/policy.h"
#include "supervisor/plugin/registry.h"
#include "supervisor/review/sandbox_runner.h"

namespace airlock::service {

class ReviewSandboxRunner final : public review::SandboxRunner {
 public:
  ReviewSandboxRunner(plugin::Registry& registry, policy::Profile profile, std::string agent_path,
                      std::string state_dir)
      : registry_(registry),
        profile_(std::move(profile)),
        agent_path_(std::move(agent_path)),
        state_dir_(std::move(state_dir)) {}
  Result<review::SandboxJobResult> run(const review::SandboxJob& job) override;

 private:
  plugin::Registry& registry_;
  const policy::Profile profile_;
  const std::string agent_path_, state_dir_;
};

}  // namespace airlock::service
