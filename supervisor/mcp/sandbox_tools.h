// Runs the catalog's tools (tool_catalog.h) against `airlock serve` through the C++ SDK, and
// keeps the sandboxes of one MCP session: the default one, created on the first call that names
// no sandbox, and those made with create_sandbox. All of them end with the session.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "airlock/client/sandbox.h"

namespace airlock::mcp {

using Json = nlohmann::json;

struct SessionOptions {
  sdk::ConnectionOptions connection;  // empty: AIRLOCK_URL / AIRLOCK_TOKEN
  std::string default_profile;        // for the default sandbox; "" = the policy's default
  std::string default_language = "python";
};

class SandboxTools {
 public:
  explicit SandboxTools(SessionOptions options);
  ~SandboxTools();  // ends every sandbox of the session
  SandboxTools(const SandboxTools&) = delete;
  SandboxTools& operator=(const SandboxTools&) = delete;

  // A tools/call result: {"content": [...], "isError": bool}. Failures of the tool (a bad
  // argument, a denial by review, an unknown sandbox, a code error) are results with isError,
  // so the model reads them; `name` must be in the catalog.
  Json call(const std::string& name, const Json& arguments);

  // Ends the session's sandboxes now (a failure is logged on stderr).
  void endAll();
  // Forgets the session's sandboxes without ending them: for when the supervisor itself is going
  // away and ends every sandbox on its way out.
  void detachAll();

 private:
  struct Target;
  // The sandbox `arguments` name (sandbox_id), or the default one, created when needed.
  sdk::Result<Target> resolve(const Json& arguments);
  Json runCode(const Json& args);
  Json runCommand(const Json& args);
  Json writeFile(const Json& args);
  Json readFile(const Json& args);
  Json listFiles(const Json& args);
  Json transfer(const Json& args, bool in);
  Json createSandbox(const Json& args);
  Json endSandbox(const Json& args);

  SessionOptions options_;
  std::optional<sdk::Sandbox> default_;
  std::map<std::string, sdk::Sandbox> created_;  // by id
};

// The text an SDK error becomes in a tool result; review denials name reviewer, rule, reason.
std::string describeError(const sdk::Error& error);

}  // namespace airlock::mcp
