// The MCP server's JSON-RPC layer: the lifecycle, tools/list and tools/call, the error codes of
// JSON-RPC 2.0, and hostile lines, which get an error answer and never a crash. The stdio
// transport is driven through a pipe pair.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "supervisor/mcp/mcp_server.h"
#include "supervisor/mcp/stdio_transport.h"
#include "supervisor/mcp/tool_catalog.h"

namespace airlock::mcp {
namespace {

struct Recorder {
  std::vector<std::pair<std::string, Json>> calls;
  McpServer server{[this](const std::string& name, const Json& args) {
    calls.emplace_back(name, args);
    return Json{{"content", {{{"type", "text"}, {"text", "ran " + name}}}}, {"isError", false}};
  }};
  Json ask(const std::string& line) {
    auto answer = server.handleLine(line);
    EXPECT_TRUE(answer) << line;
    if (!answer) return Json();
    EXPECT_EQ(answer->find('\n'), std::string::npos) << "an answer must be one line";
    return Json::parse(*answer);
  }
};

TEST(McpProtocol, InitializeNegotiatesTheVersion) {
  Recorder r;
  auto a = r.ask(
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})");
  EXPECT_EQ(a["jsonrpc"], "2.0");
  EXPECT_EQ(a["id"], 1);
  EXPECT_EQ(a["result"]["protocolVersion"], "2025-03-26");
  EXPECT_EQ(a["result"]["capabilities"]["tools"]["listChanged"], false);
  EXPECT_EQ(a["result"]["serverInfo"]["name"], "airlock");
  EXPECT_TRUE(a["result"]["instructions"].is_string());

  auto future = r.ask(
      R"({"jsonrpc":"2.0","id":"x","method":"initialize","params":{"protocolVersion":"2099-01-01"}})");
  EXPECT_EQ(future["id"], "x");
  EXPECT_EQ(future["result"]["protocolVersion"], supportedProtocolVersions().front());

  auto missing = r.ask(R"({"jsonrpc":"2.0","id":2,"method":"initialize","params":{}})");
  EXPECT_EQ(missing["error"]["code"], rpc::kInvalidParams);

  EXPECT_FALSE(r.server.initialized());
  EXPECT_EQ(r.server.handleLine(R"({"jsonrpc":"2.0","method":"notifications/initialized"})"),
            std::nullopt);
  EXPECT_TRUE(r.server.initialized());
}

TEST(McpProtocol, PingAndToolsList) {
  Recorder r;
  EXPECT_EQ(r.ask(R"({"jsonrpc":"2.0","id":7,"method":"ping"})")["result"], Json::object());
  auto list = r.ask(R"({"jsonrpc":"2.0","id":8,"method":"tools/list","params":{}})");
  EXPECT_EQ(list["result"], *toolDefinitions("mcp"));
}

TEST(McpProtocol, ToolsCallReachesTheRunnerWithItsArguments) {
  Recorder r;
  auto a = r.ask(
      R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"1+1"}}})");
  EXPECT_EQ(a["result"]["content"][0]["text"], "ran run_code");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].second, (Json{{"code", "1+1"}}));
  auto no_args =
      r.ask(R"({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"list_files"}})");
  EXPECT_TRUE(no_args.contains("result"));
  EXPECT_EQ(r.calls.back().second, Json::object());
}

TEST(McpProtocol, JsonRpcErrors) {
  Recorder r;
  auto parse = r.ask("{\"jsonrpc\":\"2.0\",\"id\":1,");
  EXPECT_EQ(parse["error"]["code"], rpc::kParseError);
  EXPECT_TRUE(parse["id"].is_null());
  auto unknown = r.ask(R"({"jsonrpc":"2.0","id":5,"method":"resources/list"})");
  EXPECT_EQ(unknown["error"]["code"], rpc::kMethodNotFound);
  EXPECT_EQ(unknown["error"]["message"], "method not found: resources/list");
  EXPECT_EQ(unknown["id"], 5);
  auto unknown_tool =
      r.ask(R"({"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"rm_rf"}})");
  EXPECT_EQ(unknown_tool["error"]["code"], rpc::kInvalidParams);
  EXPECT_EQ(unknown_tool["error"]["message"], "unknown tool: rm_rf");
  auto no_name =
      r.ask(R"({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"arguments":{}}})");
  EXPECT_EQ(no_name["error"]["code"], rpc::kInvalidParams);
  auto params_array = r.ask(R"({"jsonrpc":"2.0","id":8,"method":"tools/list","params":[1]})");
  EXPECT_EQ(params_array["error"]["code"], rpc::kInvalidParams);
  auto not_object = r.ask("[1]");
  EXPECT_EQ(not_object[0]["error"]["code"], rpc::kInvalidRequest);
  auto no_method = r.ask(R"({"jsonrpc":"2.0","id":9})");
  EXPECT_EQ(no_method["error"]["code"], rpc::kInvalidRequest);
  auto wrong_version = r.ask(R"({"jsonrpc":"1.0","id":10,"method":"ping"})");
  EXPECT_EQ(wrong_version["error"]["code"], rpc::kInvalidRequest);
  auto bad_id = r.ask(R"({"jsonrpc":"2.0","id":{"a":1},"method":"ping"})");
  EXPECT_EQ(bad_id["error"]["code"], rpc::kInvalidRequest);
  EXPECT_TRUE(r.calls.empty());
}

