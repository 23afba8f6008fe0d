// airlock policy check|explain
#include <iostream>

#include "airlock/policy/policy.h"
#include "supervisor/cli/cli.h"
#include "supervisor/run/run_result.h"

namespace airlock::cli {

namespace {

void printProfile(const policy::Profile& p) {
  const auto& l = p.limits;
  std::cout << "profile '" << p.name << "'" << (p.description.empty() ? "" : ": " + p.description)
            << "\n"
            << "  isolation " << p.isolation << ", user " << p.user << ", network "
            << p.network.mode << ", landlock " << (p.landlock ? "on" : "off") << "\n"
            << "  limits: timeout " << l.timeout_s << " s, memory " << l.memory_mb << " MiB, pids "
            << l.pids << ", cpu " << l.cpu_percent << " %, file size " << l.file_size_mb
            << " MiB, open files " << l.open_files << ", output " << l.output_bytes
            << " bytes/stream, workspace " << l.workspace_mb << " MiB, /tmp " << l.tmp_mb
            << " MiB\n";
  std::cout << "  languages:";
  for (const auto& lang : p.languages) std::cout << " " << lang;
  std::cout << "\n";
  auto rel = policy::relaxations(p);
  if (rel.empty()) std::cout << "  relaxations: none\n";
  for (const auto& r : rel) std::cout << "  relaxation: " << r << "\n";
}

}  // namespace

int policyCommand(const std::vector<std::string>& args) {
  if (args.empty() || (args[0] != "check" && args[0] != "explain")) {
    printError(
        "policy: expected `airlock policy check FILE` or `airlock policy explain "
        "[--policy FILE] [--profile NAME]`");
    return run::kExitAirlockError;
  }
  std::string file, profile;
  for (size_t i = 1; i < args.size(); ++i) {
    if ((args[i] == "--policy" || args[i] == "--profile") && i + 1 < args.size()) {
      (args[i] == "--policy" ? file : profile) = args[i + 1];
      ++i;
    } else if (args[0] == "check" && file.empty() && args[i][0] != '-') {
      file = args[i];
    } else {
      printError("policy " + args[0] + ": unexpected argument '" + args[i] + "'");
      return run::kExitAirlockError;
    }
  }
  if (args[0] == "check" && file.empty()) {
    printError("policy check: which file? `airlock policy check FILE`");
    return run::kExitAirlockError;
  }
  auto pol =
      file.empty() ? Result<policy::Policy>(policy::builtinDefault()) : policy::loadFile(file);
  if (!pol) {
    std::cerr << pol.error().message() << "\n";
    return 1;
  }
  for (const auto& [name, p] : pol->profiles) {
    if (auto v = policy::validate(p); !v) {
      std::cerr << pol->source << ": " << v.error().message() << "\n";
      return 1;
    }
  }
  if (args[0] == "check") {
    std::cout << pol->source << ": OK, schema " << pol->schema << ", " << pol->profiles.size()
              << " profile(s), default '" << pol->default_profile << "', sha256 " << pol->hash
              << "\n";
    for (const auto& [name, p] : pol->profiles)
      for (const auto& r : policy::relaxations(p))
        std::cout << "  profile '" << name << "': relaxation: " << r << "\n";
    return 0;
  }
  auto p = pol->profile(profile.empty() ? pol->default_profile : profile);
  if (!p) {
    printError(p.error().message());
    return 1;
  }
  std::cout << "policy " << pol->source << " (sha256 " << pol->hash << ")\n";
  printProfile(**p);
  return 0;
}

}  // namespace airlock::cli
