// The one tool catalog behind `airlock mcp` and `airlock tools`: every tool has a schema that
// frameworks accept, the three output shapes carry the same tools, arguments are checked.
#include <gtest/gtest.h>

#include <set>

#include "supervisor/mcp/tool_catalog.h"
#include "test_support.h"

namespace airlock::mcp {
namespace {

const std::set<std::string> kTools = {"run_code",     "run_command",    "write_file",
                                      "read_file",    "list_files",     "transfer_in",
                                      "transfer_out", "create_sandbox", "end_sandbox"};

TEST(McpCatalog, EveryToolHasADescriptionAndAClosedObjectSchema) {
  std::set<std::string> names;
  for (const auto& t : toolCatalog()) {
    names.insert(t.name);
    EXPECT_GT(t.description.size(), 40u) << t.name;
    EXPECT_FALSE(t.title.empty()) << t.name;
    EXPECT_EQ(t.input_schema["type"], "object") << t.name;
    EXPECT_EQ(t.input_schema["additionalProperties"], false) << t.name;
    for (const auto& req : t.input_schema["required"])
      EXPECT_TRUE(t.input_schema["properties"].contains(req.get<std::string>()))
          << t.name << " " << req;
    for (const auto& [prop, schema] : t.input_schema["properties"].items()) {
      EXPECT_TRUE(schema.contains("type")) << t.name << "." << prop;
      EXPECT_TRUE(schema.contains("description")) << t.name << "." << prop;
    }
  }
  EXPECT_EQ(names, kTools);
  EXPECT_EQ(findTool("run_code")->input_schema["required"], Json::array({"code"}));
  EXPECT_EQ(findTool("nope"), nullptr);
}

TEST(McpCatalog, ThreeFormatsCarryTheSameTools) {
  auto openai = toolDefinitions("openai");
  auto anthropic = toolDefinitions("anthropic");
  auto mcp = toolDefinitions("mcp");
  ASSERT_TRUE(openai && anthropic && mcp);
  ASSERT_EQ(openai->size(), toolCatalog().size());
  ASSERT_EQ(anthropic->size(), toolCatalog().size());
  ASSERT_EQ((*mcp)["tools"].size(), toolCatalog().size());
  for (size_t i = 0; i < toolCatalog().size(); ++i) {
    const auto& t = toolCatalog()[i];
    const Json& o = (*openai)[i];
    EXPECT_EQ(o["type"], "function");
    EXPECT_EQ(o["function"]["name"], t.name);
    EXPECT_EQ(o["function"]["description"], t.description);
    EXPECT_EQ(o["function"]["parameters"], t.input_schema);
    EXPECT_EQ(o.size(), 2u);
    const Json& a = (*anthropic)[i];
    EXPECT_EQ(
        a,
        (Json{{"name", t.name}, {"description", t.description}, {"input_schema", t.input_schema}}));
    const Json& m = (*mcp)["tools"][i];
    EXPECT_EQ(m["name"], t.name);
    EXPECT_EQ(m["inputSchema"], t.input_schema);
  }
  auto bad = toolDefinitions("langchain");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message(), "unknown tool format 'langchain' (openai, anthropic or mcp)");
}

TEST(McpCatalog, ArgumentsAreCheckedAgainstTheSchema) {
  const ToolSpec& run = *findTool("run_code");
  EXPECT_EQ(validateArguments(run, Json{{"code", "1"}}), std::nullopt);
  EXPECT_EQ(validateArguments(run, Json{{"code", "1"}, {"timeout_s", 2.5}, {"language", "node"}}),
            std::nullopt);
  EXPECT_EQ(validateArguments(run, Json::object()), "missing required argument 'code'");
  EXPECT_EQ(validateArguments(run, Json{{"code", 1}}), "argument 'code' must be a string");
  EXPECT_EQ(validateArguments(run, Json{{"code", "1"}, {"timeout_s", "5"}}),
            "argument 'timeout_s' must be a number");
  EXPECT_EQ(validateArguments(run, Json{{"code", "1"}, {"timeout_s", 0}}),
            "argument 'timeout_s' must be greater than 0");
  EXPECT_EQ(validateArguments(run, Json::array()), "arguments must be a JSON object");
  auto unknown = validateArguments(run, Json{{"code", "1"}, {"lang", "py"}});
  ASSERT_TRUE(unknown);
  EXPECT_NE(unknown->find("unknown argument 'lang' (run_code takes "), std::string::npos)
      << *unknown;
  EXPECT_EQ(validateArguments(*findTool("write_file"),
                              Json{{"path", "/a"}, {"content", "x"}, {"encoding", "hex"}}),
            "argument 'encoding' must be one of [\"utf-8\",\"base64\"]");
}

TEST(McpCatalog, ToolsCommandPrintsEachFormat) {
  for (const char* format : {"openai", "anthropic", "mcp"}) {
    auto r = testing::runAirlock({"tools", "--format", format});
    ASSERT_EQ(r.exit_code, 0) << format << ": " << r.err;
    auto printed = Json::parse(r.out, nullptr, false);
    ASSERT_FALSE(printed.is_discarded()) << r.out;
    EXPECT_EQ(printed, *toolDefinitions(format)) << format;
  }
  auto bad = testing::runAirlock({"tools", "--format", "xml"});
  EXPECT_EQ(bad.exit_code, 125);
  EXPECT_NE(bad.err.find("unknown tool format 'xml'"), std::string::npos) << bad.err;
  EXPECT_EQ(testing::runAirlock({"tools"}).exit_code, 125);
}

}  // namespace
}  // namespace airlock::mcp
