#include "supervisor/cli/cli.h"

#include <cstdio>
#include <iostream>

#include "supervisor/run/run_result.h"

namespace airlock::cli {

namespace {

constexpr const char* kUsage = R"(airlock: run untrusted code in isolated sandboxes

Usage:
  airlock run [options] [FILE | -] [-- ARGS...]   run code once in a fresh sandbox
  airlock policy check FILE                        validate a policy file
  airlock policy explain [--policy FILE] [--profile NAME]
                                                   show the effective profile and relaxations
  airlock doctor                                   what this host's kernel supports
  airlock version

Run `airlock run --help` for the options of run.
)";

}  // namespace

void printError(const std::string& message) { std::cerr << "airlock: " << message << "\n"; }

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    std::cout << kUsage;
    return args.empty() ? run::kExitAirlockError : 0;
  }
  std::string cmd = args[0];
  args.erase(args.begin());
  if (cmd == "run") return runCommand(args);
  if (cmd == "policy") return policyCommand(args);
  if (cmd == "doctor") return doctorCommand(args);
  if (cmd == "version" || cmd == "--version") {
    std::cout << "airlock " << AIRLOCK_VERSION << "\n";
    return 0;
  }
  printError("unknown command '" + cmd + "'\n" + kUsage);
  return run::kExitAirlockError;
}

}  // namespace airlock::cli
