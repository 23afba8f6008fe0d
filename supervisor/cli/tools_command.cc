// airlock tools --format openai|anthropic|mcp: the tool definitions of `airlock mcp` in the
// shape an agent framework takes, for services that call the HTTP API or SDK themselves.
#include <iostream>

#include "supervisor/cli/cli.h"
#include "supervisor/mcp/tool_catalog.h"
#include "supervisor/sandbox/run_result.h"

namespace airlock::cli {

namespace {

constexpr const char* kUsage = R"(Usage: airlock tools --format openai|anthropic|mcp [--compact]

Prints the definitions of airlock's agent tools (run_code, run_command, write_file, read_file,
list_files, transfer_in, transfer_out, create_sandbox, end_sandbox) as JSON:
  openai     [{"type": "function", "function": {name, description, parameters}}]
  anthropic  [{name, description, input_schema}]
  mcp        {"tools": [{name, title, description, inputSchema}]}, the MCP tools/list result
)";

}  // namespace

int toolsCommand(const std::vector<std::string>& args) {
  std::string format;
  bool compact = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (args[i] == "--format" && i + 1 < args.size()) {
      format = args[++i];
    } else if (args[i].starts_with("--format=")) {
      format = args[i].substr(9);
    } else if (args[i] == "--compact") {
      compact = true;
    } else {
      printError("tools: unexpected argument '" + args[i] + "'\n" + kUsage);
      return sandbox::kExitAirlockError;
    }
  }
  if (format.empty()) {
    printError(std::string("tools: --format is required\n") + kUsage);
    return sandbox::kExitAirlockError;
  }
  auto defs = mcp::toolDefinitions(format);
  if (!defs) {
    printError("tools: " + defs.error().message());
    return sandbox::kExitAirlockError;
  }
  std::cout << defs->dump(compact ? -1 : 2) << "\n";
  return 0;
}

}  // namespace airlock::cli
