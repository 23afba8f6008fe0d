// One line for many relaxations: what `airlock run` prints on every run, where the full list
// (relaxations(), one line each) would bury the program's output.
#pragma once

#include <string>
#include <vector>

namespace airlock::policy {

// "policy relaxations: 9 (packages.allow, limits.timeout_s, limits.memory_mb, …)": the count and
// each relaxation's key, without the profile prefix; "" when there are none.
std::string relaxationSummary(const std::vector<std::string>& relaxations);

}  // namespace airlock::policy
