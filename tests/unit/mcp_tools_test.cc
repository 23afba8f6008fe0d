// The MCP tools against a fake supervisor: the default sandbox is created on first use and ended
// with the session, results map to MCP content (text, PNG images, binary resources), and every
// failure is an isError result naming what went wrong.
#include <gtest/gtest.h>

#include "client_fake_server.h"
#include "supervisor/encoding/base64.h"
#include "supervisor/mcp/sandbox_tools.h"

namespace airlock::mcp {
namespace {

using testing::FakeServer;
using testing::RecordedRequest;
using testing::Responder;

constexpr const char* kId = "00000000000000d1";
const std::string kBase = std::string("/v1/sandboxes/") + kId;

Json sandboxDoc(const std::string& id, const std::string& name = "") {
  return {{"id", id},
          {"name", name},
          {"profile", "default"},
          {"language", "python"},
          {"state", "running"}};
}

std::string textOf(const Json& result) {
  std::string all;
  for (const auto& c : result["content"])
    if (c["type"] == "text") all += c["text"].get<std::string>();
  return all;
}

struct Fake {
  FakeServer server;
  std::atomic<int> creates = 0, deletes = 0;
  Fake() {
    server.on("POST", "/v1/sandboxes", [this](const RecordedRequest& req, Responder& r) {
      ++creates;
      auto body = req.json();
      if (body.value("name", "") == "taken")
        return r.error(409, "conflict", "name 'taken' is already used");
      r.json(201, sandboxDoc(creates == 1 ? kId : "00000000000000e2", body.value("name", "")));
    });
    server.json("GET", kBase, 200, sandboxDoc(kId));
    server.on("DELETE", kBase, [this](const RecordedRequest&, Responder& r) {
      ++deletes;
      r.send(204, "");
    });
    server.on("GET", "/v1/sandboxes/nope", [](const RecordedRequest&, Responder& r) {
      r.error(404, "not_found", "sandbox 'nope' not found");
    });
  }
  SessionOptions options() const { return {{server.url(), ""}, "", "python"}; }
};

TEST(McpTools, RunCodeUsesALazyDefaultSandboxAndReturnsImages) {
  Fake fake;
  fake.server.on("POST", kBase + "/code", [](const RecordedRequest&, Responder& r) {
    r.beginChunked(200);
    r.chunk(R"({"type":"stdout","data":"hi\n"})"
            "\n");
    r.chunk(R"({"type":"display","data":{"image/png":"iVBORw0KGgo=","text/plain":"<Figure>"}})"
            "\n");
    r.chunk(R"({"type":"result","data":{"text/plain":"42"}})"
            "\n");
    r.chunk(R"({"type":"end","status":"ok","context_id":"python"})"
            "\n");
    r.endChunked();
  });
  {
    SandboxTools tools(fake.options());
    EXPECT_EQ(fake.creates, 0) << "no sandbox before the first tool call";
    auto result = tools.call("run_code", {{"code", "print('hi')"}, {"timeout_s", 5}});
    EXPECT_EQ(result["isError"], false);
    std::string text = textOf(result);
    EXPECT_NE(text.find("stdout:\nhi\n"), std::string::npos) << text;
    EXPECT_NE(text.find("result:\n42"), std::string::npos) << text;
    ASSERT_EQ(result["content"].size(), 2u);
    EXPECT_EQ(result["content"][1],
              (Json{{"type", "image"}, {"data", "iVBORw0KGgo="}, {"mimeType", "image/png"}}));
    auto code_req = fake.server.last();
    EXPECT_EQ(code_req.json()["timeout_s"], 5.0);
    tools.call("run_code", {{"code", "1"}});
    EXPECT_EQ(fake.creates, 1) << "later calls reuse the default sandbox";
    auto created = fake.server.requests().front().json();
    EXPECT_EQ(created["language"], "python");
    EXPECT_EQ(created["metadata"]["created_by"], "airlock-mcp");
  }
  EXPECT_EQ(fake.deletes, 1) << "the default sandbox ends with the session";
}

TEST(McpTools, CodeErrorsAndReviewDenialsAreErrorResults) {
  Fake fake;
  std::atomic<int> calls = 0;
  fake.server.on("POST", kBase + "/code", [&](const RecordedRequest&, Responder& r) {
    if (calls++ == 0) {
      r.beginChunked(200);
      r.chunk(
          R"({"type":"error","name":"ZeroDivisionError","value":"division by zero","traceback":["Traceback (most recent call last):","ZeroDivisionError: division by zero"]})"
          "\n");
      r.chunk(R"({"type":"end","status":"error"})"
              "\n");
      return r.endChunked();
    }
    r.json(403, {{"error",
                  {{"code", "denied_by_review"},
                   {"message", "denied"},
                   {"review",
                    {{"verdict", "deny"},
                     {"reviewer", "patterns"},
                     {"rule", "py-subprocess"},
                     {"reason", "spawning processes is not allowed"}}}}}});
  });
  SandboxTools tools(fake.options());
  auto raised = tools.call("run_code", {{"code", "1/0"}});
  EXPECT_EQ(raised["isError"], true);
  EXPECT_NE(textOf(raised).find("error:\nZeroDivisionError: division by zero\nTraceback"),
            std::string::npos)
      << textOf(raised);
  auto denied = tools.call("run_code", {{"code", "import subprocess"}});
  EXPECT_EQ(denied["isError"], true);
  EXPECT_EQ(textOf(denied),
            "Denied by airlock's review (reviewer 'patterns', rule 'py-subprocess'): spawning "
            "processes is not allowed. Nothing was run. Change the code so it does not need what "
            "the rule forbids.\n");
}

TEST(McpTools, BadArgumentsAndUnknownSandboxes) {
  Fake fake;
  SandboxTools tools(fake.options());
  auto bad = tools.call("run_code", {{"code", 5}});
  EXPECT_EQ(bad["isError"], true);
  EXPECT_EQ(textOf(bad), "invalid arguments for run_code: argument 'code' must be a string");
  auto nope = tools.call("run_command", {{"command", "ls"}, {"sandbox_id", "nope"}});
  EXPECT_EQ(nope["isError"], true);
  EXPECT_EQ(textOf(nope), "sandbox 'nope' not found (HTTP 404 not_found)");
  auto end_nope = tools.call("end_sandbox", {{"sandbox_id", "nope"}});
  EXPECT_EQ(end_nope["isError"], true);
  auto b64 = tools.call("write_file",
                        {{"path", "/home/user/x"}, {"content", "!!"}, {"encoding", "base64"}});
  EXPECT_EQ(b64["isError"], true);
  EXPECT_EQ(fake.creates, 0)
      << "nothing was created for calls that failed validation or named a sandbox";
}

TEST(McpTools, CommandsAndFiles) {
  Fake fake;
  fake.server.on("POST", kBase + "/commands", [](const RecordedRequest&, Responder& r) {
    r.beginChunked(200);
    r.chunk(R"({"type":"start","command_id":"c1","pid":3})"
            "\n");
    r.chunk(R"({"type":"stderr","data":"oops\n"})"
            "\n");
    r.chunk(R"({"type":"exit","exit_code":2,"signal":0,"timed_out":false})"
            "\n");
    r.endChunked();
  });
  std::string stored;
  fake.server.on("PUT", kBase + "/files", [&](const RecordedRequest& req, Responder& r) {
    stored = req.body;
    r.json(201, {{"path", "/home/user/p.png"}, {"size", req.body.size()}});
  });
  fake.server.on("GET", kBase + "/files", [&](const RecordedRequest&, Responder& r) {
    r.send(200, stored, "application/octet-stream");
  });
  fake.server.on("GET", kBase + "/files/stat", [&](const RecordedRequest&, Responder& r) {
    r.json(200, {{"path", "/home/user/p.png"},
                 {"name", "p.png"},
                 {"type", "file"},
                 {"size", stored.size()}});
  });
  fake.server.json("GET", kBase + "/files/list", 200,
                   {{"path", "/home/user"},
                    {"entries",
                     {{{"name", "z.txt"}, {"type", "file"}, {"size", 3}},
                      {{"name", "data"}, {"type", "dir"}, {"size", 0}}}}});
  SandboxTools tools(fake.options());
  auto cmd = tools.call("run_command", {{"command", "false"}});
  EXPECT_EQ(cmd["isError"], true);
  EXPECT_EQ(textOf(cmd), "exit code: 2\n\nstderr:\noops\n");

  const std::string png("\x89PNG\r\n\x1a\n\x00\x01", 10);
  auto wrote = tools.call("write_file", {{"path", "/home/user/p.png"},
                                         {"content", encoding::base64Encode(png)},
                                         {"encoding", "base64"}});
  EXPECT_EQ(wrote["isError"], false) << textOf(wrote);
  EXPECT_EQ(stored, png);
  auto read = tools.call("read_file", {{"path", "/home/user/p.png"}});
  EXPECT_EQ(read["isError"], false);
  ASSERT_EQ(read["content"][0]["type"], "resource");
  EXPECT_EQ(read["content"][0]["resource"]["mimeType"], "image/png");
  EXPECT_EQ(read["content"][0]["resource"]["blob"], encoding::base64Encode(png));
  EXPECT_EQ(read["content"][0]["resource"]["uri"],
            std::string("airlock://") + kId + "/home/user/p.png");

  tools.call("write_file", {{"path", "/home/user/p.png"}, {"content", "plain text\n"}});
  auto text = tools.call("read_file", {{"path", "/home/user/p.png"}});
  EXPECT_EQ(text["content"][0], (Json{{"type", "text"}, {"text", "plain text\n"}}));

  auto listed = tools.call("list_files", Json::object());
  EXPECT_EQ(textOf(listed), "/home/user (2 entries)\ndir\t-\tdata/\nfile\t3\tz.txt\n");
}

TEST(McpTools, TransfersInAndOutAnswerTheRecord) {
  Fake fake;
  fake.server.on("POST", kBase + "/transfers", [](const RecordedRequest& req, Responder& r) {
    auto body = req.json();
    Json record = {{"type", "transfer"},
                   {"id", "tr-1"},
                   {"direction", body["direction"]},
                   {"plugin", "http"},
                   {"location", "https://data.example.com/iris.tar.gz?..."},
                   {"sandbox_path", body["path"]},
                   {"files", 3},
                   {"dirs", 1},
                   {"links", 0},
                   {"bytes", 4096},
                   {"archive_bytes", 812},
                   {"sha256", std::string(64, 'a')},
                   {"ms", 41.5},
                   {"status", "ok"},
                   {"error", nullptr}};
    if (body.value("dest", "") == "https://evil.example/up") {
      record["status"] = "denied";
      record["error"] = "URL 'https://evil.example/up' matches no transfer.http.allow pattern";
      record["sha256"] = nullptr;
    }
    r.beginChunked(200);
    r.chunk(R"({"type":"progress","transfer_id":"tr-1","bytes":812,"rate_bps":100})"
            "\n");
    r.chunk(record.dump() + "\n");
    r.endChunked();
  });
  SandboxTools tools(fake.options());
  auto in = tools.call("transfer_in", {{"source", "https://data.example.com/iris.tar.gz?sig=x"},
                                       {"path", "/home/user/data"}});
  EXPECT_EQ(in["isError"], false) << textOf(in);
  EXPECT_EQ(fake.server.last().json(),
            (Json{{"direction", "in"},
                  {"source", "https://data.example.com/iris.tar.gz?sig=x"},
                  {"path", "/home/user/data"}}));
  EXPECT_EQ(textOf(in),
            "transfer tr-1 ok: unpacked 3 files, 1 directories, 0 links (4096 bytes) from "
            "https://data.example.com/iris.tar.gz?... into /home/user/data in sandbox " +
                std::string(kId) + "\narchive: 812 bytes, sha256 " + std::string(64, 'a') + "\n");
  EXPECT_EQ(in["structuredContent"]["files"], 3);
  EXPECT_EQ(in["structuredContent"]["sandbox_path"], "/home/user/data");
  EXPECT_EQ(in["structuredContent"]["status"], "ok");
  EXPECT_EQ(fake.creates, 1) << "ran in the default sandbox";

  auto out = tools.call(
      "transfer_out",
      {{"dest", "hostdir:results/r.tar.gz"}, {"path", "/home/user/results"}, {"sandbox_id", kId}});
  EXPECT_EQ(out["isError"], false) << textOf(out);
  EXPECT_EQ(fake.server.last().json()["dest"], "hostdir:results/r.tar.gz");
  EXPECT_NE(textOf(out).find("packed 3 files"), std::string::npos) << textOf(out);
  EXPECT_EQ(out["structuredContent"]["direction"], "out");

  auto denied =
      tools.call("transfer_out", {{"dest", "https://evil.example/up"}, {"path", "/home/user/r"}});
  EXPECT_EQ(denied["isError"], true);
  EXPECT_EQ(textOf(denied),
            "transfer out 'https://evil.example/up' from /home/user/r: denied: URL "
            "'https://evil.example/up' matches no transfer.http.allow pattern");

  auto missing = tools.call("transfer_in", {{"source", "hostdir:data/x"}});
  EXPECT_EQ(missing["isError"], true);
  EXPECT_EQ(textOf(missing), "invalid arguments for transfer_in: missing required argument 'path'");
}

TEST(McpTools, CreatedSandboxesAreAddressableAndEndWithTheSession) {
  Fake fake;
  fake.server.json("GET", "/v1/sandboxes/00000000000000e2", 200,
                   sandboxDoc("00000000000000e2", "etl"));
  std::atomic<int> e2_deletes = 0;
  fake.server.on("DELETE", "/v1/sandboxes/00000000000000e2",
                 [&](const RecordedRequest&, Responder& r) {
                   ++e2_deletes;
                   r.send(204, "");
                 });
  fake.server.json("GET", "/v1/sandboxes/00000000000000e2/files/list", 200,
                   {{"entries", Json::array()}});
  {
    SandboxTools tools(fake.options());
    tools.call("list_files", Json::object());  // the default sandbox: kId
    auto made = tools.call("create_sandbox", {{"name", "etl"},
                                              {"language", "python"},
                                              {"isolation", "gvisor"},
                                              {"mounts", {"hostdir:datasets/iris"}}});
    EXPECT_EQ(made["isError"], false);
    const Json sent = Json::parse(fake.server.last().body);
    EXPECT_EQ(sent["isolation"], "gvisor");
    ASSERT_EQ(sent["mounts"].size(), 1u) << sent.dump();
    EXPECT_EQ(sent["mounts"][0]["source"], "hostdir:datasets/iris");
    EXPECT_EQ(made["structuredContent"]["sandbox_id"], "00000000000000e2");
    EXPECT_EQ(textOf(made).rfind("sandbox_id: 00000000000000e2\n", 0), 0u) << textOf(made);
    auto by_name = tools.call("list_files", {{"sandbox_id", "etl"}});
    EXPECT_EQ(by_name["isError"], false) << textOf(by_name);
    EXPECT_EQ(fake.server.last().path, "/v1/sandboxes/00000000000000e2/files/list");
    auto taken = tools.call("create_sandbox", {{"name", "taken"}});
    EXPECT_EQ(taken["isError"], true);
    EXPECT_NE(textOf(taken).find("name 'taken' is already used (HTTP 409 conflict)"),
              std::string::npos);
    auto ended = tools.call("end_sandbox", {{"sandbox_id", "etl"}});
    EXPECT_EQ(textOf(ended), "ended sandbox 00000000000000e2");
    EXPECT_EQ(e2_deletes, 1);
  }
  EXPECT_EQ(e2_deletes, 1) << "an ended sandbox is not ended twice";
  EXPECT_EQ(fake.deletes, 1);
}

}  // namespace
}  // namespace airlock::mcp
