// What a host has installed, so `airlock policy check` (and `airlock run --policy`) can refuse a
// policy that names an isolation plugin, language, reviewer plugin or image the host lacks, at
// the file position that names it, instead of the first sandbox failing at run time. The policy
// library never looks at plugins or images itself: callers describe them here.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "airlock/policy/policy.h"
#include "airlock/result.h"

namespace airlock::policy {

struct Installed {
  std::string plugin_dir;  // where the plugins were looked for, for the message
  // Every name a profile may use for each: short names, full names, language aliases.
  std::vector<std::string> isolation, languages, reviewers;
  // The short names listed in messages ("installed: namespaces, gvisor").
  std::vector<std::string> isolation_short, languages_short, reviewers_short;
  // Why a profile cannot use image `name`, as a message naming the key ("filesystem.image: no
  // image named 'x' in ..."); "" when it can. Unset: images are not checked.
  std::function<std::string(const std::string& name)> image_problem;
};

// loadFile(), then every profile is checked against `installed`. An error carries
// "file:line:col: profile 'p': isolation = 'gvisr': isolation plugin not installed in DIR (did
// you mean 'gvisor'?; installed: namespaces, gvisor)".
Result<Policy> loadFileCheckingInstalled(const std::string& path, const Installed& installed);

}  // namespace airlock::policy
