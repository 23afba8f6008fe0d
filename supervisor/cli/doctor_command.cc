// airlock doctor: what this host can do, and so which backends and limits will work.
#include <iostream>

#include "supervisor/cli/cli.h"
#include "supervisor/doctor/doctor.h"
#include "supervisor/sandbox/run_result.h"

namespace airlock::cli {

namespace {

constexpr const char* kDoctorUsage = R"(Usage: airlock doctor

Probes what this host's kernel and tools support (namespaces, cgroups, seccomp, Landlock, eBPF,
sandbox networks, KVM) and which isolation backends follow. A backend is listed as ok only when
its plugin is installed (in the plugin directory: $AIRLOCK_PLUGIN_DIR, else lib/airlock/plugins
beside the binary), loads, and what it needs on the host starts; a missing plugin is
`not installed`, naming the path looked at.

Exit code: 0 when the default backend (namespaces) works, 1 when it does not.
)";

}  // namespace

int doctorCommand(const std::vector<std::string>& args) {
  if (wantsHelp(args)) {
    std::cout << kDoctorUsage;
    return 0;
  }
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