TEST(McpProtocol, NotificationsResponsesAndBlankLinesGetNoAnswer) {
  Recorder r;
  EXPECT_EQ(r.server.handleLine(
                R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}})"),
            std::nullopt);
  EXPECT_EQ(r.server.handleLine(R"({"jsonrpc":"2.0","method":"no/such/notification"})"),
            std::nullopt);
  EXPECT_EQ(r.server.handleLine(R"({"jsonrpc":"2.0","id":1,"result":{}})"), std::nullopt);
  EXPECT_EQ(r.server.handleLine("   \r"), std::nullopt);
}

TEST(McpProtocol, BatchesAnswerEachRequest) {
  Recorder r;
  auto a = r.ask(
      R"([{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2,"method":"nope"}])");
  ASSERT_TRUE(a.is_array());
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0]["id"], 1);
  EXPECT_EQ(a[1]["error"]["code"], rpc::kMethodNotFound);
  EXPECT_EQ(r.ask("[]")["error"]["code"], rpc::kInvalidRequest);
}

TEST(McpProtocol, HostileLinesNeverCrash) {
  Recorder r;
  std::mt19937 rng(42);
  const std::vector<std::string> seeds = {
      R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"x"}}})",
      R"({"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-06-18","clientInfo":{"name":"a"}}})",
      R"([{"jsonrpc":"2.0","id":3,"method":"ping"}])"};
  const std::string alphabet = "{}[]\":,0123456789abcdefnulltrue\\ \xff\x00";
  for (int i = 0; i < 3000; ++i) {
    std::string line = seeds[i % seeds.size()];
    int edits = 1 + static_cast<int>(rng() % 6);
    for (int e = 0; e < edits && !line.empty(); ++e) {
      size_t at = rng() % line.size();
      switch (rng() % 3) {
        case 0:
          line[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          line.erase(at, 1 + rng() % 8);
          break;
        default:
          line.insert(at, 1, alphabet[rng() % alphabet.size()]);
      }
    }
    auto answer = r.server.handleLine(line);
    if (answer) {
      auto parsed = Json::parse(*answer, nullptr, false);
      ASSERT_FALSE(parsed.is_discarded()) << "answer to " << line << " is not JSON: " << *answer;
    }
  }
  // Wrongly typed fields inside otherwise valid messages.
  for (
      const char* line :
      {R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":5,"clientInfo":7}})",
       R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","clientInfo":{"name":5}}})",
       R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}})",
       R"({"jsonrpc":"2.0","id":1,"method":5})"}) {
    auto a = r.ask(line);
    EXPECT_TRUE(a.contains("error") || a.contains("result")) << line;
  }
}

// The stdio transport: lines split across writes, a message without its final newline, and an
// oversized line that is skipped with an error while the next one is still served.
TEST(McpStdio, ServesLinesUntilEndOfInput) {
  int in[2], out[2];
  ASSERT_EQ(pipe2(in, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
  Recorder r;
  Result<std::string> ended;
  std::thread server([&] {
    ended = serveStdio(r.server, in[0], out[1]);
    close(out[1]);
  });
  std::thread writer([&] {
    auto put = [&](const std::string& s) {
      ASSERT_EQ(write(in[1], s.data(), s.size()), static_cast<ssize_t>(s.size()));
    };
    put(R"({"jsonrpc":"2.0","id":1,"meth)");
    put("od\":\"ping\"}\n\n");
    std::string big(kMaxMessageBytes + 10, 'x');
    for (size_t at = 0; at < big.size(); at += 1 << 20) put(big.substr(at, 1 << 20));
    put("\n");
    put(R"({"jsonrpc":"2.0","id":2,"method":"ping"})");  // no newline before end of input
    close(in[1]);
  });
  std::string answers;
  char buf[4096];
  for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;)
    answers.append(buf, static_cast<size_t>(n));
  writer.join();
  server.join();
  close(in[0]);
  close(out[0]);
  ASSERT_TRUE(ended) << ended.error().message();
  EXPECT_EQ(*ended, "end of input");
  std::vector<Json> lines;
  for (size_t start = 0, nl; (nl = answers.find('\n', start)) != std::string::npos; start = nl + 1)
    lines.push_back(Json::parse(answers.substr(start, nl - start)));
  ASSERT_EQ(lines.size(), 3u) << answers;
  EXPECT_EQ(lines[0]["id"], 1);
  EXPECT_EQ(lines[1]["error"]["code"], rpc::kInvalidRequest);
  EXPECT_NE(lines[1]["error"]["message"].get<std::string>().find("longer than"), std::string::npos);
  EXPECT_EQ(lines[2]["id"], 2);
}

}  // namespace
}  // namespace airlock::mcp
