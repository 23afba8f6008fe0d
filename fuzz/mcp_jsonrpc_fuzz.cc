// `airlock mcp` (supervisor/mcp): the JSON-RPC 2.0 dispatcher and the MCP server on top of it,
// fed the lines an MCP client (an AI agent's host) writes to its stdin, one message or batch per
// line, as one session. tools/call arguments are checked against the tool's schema
// (tool_catalog.cc, validateArguments) the way sandbox_tools.cc does before running a tool; the
// tools themselves need a running supervisor and are left out.
//
// Invariants checked: every answer is one line of JSON (an object, or an array for a batch), and
// every answer object says "jsonrpc": "2.0"; handleLine never throws.
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "supervisor/mcp/mcp_server.h"
#include "supervisor/mcp/tool_catalog.h"
#include "support/fuzz_check.h"

namespace mcp = airlock::mcp;
using Json = nlohmann::json;

namespace {

// What SandboxTools::call answers when the arguments are wrong, and a stand-in result otherwise.
Json checkArguments(const std::string& name, const Json& arguments) {
  const mcp::ToolSpec* tool = mcp::findTool(name);
  FUZZ_CHECK(tool != nullptr);  // McpServer refuses unknown tools before running one
  auto problem = mcp::validateArguments(*tool, arguments);
  return Json{{"content", {{{"type", "text"}, {"text", problem.value_or("ok")}}}},
              {"isError", problem.has_value()}};
}

void checkAnswerObject(const Json& answer) {
  FUZZ_CHECK(answer.is_object());
  FUZZ_CHECK(answer.value("jsonrpc", "") == "2.0");
  FUZZ_CHECK(answer.contains("result") != answer.contains("error"));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::cerr.rdbuf(nullptr);  // initialize logs each client on stderr; libFuzzer's output stays
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  mcp::McpServer server(checkArguments);
  while (!input.empty()) {
    const size_t nl = input.find('\n');
    const std::string_view line = input.substr(0, nl);
    input.remove_prefix(nl == std::string_view::npos ? input.size() : nl + 1);
    auto answer = server.handleLine(line);
    if (!answer) continue;
    FUZZ_CHECK(answer->find('\n') == std::string::npos);
    const Json parsed = Json::parse(*answer, nullptr, false);
    FUZZ_CHECK(!parsed.is_discarded());
    if (parsed.is_array()) {
      FUZZ_CHECK(!parsed.empty());
      for (const auto& a : parsed) checkAnswerObject(a);
    } else {
      checkAnswerObject(parsed);
    }
  }
  return 0;
}
