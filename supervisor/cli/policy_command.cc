// airlock policy check|explain
#include <iostream>

#include "airlock/policy/installed.h"
#include "airlock/policy/keys.h"
#include "airlock/policy/policy.h"
#include "supervisor/cli/cli.h"
#include "supervisor/cli/installed_plugins.h"
#include "supervisor/sandbox/run_result.h"

namespace airlock::cli {

namespace {

constexpr const char* kPolicyUsage = R"(Usage:
  airlock policy check FILE
      validates FILE: its syntax and keys, and that every isolation plugin, language, reviewer
      plugin (plugin:<name>) and image a profile names is installed on this host
  airlock policy explain [--policy FILE] [--profile NAME] [--tenant NAME]
      the effective profile (the built-in default policy without --policy) and its relaxations

Exit code: 0 when the policy is valid, 1 when it is not, 125 on bad arguments.
)";

}  // namespace

int policyCommand(const std::vector<std::string>& args) {
  if (wantsHelp(args)) {
    std::cout << kPolicyUsage;
    return 0;
  }
  if (args.empty() || (args[0] != "check" && args[0] != "explain")) {
    printError(
        "policy: expected `airlock policy check FILE` or `airlock policy explain "
        "[--policy FILE] [--profile NAME] [--tenant NAME]`");
    return sandbox::kExitAirlockError;
  }
  std::string file, profile, tenant;
  for (size_t i = 1; i < args.size(); ++i) {
    const bool explain_flag =
        args[0] == "explain" && (args[i] == "--profile" || args[i] == "--tenant");
    if ((args[i] == "--policy" || explain_flag) && i + 1 < args.size()) {
      (args[i] == "--policy" ? file : args[i] == "--profile" ? profile : tenant) = args[i + 1];
      ++i;
    } else if (args[0] == "check" && file.empty() && args[i][0] != '-') {
      file = args[i];
    } else {
      printError("policy " + args[0] + ": unexpected argument '" + args[i] + "'");
      return sandbox::kExitAirlockError;
    }
  }
  if (args[0] == "check" && file.empty()) {
    printError("policy check: which file? `airlock policy check FILE`");
    return sandbox::kExitAirlockError;
  }
  // `check` also holds the file against this host: a profile naming a plugin or image that is
  // not installed would only fail at its first sandbox.
  auto pol = file.empty()         ? Result<policy::Policy>(policy::builtinDefault())
             : args[0] == "check" ? policy::loadFileCheckingInstalled(file, installedOnThisHost())
                                  : policy::loadFile(file);
  if (!pol) {
    std::cerr << pol.error().message() << "\n";
    return 1;
  }
  if (auto v = policy::validate(*pol); !v) {
    std::cerr << pol->source << ": " << v.error().message() << "\n";
    return 1;
  }
  if (args[0] == "check") {
    std::cout << pol->source << ": OK, schema " << pol->schema << ", " << pol->profiles.size()
              << " profile(s), default '" << pol->default_profile << "', " << pol->tenants.size()
              << " tenant(s), sha256 " << pol->hash << "\n";
    for (const auto& r : policy::relaxations(*pol)) std::cout << "  relaxation: " << r << "\n";
    return 0;
  }
  auto p = pol->profile(profile);
  if (!p) {
    printError(p.error().message());
    return 1;
  }
  const policy::Tenant* who = nullptr;
  if (!tenant.empty()) {
    auto t = pol->tenant(tenant);
    if (!t) {
      printError(t.error().message());
      return 1;
    }
    who = *t;
    if (!who->allowsProfile((*p)->name)) {
      std::string allowed;
      for (const auto& name : who->profiles) allowed += (allowed.empty() ? "" : ", ") + name;
      printError("tenant '" + who->name + "' may not use profile '" + (*p)->name +
                 "' (it may use: " + allowed + ")");
      return 1;
    }
  }
  std::cout << policy::explainText(*pol, **p, who);
  return 0;
}

}  // namespace airlock::cli
