// The tools airlock offers to AI agents: names, descriptions and JSON Schemas, declared once
// and served by `airlock mcp` (tools/list) and `airlock tools --format openai|anthropic|mcp`.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "airlock/result.h"

namespace airlock::mcp {

using Json = nlohmann::json;

struct ToolSpec {
  std::string name;         // run_code, run_command, ...
  std::string title;        // for people: "Run code"
  std::string description;  // for the model: what it does, when to use it, what it returns
  Json input_schema;        // JSON Schema (draft 2020-12 subset) of the arguments object
};

const std::vector<ToolSpec>& toolCatalog();
const ToolSpec* findTool(std::string_view name);

// The catalog in one framework's shape:
//   openai:    [{"type": "function", "function": {name, description, parameters}}]
//   anthropic: [{name, description, input_schema}]
//   mcp:       {"tools": [{name, title, description, inputSchema}]} (the tools/list result)
Result<Json> toolDefinitions(std::string_view format);

// Checks `arguments` against the tool's schema (types, required, enums, unknown fields); the
// message names the argument that is wrong: "argument 'timeout_s' must be a number".
std::optional<std::string> validateArguments(const ToolSpec& tool, const Json& arguments);

}  // namespace airlock::mcp
