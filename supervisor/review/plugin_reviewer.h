// A review plugin (ABI 1.2, AIRLOCK_PLUGIN_REVIEW) as a link of the chain: "plugin:<name>".
// Plugins are trusted and run in the supervisor; calls into one instance are serialized.
#pragma once

#include <memory>
#include <mutex>

#include "supervisor/plugin/instances.h"
#include "supervisor/plugin/registry.h"
#include "supervisor/review/reviewer.h"

namespace airlock::review {

class PluginReviewer final : public Reviewer {
 public:
  // Finds the review plugin by short or full name in `registry` (loading every plugin of its
  // directory) and creates an instance with `config_json`.
  static Result<std::unique_ptr<PluginReviewer>> create(plugin::Registry& registry,
                                                        const std::string& plugin_name,
                                                        const std::string& config_json);

  const std::string& name() const override { return name_; }
  Result<Verdict> review(const Subject& subject) override;

 private:
  PluginReviewer() = default;
  std::unique_ptr<plugin::Instance> instance_;
  const airlock_review_ops_v1* ops_ = nullptr;
  std::mutex mu_;
  std::string name_;
  bool sees_transfers_ = false;  // built against ABI 1.9 or later
};

}  // namespace airlock::review
