// airlock mcp: a Model Context Protocol server on stdio (docs/mcp.md). An MCP host (Claude
// Desktop, an agent framework) starts it and calls its tools; each tool runs in a sandbox of
// the `airlock serve` found from --url / AIRLOCK_URL, through the C++ client SDK.
#include <unistd.h>

#include <iostream>

#include "airlock/client/http.h"
#include "supervisor/cli/cli.h"
#include "supervisor/log/log.h"
#include "supervisor/mcp/mcp_server.h"
#include "supervisor/mcp/sandbox_tools.h"
#include "supervisor/mcp/stdio_transport.h"
#include "supervisor/sandbox/run_result.h"

namespace airlock::cli {

namespace {

constexpr const char* kUsage = R"(Usage: airlock mcp [--url URL] [--profile NAME] [--language LANG]

A Model Context Protocol server on stdin/stdout (JSON-RPC, one message per line; logs on stderr).
Its tools (run_code, run_command, write_file, read_file, list_files, transfer_in, transfer_out,
create_sandbox, end_sandbox) run in sandboxes of a running `airlock serve`. Calls without
sandbox_id share a default sandbox, created on first use; every sandbox of the session ends when
stdin closes.

  --url URL        the supervisor (default: AIRLOCK_URL, else unix:///run/airlock/airlock.sock);
                   AIRLOCK_TOKEN is sent as the bearer token when set
  --profile NAME   policy profile of the default sandbox (default: the policy's default)
  --language LANG  default language of the default sandbox (default: python); also --lang, -l
)";

}  // namespace

int mcpCommand(const std::vector<std::string>& args) {
  mcp::SessionOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    }
    const bool language = a == "--language" || a == "--lang" || a == "-l";
    if ((a == "--url" || a == "--profile" || language) && i + 1 < args.size()) {
      (a == "--url"       ? options.connection.url
       : a == "--profile" ? options.default_profile
                          : options.default_language) = args[++i];
    } else {
      printError("mcp: unexpected argument '" + a + "'\n" + kUsage);
      return sandbox::kExitAirlockError;
    }
  }
  // Checked now, so a bad URL is a clear start-up error rather than a failure of every tool.
  if (auto http = sdk::Http::connect(options.connection.url, options.connection.token); !http) {
    printError("mcp: " + http.error().message());
    return sandbox::kExitAirlockError;
  }
  mcp::SandboxTools tools(options);
  mcp::McpServer server([&tools](const std::string& name, const mcp::Json& arguments) {
    return tools.call(name, arguments);
  });
  // Its sandboxes and sessions come and go at info level: an MCP client keeps this stderr as
  // the server's log.
  log::configure(log::Level::kInfo, log::Format::kText);
  std::cerr << "airlock mcp: serving on stdio\n";
  auto ended = mcp::serveStdio(server, STDIN_FILENO, STDOUT_FILENO);
  tools.endAll();
  if (!ended) {
    printError("mcp: " + ended.error().message());
    return sandbox::kExitAirlockError;
  }
  std::cerr << "airlock mcp: stopped (" << *ended << ")\n";
  return 0;
}

}  // namespace airlock::cli
