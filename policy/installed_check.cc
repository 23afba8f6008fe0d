// The checks of installed.h: each name a profile uses, against what the host has.
#include <algorithm>

#include "airlock/policy/installed.h"
#include "check.h"
#include "schema.h"

namespace airlock::policy::detail {

namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::ranges::find(names, name) != names.end();
}

// "<key> = '<value>': <kind> plugin not installed in DIR (did you mean 'x'?; installed: a, b)"
Problem missing(const std::string& key, const std::string& value, const std::string& kind,
                const std::vector<std::string>& known, const std::vector<std::string>& listed,
                const Installed& installed) {
  std::vector<std::string_view> candidates(known.begin(), known.end());
  const std::string_view suggestion = closest(value, candidates);
  std::string message = key + " = " + q(value) + ": " + kind + " plugin not installed";
  if (!installed.plugin_dir.empty()) message += " in '" + installed.plugin_dir + "'";
  message += " (";
  if (!suggestion.empty()) message += "did you mean " + q(suggestion) + "?; ";
  message += "installed: " + joined(listed) + ")";
  return Problem{key, message};
}

}  // namespace

std::optional<Problem> checkInstalled(const Profile& p, const Installed& installed) {
  if (!contains(installed.isolation, p.isolation))
    return missing("isolation", p.isolation, "isolation", installed.isolation,
                   installed.isolation_short, installed);
  for (size_t i = 0; i < p.isolation_choices.size(); ++i)
    if (!contains(installed.isolation, p.isolation_choices[i]))
      return missing("isolation_choices[" + std::to_string(i) + "]", p.isolation_choices[i],
                     "isolation", installed.isolation, installed.isolation_short, installed);
  for (size_t i = 0; i < p.languages.size(); ++i)
    if (!contains(installed.languages, p.languages[i]))
      return missing("languages[" + std::to_string(i) + "]", p.languages[i], "language",
                     installed.languages, installed.languages_short, installed);
  constexpr std::string_view kPlugin = "plugin:";
  for (size_t i = 0; i < p.review.chain.size(); ++i) {
    const std::string& entry = p.review.chain[i];
    if (!entry.starts_with(kPlugin)) continue;
    const std::string name = entry.substr(kPlugin.size());
    if (!contains(installed.reviewers, name)) {
      std::vector<std::string> prefixed;
      for (const auto& r : installed.reviewers) prefixed.push_back(std::string(kPlugin) + r);
      std::vector<std::string> listed;
      for (const auto& r : installed.reviewers_short) listed.push_back(std::string(kPlugin) + r);
      return missing("review.chain[" + std::to_string(i) + "]", entry, "review", prefixed, listed,
                     installed);
    }
  }
  if (!p.filesystem.image.empty() && installed.image_problem) {
    if (std::string problem = installed.image_problem(p.filesystem.image); !problem.empty())
      return Problem{"filesystem.image", problem};
  }
  return std::nullopt;
}

}  // namespace airlock::policy::detail
