#include "supervisor/cli/cli.h"

#include <cstdio>
#include <iostream>
#include <map>

#include "supervisor/sandbox/run_result.h"

namespace airlock::cli {

namespace {

constexpr const char* kUsage = R"(airlock: run untrusted code in isolated sandboxes

Usage:
  airlock run [options] [FILE | -] [-- ARGS...]    run code once in a fresh sandbox
  airlock policy check FILE                        validate a policy file
  airlock policy explain [--policy FILE] [--profile NAME]
                                                   show the effective profile and relaxations
  airlock doctor                                   what this host's kernel supports
  airlock image build|import|ls|inspect|rm ...     root filesystem images for profiles
  airlock image prepare [--profile NAME]           prepare what microVM sandboxes boot
  airlock serve [options]                          run the long-lived supervisor (HTTP API)
  airlock review --profile NAME FILE               run the review chain only (dry run)
  airlock mcp                                      Model Context Protocol server on stdio
  airlock tools --format openai|anthropic|mcp      tool definitions for agent frameworks
  airlock audit tail|query [options]               read the audit log (execs, connections)
  airlock audit unload                             remove the host's pinned eBPF engine if unused
  airlock fleet haproxy --nodes FILE --out FILE    HAProxy's configuration for a fleet of nodes
  airlock version

Talking to a running `airlock serve` (found from AIRLOCK_URL, default
unix:///run/airlock/airlock.sock, and AIRLOCK_TOKEN; `run` uses it too when it is reachable):
  airlock sandbox create|ls|get|rm|keepalive ...   manage sandboxes
  airlock exec SB [options] CMD [ARGS...]          run a command, output live
  airlock cmd ls|attach|kill SB [ID]               background commands of a sandbox
  airlock code SB [options] (-c CODE | FILE | -)   run code in a stateful context
  airlock files put|get|ls SB ...                  copy files in and out
  airlock review ls|approve|reject [RID]           the approval queue of held executions
  airlock top [--once] [--json] [--sort cpu|mem|age]  live view of sandboxes (CPU, memory, runs)

Exit codes: `run` and `exec` exit with the program's own code, 128+N when it was killed by
signal N and 124 on timeout (`run` also 122 for its memory limit, 123 when the policy refused);
`code` exits 0 when the code ran, 1 when it raised an error, 124 on timeout; every command
exits 125 when airlock itself failed (bad flags, supervisor not reachable, an error answer).
Run `airlock <command> --help` for the options of each.
)";

}  // namespace

void printError(const std::string& message) { std::cerr << "airlock: " << message << "\n"; }

bool wantsHelp(const std::vector<std::string>& args) {
  for (const auto& a : args) {
    if (a == "--") return false;
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    std::cout << kUsage;
    return args.empty() ? sandbox::kExitAirlockError : 0;
  }
  std::string cmd = args[0];
  args.erase(args.begin());
  // Every subcommand of the usage above; each answers `--help` itself and exits 0.
  static const std::map<std::string, int (*)(const std::vector<std::string>&)> kCommands = {
      {"run", runCommand},     {"policy", policyCommand}, {"doctor", doctorCommand},
      {"image", imageCommand}, {"serve", serveCommand},   {"sandbox", sandboxCommand},
      {"exec", execCommand},   {"cmd", cmdCommand},       {"code", codeCommand},
      {"files", filesCommand}, {"review", reviewCommand}, {"mcp", mcpCommand},
      {"tools", toolsCommand}, {"audit", auditCommand},   {"top", topCommand},
      {"fleet", fleetCommand},
  };
  if (auto it = kCommands.find(cmd); it != kCommands.end()) return it->second(args);
  if (cmd == "version" || cmd == "--version") {
    std::cout << "airlock " << AIRLOCK_VERSION << "\n";
    return 0;
  }
  printError("unknown command '" + cmd + "'\n" + kUsage);
  return sandbox::kExitAirlockError;
}

}  // namespace airlock::cli
