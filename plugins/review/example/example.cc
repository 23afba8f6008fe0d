// airlock.review.example: a review plugin to copy from. It denies code or commands containing
// any of its configured words and holds those containing a "hold" word:
//
//   [profiles.default.review]
//   chain = ["limits", "plugin:example"]
//   [[profiles.default.review.plugins]]
//   name = "example"
//   config = { deny_words = ["rm -rf"], hold_words = ["DROP TABLE"] }
#include <airlock/plugin.hpp>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

std::vector<std::string> words(const nlohmann::json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return {};
  if (!it->is_array())
    throw airlock::sdk::PluginError(EINVAL, std::string(key) + ": expected an array of strings");
  std::vector<std::string> out;
  for (const auto& w : *it) {
    if (!w.is_string() || w.get<std::string>().empty()) {
      throw airlock::sdk::PluginError(EINVAL, std::string(key) + ": expected non-empty strings");
    }
    out.push_back(w.get<std::string>());
  }
  return out;
}

class ExampleReviewer final : public airlock::sdk::ReviewPlugin {
 public:
  ExampleReviewer(const airlock_host_v1* host, std::string_view config_json)
      : ReviewPlugin(host, config_json) {
    auto config = nlohmann::json::parse(config_json, nullptr, false);
    if (config.is_discarded() || !config.is_object()) {
      throw airlock::sdk::PluginError(EINVAL, "config is not a JSON object");
    }
    deny_words_ = words(config, "deny_words");
    hold_words_ = words(config, "hold_words");
  }

  Verdict review(const Subject& subject) override {
    for (const auto& w : deny_words_) {
      if (subject.text.find(w) != std::string_view::npos) {
        return {Decision::kDeny, "deny-word", "contains '" + w + "'"};
      }
    }
    for (const auto& w : hold_words_) {
      if (subject.text.find(w) != std::string_view::npos) {
        return {Decision::kHold, "hold-word", "contains '" + w + "'; an operator decides"};
      }
    }
    return {};
  }

 private:
  std::vector<std::string> deny_words_, hold_words_;
};

}  // namespace

AIRLOCK_REVIEW_PLUGIN(ExampleReviewer, "airlock.review.example", "1.0.0")
