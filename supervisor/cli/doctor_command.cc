// airlock doctor: what this host can do, and so which backends and limits will work.
#include <iostream>

#include "supervisor/cli/cli.h"
#include "supervisor/doctor/doctor.h"
#include "supervisor/sandbox/run_result.h"

namespace airlock::cli {

int doctorCommand(const std::vector<std::string>& args) {
  if (!args.empty()) {
    printError("doctor: takes no arguments");
    return sandbox::kExitAirlockError;
  }
  auto checks = doctor::probeHost();
  if (!checks) {
    printError("doctor: " + checks.error().message());
    return 1;
  }
  std::cout << doctor::formatDoctor(*checks);
  for (const auto& c : *checks)
    if (c.feature.starts_with("backend namespaces")) return c.ok ? 0 : 1;
  return 0;
}

}  // namespace airlock::cli
