// The HTTP server end to end over a temp Unix socket (and loopback TCP), against FakeService.
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <thread>
#include <tuple>

#include "airlock/policy/keys.h"
#include "supervisor/api/server.h"
#include "supervisor/encoding/base64.h"
#include "tests/support/test_support.h"
#include "tests/unit/api_fake_service.h"
#include "tests/unit/api_test_client.h"

namespace airlock::testing {
namespace {

using api::Server;
using api::ServerOptions;
using namespace std::chrono_literals;

class ApiServerTest : public ::testing::Test {
 protected:
  void SetUp() override { options_.socket_path = dir_.file("api.sock"); }

  Server& start() {
    auto s = Server::start(fake_, options_);
    EXPECT_TRUE(s) << (s ? "" : s.error().message());
    if (!s) std::abort();
    server_ = std::move(*s);
    return *server_;
  }

  HttpClient connect() {
    auto c = HttpClient::unix(options_.socket_path);
    EXPECT_TRUE(c) << "connect " << options_.socket_path;
    if (!c) std::abort();
    return std::move(*c);
  }

  // A sandbox named `name`; returns its id.
  std::string createSandbox(HttpClient& c, const std::string& name) {
    auto r = c.request("POST", "/v1/sandboxes",
                       R"({"name":")" + name + R"(","metadata":{"user":"u1"}})");
    EXPECT_EQ(r.status, 201) << r.body;
    return r.json().value("id", "");
  }

  static std::vector<nlohmann::json> ndjson(const std::string& body) {
    std::vector<nlohmann::json> out;
    size_t pos = 0;
    while (pos < body.size()) {
      size_t nl = body.find('\n', pos);
      if (nl == std::string::npos) nl = body.size();
      out.push_back(nlohmann::json::parse(body.substr(pos, nl - pos)));
      pos = nl + 1;
    }
    return out;
  }

  // Polls `done` for up to 5 s.
  template <typename F>
  static void waitFor(F done) {
    auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(5ms);
    }
    EXPECT_TRUE(done()) << "timed out waiting";
  }

  static std::string errorCode(const HttpResponse& r) {
    auto j = r.json();
    if (!j.is_object() || !j.contains("error")) return "<no error body: " + r.body + ">";
    return j["error"]["code"].get<std::string>();
  }
  static std::string errorMessage(const HttpResponse& r) {
    auto j = r.json();
    if (!j.is_object() || !j.contains("error")) return "";
    return j["error"]["message"].get<std::string>();
  }

  TempDir dir_;
  FakeService fake_;
  ServerOptions options_;
  std::unique_ptr<Server> server_;
};

TEST_F(ApiServerTest, HealthMetricsAndOpenApi) {
  start();
  auto c = connect();
  auto r = c.request("GET", "/healthz");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), "application/json");
  EXPECT_EQ(r.json()["status"], "ok");
  EXPECT_EQ(r.json()["draining"], false);

  r = c.request("GET", "/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("airlock_sandboxes{state=\"running\"} 1"), std::string::npos);
  EXPECT_NE(r.body.find("airlock_http_requests_total{route=\"/healthz\",code=\"200\"} 1"),
            std::string::npos)
      << r.body;
  EXPECT_NE(r.body.find("airlock_http_connections 1"), std::string::npos);
  EXPECT_NE(r.body.find("airlock_http_request_seconds_count{route=\"/healthz\"} 1"),
            std::string::npos);

  r = c.request("GET", "/v1/openapi.json");
  ASSERT_EQ(r.status, 200);
  EXPECT_TRUE(r.json()["paths"].contains("/v1/sandboxes/{sb}/files"));
}

TEST_F(ApiServerTest, SandboxLifecycle) {
  start();
  auto c = connect();
  auto r = c.request("POST", "/v1/sandboxes",
                     R"({"name":"web-1","language":"python","env":{"A":"b"},
                         "metadata":{"user":"u1"},"keep_alive_s":30,"persistent":true})");
  ASSERT_EQ(r.status, 201) << r.body;
  auto sb = r.json();
  EXPECT_EQ(sb["name"], "web-1");
  EXPECT_EQ(sb["tenant"], "default");
  EXPECT_EQ(sb["keep_alive_s"], 30);
  EXPECT_EQ(sb["state"], "running");
  EXPECT_EQ(sb["id"].get<std::string>().size(), 16u);
  EXPECT_EQ(fake_.last_spec.env.at("A"), "b");
  createSandbox(c, "other");

  r = c.request("GET", "/v1/sandboxes?metadata.user=u1");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.json()["sandboxes"].size(), 2u);
  r = c.request("GET", "/v1/sandboxes?metadata.user=nobody");
  EXPECT_EQ(r.json()["sandboxes"].size(), 0u);
  r = c.request("GET", "/v1/sandboxes?color=red");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(errorMessage(r), "unknown query parameter 'color'");

  r = c.request("GET", "/v1/sandboxes/web-1");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.json()["id"], sb["id"]);
  r = c.request("POST", "/v1/sandboxes/web-1/keepalive", R"({"keep_alive_s":600})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["keep_alive_s"], 600);
  r = c.request("POST", "/v1/sandboxes/web-1/keepalive", "");
  EXPECT_EQ(r.status, 200) << r.body;

  r = c.request("POST", "/v1/sandboxes", R"({"name":"web-1"})");
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(errorCode(r), "conflict");

  r = c.request("DELETE", "/v1/sandboxes/" + sb["id"].get<std::string>());
  EXPECT_EQ(r.status, 204);
  EXPECT_TRUE(r.body.empty());
  r = c.request("GET", "/v1/sandboxes/web-1");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(errorCode(r), "not_found");
  EXPECT_EQ(errorMessage(r), "sandbox 'web-1' not found");
}

TEST_F(ApiServerTest, CommandStreamsNdjson) {
  start();
  auto c = connect();
  createSandbox(c, "s");
  auto r = c.request("POST", "/v1/sandboxes/s/commands", R"({"argv":["ls","-la"]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("content-type"), "application/x-ndjson");
  EXPECT_EQ(r.header("transfer-encoding"), "chunked");
  auto events = ndjson(r.body);
  ASSERT_EQ(events.size(), 4u) << r.body;
  EXPECT_EQ(events[0]["type"], "start");
  EXPECT_EQ(events[1]["data"], "total 0\n");
  EXPECT_EQ(events[2]["data_base64"], "/w==");
  EXPECT_EQ(events[3]["type"], "exit");
  EXPECT_EQ(fake_.last_command.argv, (std::vector<std::string>{"ls", "-la"}));
  EXPECT_EQ(fake_.streams.destroyed_early.load(), 0);

  // The connection stays usable after a chunked answer.
  EXPECT_EQ(c.request("GET", "/healthz").status, 200);
}

// With Accept naming frames, the same events come as frames: output as its own bytes (the
// base64 of NDJSON undone), every other event as its JSON.
TEST_F(ApiServerTest, CommandStreamsFramesWhenAsked) {
  start();
  auto c = connect();
  createSandbox(c, "s");
  auto r = c.request("POST", "/v1/sandboxes/s/commands", R"({"argv":["ls","-la"]})",
                     "Accept: application/vnd.airlock.frames, application/x-ndjson\r\n");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("content-type"), "application/vnd.airlock.frames");
  std::vector<std::pair<char, std::string>> frames;
  for (size_t at = 0; at < r.body.size();) {
    ASSERT_GE(r.body.size() - at, 5u) << "a frame header cut short";
    const auto* h = reinterpret_cast<const unsigned char*>(r.body.data() + at);
    const size_t n = (size_t{h[1]} << 24) | (size_t{h[2]} << 16) | (size_t{h[3]} << 8) | h[4];
    ASSERT_GE(r.body.size() - at - 5, n) << "a frame cut short";
    frames.emplace_back(r.body[at], r.body.substr(at + 5, n));
    at += 5 + n;
  }
  ASSERT_EQ(frames.size(), 4u);
  EXPECT_EQ(frames[0].first, 'j');
  EXPECT_EQ(nlohmann::json::parse(frames[0].second)["type"], "start");
  EXPECT_EQ(frames[1], std::make_pair('o', std::string("total 0\n")));
  EXPECT_EQ(frames[2], std::make_pair('e', std::string("\xff")));
  EXPECT_EQ(frames[3].first, 'j');
  EXPECT_EQ(nlohmann::json::parse(frames[3].second)["type"], "exit");
  // Any other Accept gets NDJSON.
  auto plain = c.request("POST", "/v1/sandboxes/s/commands", R"({"argv":["ls"]})",
                         "Accept: application/json\r\n");
  EXPECT_EQ(plain.header("content-type"), "application/x-ndjson");
}

TEST_F(ApiServerTest, CommandWithoutStreamIsOneDocument) {
  start();
  auto c = connect();
  createSandbox(c, "s");
  auto r = c.request("POST", "/v1/sandboxes/s/commands",
                     R"({"cmd":"ls","stdin_base64":"aGk=","timeout_s":2.5,"stream":false})");
  ASSERT_EQ(r.status, 200) << r.body;
  auto doc = r.json();
  EXPECT_EQ(doc["command_id"], "c1");
  EXPECT_EQ(doc["exit_code"], 0);
  EXPECT_EQ(doc["stdout"], "total 0\n");
  EXPECT_EQ(doc["stderr_base64"], "/w==");
  EXPECT_EQ(doc["duration_ms"], 3.1);
  EXPECT_EQ(fake_.last_command.cmd, "ls");
  EXPECT_EQ(fake_.last_command.stdin_data, "hi");
  EXPECT_EQ(*fake_.last_command.timeout_s, 2.5);
}

TEST_F(ApiServerTest, BackgroundCommandAndCommandRoutes) {
  start();
  auto c = connect();
  createSandbox(c, "s");
  auto r = c.request("POST", "/v1/sandboxes/s/commands",
                     R"({"argv":["sleep","100"],"background":true})");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(r.json(), (nlohmann::json{{"command_id", "c1"}, {"pid", 7}}));

  r = c.request("GET", "/v1/sandboxes/s/commands");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.json()["commands"][0]["state"], "running");
  EXPECT_TRUE(r.json()["commands"][0]["exit_code"].is_null());

  r = c.request("GET", "/v1/sandboxes/s/commands/c1/events");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(ndjson(r.body).size(), 2u);
  r = c.request("GET", "/v1/sandboxes/s/commands/c9/events");
  EXPECT_EQ(r.status, 404);

  r = c.request(
      "POST", "/v1/sandboxes/s/commands/c1/stdin",
      R"({"data_base64":")" + encoding::base64Encode(std::string("\0\1", 2)) + R"(","eof":true})");
  EXPECT_EQ(r.status, 204) << r.body;
  EXPECT_EQ(fake_.last_stdin, std::string("\0\1", 2));
  EXPECT_TRUE(fake_.last_stdin_eof);

  r = c.request("POST", "/v1/sandboxes/s/commands/c1/signal", R"({"signal":"SIGINT"})");
  EXPECT_EQ(r.status, 204);
  EXPECT_EQ(fake_.last_signal, 2);
  r = c.request("DELETE", "/v1/sandboxes/s/commands/c1");
  EXPECT_EQ(r.status, 204);
  EXPECT_EQ(fake_.last_signal, 9);
}

TEST_F(ApiServerTest, CodeRunsAndContexts) {
  start();
  auto c = connect();
  createSandbox(c, "s");
  auto r = c.request("POST", "/v1/sandboxes/s/code", R"({"code":"1+2","language":"python"})");
  ASSERT_EQ(r.status, 200) << r.body;
  auto events = ndjson(r.body);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[3]["type"], "end");
  EXPECT_EQ(fake_.last_code.code, "1+2");

  r = c.request("POST", "/v1/sandboxes/s/code", R"({"code":"1+2","stream":false})");
  ASSERT_EQ(r.status, 200) << r.body;
  auto doc = r.json();
  EXPECT_EQ(doc["status"], "ok");
  EXPECT_EQ(doc["stdout"], "hello\n");
  ASSERT_EQ(doc["results"].size(), 2u);
  EXPECT_EQ(doc["results"][0]["text/plain"], "3");
  EXPECT_TRUE(doc["error"].is_null());
  EXPECT_EQ(doc["context_id"], "python");

  r = c.request("POST", "/v1/sandboxes/s/contexts", R"({"language":"node"})");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(r.json()["language"], "node");
  std::string ctx = r.json()["context_id"];
  r = c.request("GET", "/v1/sandboxes/s/contexts");
  EXPECT_EQ(r.json()["contexts"].size(), 1u);
  r = c.request("POST", "/v1/sandboxes/s/contexts/" + ctx + "/restart", "");
  EXPECT_EQ(r.status, 200) << r.body;
  r = c.request("DELETE", "/v1/sandboxes/s/contexts/" + ctx);
  EXPECT_EQ(r.status, 204);
  r = c.request("DELETE", "/v1/sandboxes/s/contexts/" + ctx);
  EXPECT_EQ(r.status, 404);
}

TEST_F(ApiServerTest, FileRoutes) {
  start();
  auto c = connect();
  createSandbox(c, "s");
  std::string bytes("a\0b\xff", 4);
  auto r = c.request("PUT", "/v1/sandboxes/s/files?path=/home/user/a.bin&mode=0600", bytes);
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(r.json(), (nlohmann::json{{"path", "/home/user/a.bin"}, {"size", 4}}));
  EXPECT_EQ(fake_.last_mode, 0600u);

  r = c.request("GET", "/v1/sandboxes/s/files?path=%2Fhome%2Fuser%2Fa.bin");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), "application/octet-stream");
  EXPECT_EQ(r.body, bytes);

  r = c.request("POST", "/v1/sandboxes/s/files/write",
                R"({"path":"/home/user/t.txt","content":"héllo","mode":"0644"})");
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(r.json()["size"], 6);
  r = c.request("POST", "/v1/sandboxes/s/files/read", R"({"path":"/home/user/t.txt"})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["content"], "héllo");
  r = c.request("POST", "/v1/sandboxes/s/files/read",
                R"({"path":"/home/user/a.bin","encoding":"utf-8"})");
  EXPECT_EQ(r.json()["content_base64"], encoding::base64Encode(bytes));  // not UTF-8
  r = c.request("POST", "/v1/sandboxes/s/files/read",
                R"({"path":"/home/user/t.txt","encoding":"base64"})");
  EXPECT_EQ(r.json()["content_base64"], encoding::base64Encode("héllo"));

  r = c.request("GET", "/v1/sandboxes/s/files/list?path=/home/user");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.json()["entries"].size(), 2u);
  EXPECT_EQ(r.json()["entries"][0]["name"], "a.bin");
  r = c.request("GET", "/v1/sandboxes/s/files/stat?path=/home/user/t.txt");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.json()["path"], "/home/user/t.txt");
  EXPECT_EQ(r.json()["name"], "t.txt");
  EXPECT_EQ(r.json()["size"], 6);

  r = c.request("POST", "/v1/sandboxes/s/files/mkdir", R"({"path":"/home/user/d","parents":true})");
  EXPECT_EQ(r.status, 201);
  EXPECT_TRUE(fake_.hasDirectory("/home/user/d"));
  r = c.request("POST", "/v1/sandboxes/s/files/rename",
                R"({"from":"/home/user/t.txt","to":"/home/user/u.txt"})");
  EXPECT_EQ(r.status, 204);
  r = c.request("POST", "/v1/sandboxes/s/files/remove", R"({"path":"/home/user/u.txt"})");
  EXPECT_EQ(r.status, 204);
  r = c.request("GET", "/v1/sandboxes/s/files?path=/home/user/u.txt");
  EXPECT_EQ(r.status, 404);

  r = c.request("GET", "/v1/sandboxes/s/files");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(errorMessage(r), "query parameter 'path' is required");
  r = c.request("GET", "/v1/sandboxes/s/files?path=rel");
  EXPECT_EQ(r.status, 400);
  r = c.request("PUT", "/v1/sandboxes/s/files?path=/a&mode=999", "x");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(errorMessage(r), "query parameter 'mode': expected octal permission bits, got '999'");
}

TEST_F(ApiServerTest, BigDownloadStreams) {
  fake_.big_file_size = 5 * 1024 * 1024 + 17;
  start();
  auto c = connect();
  createSandbox(c, "s");
  auto r = c.request("GET", "/v1/sandboxes/s/files?path=/big");
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.header("transfer-encoding"), "chunked");
  EXPECT_EQ(r.body.size(), fake_.big_file_size);
}

TEST_F(ApiServerTest, ErrorClasses) {
  options_.max_json_body = 1024;
  options_.max_upload_bytes = 1 << 20;
  start();
  auto c = connect();
  createSandbox(c, "s");

  auto r = c.request("POST", "/v1/sandboxes/s/commands", R"({"argv": ["ls",]})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(errorCode(r), "bad_request");
  EXPECT_NE(errorMessage(r).find("line 1, column 16"), std::string::npos) << errorMessage(r);

  r = c.request("POST", "/v1/sandboxes/s/commands", R"({"argv":["ls"],"cwdd":"/"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(errorMessage(r), "unknown field 'cwdd' (did you mean 'cwd'?)");
  r = c.request("POST", "/v1/sandboxes/s/commands", R"({"argv":["ls"],"timeout_s":"30"})");
  EXPECT_EQ(errorMessage(r), "field 'timeout_s': expected a number, got string");
  r = c.request("POST", "/v1/sandboxes/s/files/rename", R"({"from":"/a"})");
  EXPECT_EQ(errorMessage(r), "field 'to' is required");

  r = c.request("GET", "/v1/nowhere");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(errorCode(r), "not_found");
  r = c.request("GET", "/v1/sandboxes/nope");
  EXPECT_EQ(r.status, 404);

  r = c.request("PATCH", "/v1/sandboxes/s", "{}");
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(r.header("allow"), "GET, DELETE");
  EXPECT_EQ(errorCode(r), "method_not_allowed");

  // A JSON body over the limit: 413, and a small one is skipped so the connection lives on.
  r = c.request("POST", "/v1/sandboxes/s/code", R"({"code":")" + std::string(2000, 'x') + "\"}");
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(errorCode(r), "payload_too_large");
  EXPECT_EQ(c.request("GET", "/healthz").status, 200);

  // An upload over max_upload_bytes is refused from its Content-Length, before any byte is read.
  auto c2 = connect();
  ASSERT_TRUE(c2.sendRaw("PUT /v1/sandboxes/s/files?path=/a HTTP/1.1\r\nContent-Length: " +
                         std::to_string(2 << 20) + "\r\n\r\n"));
  r = c2.readResponse();
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(r.header("connection"), "close");
  EXPECT_TRUE(c2.closedByServer(2000));

  // The same over chunked encoding is cut off once the limit passes.
  auto c3 = connect();
  std::string chunk(256 * 1024, 'z');
  std::string req =
      "PUT /v1/sandboxes/s/files?path=/a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  ASSERT_TRUE(c3.sendRaw(req));
  for (int i = 0; i < 5; ++i) {
    char head[16];
    std::snprintf(head, sizeof head, "%zx\r\n", chunk.size());
    if (!c3.sendRaw(head + chunk + "\r\n")) break;
  }
  c3.sendRaw("0\r\n\r\n");
  r = c3.readResponse();
  EXPECT_EQ(r.status, 413) << r.body;

  // Not HTTP at all.
  auto c4 = connect();
  ASSERT_TRUE(c4.sendRaw("HELLO\r\n\r\n"));
  r = c4.readResponse();
  EXPECT_EQ(r.status, 400);

  // Each answer is counted just after it is written: allow the last one a moment.
  std::string metrics;
  auto deadline = std::chrono::steady_clock::now() + 2s;
  do {
    metrics = c.request("GET", "/metrics").body;
  } while (metrics.find("airlock_rejections_total{reason=\"payload_too_large\"} 3") ==
               std::string::npos &&
           std::chrono::steady_clock::now() < deadline);
  EXPECT_NE(metrics.find("airlock_rejections_total{reason=\"payload_too_large\"} 3"),
            std::string::npos)
      << metrics;
}

TEST_F(ApiServerTest, ChunkedUploadAndExpectContinue) {
  start();
  auto c = connect();
  createSandbox(c, "s");
  ASSERT_TRUE(
      c.sendRaw("PUT /v1/sandboxes/s/files?path=/c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"));
  auto r = c.readResponse();
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(fake_.files.at("/c"), "abcde");

  ASSERT_TRUE(
      c.sendRaw("PUT /v1/sandboxes/s/files?path=/d HTTP/1.1\r\nContent-Length: 3\r\n"
                "Expect: 100-continue\r\n\r\n"));
  HttpResponse cont;
  ASSERT_TRUE(c.readHead(cont));
  EXPECT_EQ(cont.status, 100);
  ASSERT_TRUE(c.sendRaw("xyz"));
  r = c.readResponse();
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(fake_.files.at("/d"), "xyz");
}

TEST_F(ApiServerTest, TcpNeedsABearerToken) {
  options_.tcp_listen = "127.0.0.1:0";
  options_.token_sha256_to_tenant[policy::sha256Hex("s3cret")] = "team-a";
  auto& server = start();
  ASSERT_NE(server.tcpPort(), 0);

  auto t = HttpClient::tcp(server.tcpPort());
  ASSERT_TRUE(t);
  auto r = t->request("GET", "/healthz");
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.header("www-authenticate"), "Bearer");
  EXPECT_EQ(errorCode(r), "unauthorized");
  r = t->request("GET", "/healthz", "", "Authorization: Bearer wrong\r\n");
  EXPECT_EQ(r.status, 401);
  r = t->request("POST", "/v1/sandboxes", "{}", "Authorization: Bearer s3cret\r\n");
  EXPECT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(r.json()["tenant"], "team-a");

  // Unix socket: "default" without a token, the token's tenant with one, 401 with a bad one.
  auto u = connect();
  r = u.request("GET", "/v1/sandboxes");
  EXPECT_EQ(r.json()["sandboxes"].size(), 0u);  // team-a's sandbox is not default's
  r = u.request("GET", "/v1/sandboxes", "", "Authorization: Bearer s3cret\r\n");
  EXPECT_EQ(r.json()["sandboxes"].size(), 1u);
  r = u.request("GET", "/v1/sandboxes", "", "Authorization: Bearer nope\r\n");
  EXPECT_EQ(r.status, 401);
}

// GET /ui (docs/operations-view.md): the page, its script and its stylesheet load without a
// token, under a CSP that forbids inline script; the data routes still want the token.
TEST_F(ApiServerTest, StatusPageLoadsWithoutATokenUnderAStrictCsp) {
  options_.tcp_listen = "127.0.0.1:0";
  options_.token_sha256_to_tenant[policy::sha256Hex("s3cret")] = "team-a";
  auto& server = start();
  auto t = HttpClient::tcp(server.tcpPort());
  ASSERT_TRUE(t);
  auto r = t->request("GET", "/ui");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("content-type"), "text/html; charset=utf-8");
  const std::string csp = r.header("content-security-policy");
  EXPECT_NE(csp.find("default-src 'self'"), std::string::npos) << csp;
  EXPECT_NE(csp.find("frame-ancestors 'none'"), std::string::npos) << csp;
  EXPECT_EQ(csp.find("unsafe"), std::string::npos) << csp;
  EXPECT_EQ(r.header("x-content-type-options"), "nosniff");
  // Every script is a file of its own: as many <script tags as <script src= ones.
  size_t scripts = 0, with_src = 0;
  for (size_t at = 0; (at = r.body.find("<script", at)) != std::string::npos; ++at) {
    ++scripts;
    with_src += r.body.compare(at, 12, "<script src=") == 0 ? 1 : 0;
  }
  EXPECT_EQ(scripts, 1u);
  EXPECT_EQ(with_src, scripts);
  r = t->request("GET", "/ui/ui.js");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), "text/javascript; charset=utf-8");
  EXPECT_NE(r.body.find("/v1/sandboxes"), std::string::npos);
  r = t->request("GET", "/ui/ui.css");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), "text/css; charset=utf-8");
  r = t->request("GET", "/ui/secrets.txt");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(errorCode(r), "not_found");
  // The page is read-only: /ui answers GET only.
  r = t->request("POST", "/ui", "{}", "Authorization: Bearer s3cret\r\n");
  EXPECT_EQ(r.status, 405);
  // The data is not public.
  r = t->request("GET", "/v1/sandboxes");
  EXPECT_EQ(r.status, 401);
  r = t->request("GET", "/metrics");
  EXPECT_EQ(r.status, 401);
}

// Beyond 127.0.0.1 and ::1 the listener needs TLS, and TLS files that do not load stop the start
// with the setting named (tests/remote covers handshakes against a real supervisor).
TEST_F(ApiServerTest, TcpBeyondLoopbackNeedsTlsThatLoads) {
  options_.token_sha256_to_tenant[policy::sha256Hex("t")] = "a";
  options_.tcp_listen = "127.0.0.2:0";
  auto s = Server::start(fake_, options_);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message().find("configure TLS"), std::string::npos) << s.error().message();
  options_.tls_cert = "/nonexistent/airlock-test.crt";
  options_.tls_key = "/nonexistent/airlock-test.key";
  s = Server::start(fake_, options_);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message().find("server.tls_cert: cannot load the certificate chain"),
            std::string::npos)
      << s.error().message();
  EXPECT_NE(s.error().message().find("/nonexistent/airlock-test.crt"), std::string::npos);
}

TEST_F(ApiServerTest, TcpMustBeLoopbackAndHaveTokens) {
  options_.token_sha256_to_tenant[policy::sha256Hex("t")] = "a";
  for (std::string spec : {"0.0.0.0:0", "10.1.2.3:8720", "[::]:0", "example.com:80"}) {
    options_.tcp_listen = spec;
    auto s = Server::start(fake_, options_);
    ASSERT_FALSE(s) << spec;
    EXPECT_NE(s.error().message().find(spec), std::string::npos) << s.error().message();
  }
  options_.tcp_listen = "127.0.0.1:0";
  options_.token_sha256_to_tenant.clear();
  auto s = Server::start(fake_, options_);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message().find("needs at least one bearer token"), std::string::npos);
  options_.token_sha256_to_tenant["xyz"] = "a";
  s = Server::start(fake_, options_);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message().find("64 hex digits"), std::string::npos);
}

TEST_F(ApiServerTest, SocketFileOwnership) {
  options_.socket_mode = 0600;
  start();
  struct stat st {};
  ASSERT_EQ(stat(options_.socket_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);

  // A live supervisor owns the socket: a second one refuses to take it.
  auto second = Server::start(fake_, options_);
  ASSERT_FALSE(second);
  EXPECT_NE(second.error().message().find("another supervisor is listening"), std::string::npos)
      << second.error().message();

  // Stopping removes the file; a stale socket file (nobody listening) is replaced.
  server_->stop();
  EXPECT_NE(stat(options_.socket_path.c_str(), &st), 0);
  {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, options_.socket_path.c_str(), sizeof addr.sun_path - 1);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    close(fd);  // the file stays, nothing listens
  }
  start();
  auto c = connect();
  EXPECT_EQ(c.request("GET", "/healthz").status, 200);
  server_->stop();

  // A regular file in the way is never removed.
  dir_.write("api.sock", "precious");
  auto s = Server::start(fake_, options_);
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message().find("not a socket"), std::string::npos);
  EXPECT_EQ(dir_.read("api.sock"), "precious");
}

// The issue a new user hit: one client holding every connection slot idle locked everyone
// out, /healthz included. Now a newcomer evicts the oldest connection waiting for a request.
TEST_F(ApiServerTest, IdleConnectionsNeverLockANewClientOut) {
  options_.max_connections = 4;
  auto& server = start();
  std::vector<HttpClient> hoard;
  for (int i = 0; i < 4; ++i) hoard.push_back(connect());
  // All accepted (in order) before hoard[1] is used, so its use is the latest.
  waitFor([&] { return server.connections() == 4; });
  ASSERT_EQ(hoard[1].request("GET", "/healthz").status, 200);  // one idle after an answer
  ASSERT_TRUE(hoard[2].sendRaw("GET /heal"));                  // one with a header arriving

  std::vector<HttpClient> newcomers;
  for (int i = 0; i < 3; ++i) {
    newcomers.push_back(connect());
    EXPECT_EQ(newcomers.back().request("GET", "/healthz").status, 200) << "newcomer " << i;
  }
  // The connections idle the longest gave way: hoard[1] answered a request after hoard[3]
  // connected, so it went after it.
  EXPECT_TRUE(hoard[0].closedByServer(2000));
  EXPECT_TRUE(hoard[2].closedByServer(2000));
  EXPECT_TRUE(hoard[3].closedByServer(2000));
  EXPECT_EQ(hoard[1].request("GET", "/healthz").status, 200);
  auto metrics = connect().request("GET", "/metrics").body;
  // The three newcomers and this last connection each took one's place.
  EXPECT_NE(metrics.find("airlock_http_evictions_total 4"), std::string::npos) << metrics;
}

// Connections that all have requests in progress are never evicted: the newcomer is refused,
// 503 naming the server's limit; a client over its own limit gets 429 naming that one.
TEST_F(ApiServerTest, ConnectionLimitsRefuseOnlyWhenEveryConnectionIsBusy) {
  fake_.command_script = {{0ms, {{"type", "start"}, {"command_id", "c1"}, {"pid", 7}}},
                          {50ms, {{"type", "stdout"}, {"data", "tick\n"}}}};
  fake_.command_endless = true;
  options_.max_connections = 2;
  start();
  {
    auto c = connect();
    createSandbox(c, "s");
  }
  std::vector<HttpClient> busy;
  for (int i = 0; i < 2; ++i) {
    busy.push_back(connect());
    ASSERT_TRUE(busy.back().sendRequest("POST", "/v1/sandboxes/s/commands", R"({"argv":["yes"]})"));
    HttpResponse head;
    ASSERT_TRUE(busy.back().readHead(head));
    ASSERT_EQ(head.status, 200);
  }
  auto refused = connect();
  auto r = refused.readResponse();
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(errorCode(r), "unavailable");
  EXPECT_NE(errorMessage(r).find("server.max_connections"), std::string::npos) << r.body;
  EXPECT_EQ(r.header("retry-after"), "1");
  EXPECT_TRUE(refused.closedByServer(2000));

  busy[0].closeNow();
  waitFor([&] { return fake_.streams.destroyed_early.load() == 1; });
  bool answered = false;
  for (int i = 0; i < 100 && !answered; ++i) {
    auto again = connect();
    answered = again.request("GET", "/healthz").status == 200;
    if (!answered) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(answered) << "a slot freed by a finished request was not given to a newcomer";
}

TEST_F(ApiServerTest, PerClientConnectionLimitEvictsTheClientsOwnOldest) {
  options_.max_connections_per_client = 2;
  start();
  auto a = connect();
  auto b = connect();
  ASSERT_EQ(a.request("GET", "/healthz").status, 200);
  ASSERT_EQ(b.request("GET", "/healthz").status, 200);
  auto c = connect();
  EXPECT_EQ(c.request("GET", "/healthz").status, 200);
  EXPECT_TRUE(a.closedByServer(2000));
  EXPECT_EQ(b.request("GET", "/healthz").status, 200);
}

// Requests being answered are bounded per client (429) and in total (503), each naming its
// limit; /healthz is answered on the io threads and needs no request slot.
TEST_F(ApiServerTest, RequestLimitsNameTheLimitAndHealthzStillAnswers) {
  fake_.command_script = {{0ms, {{"type", "start"}, {"command_id", "c1"}, {"pid", 7}}},
                          {50ms, {{"type", "stdout"}, {"data", "tick\n"}}}};
  fake_.command_endless = true;
  for (auto [per_client, total, status, key] :
       {std::tuple{size_t{1}, size_t{8}, 429, "server.max_requests_per_client"},
        std::tuple{size_t{8}, size_t{1}, 503, "server.max_requests"}}) {
    SCOPED_TRACE(key);
    options_.max_requests_per_client = per_client;
    options_.max_requests = total;
    auto& server = start();
    auto c = connect();
    const std::string sb = std::to_string(status);
    createSandbox(c, sb);
    ASSERT_TRUE(c.sendRequest("POST", "/v1/sandboxes/" + sb + "/commands", R"({"argv":["yes"]})"));
    HttpResponse head;
    ASSERT_TRUE(c.readHead(head));
    // The create's thread sends its answer before it counts itself out: wait for that.
    waitFor([&] { return server.requestThreads() == 1; });
    EXPECT_EQ(server.requestThreads(), 1u);

    auto other = connect();
    auto r = other.request("GET", "/v1/sandboxes");
    EXPECT_EQ(r.status, status);
    EXPECT_NE(errorMessage(r).find(key), std::string::npos) << r.body;
    EXPECT_EQ(r.header("connection"), "close");
    auto probe = connect();
    EXPECT_EQ(probe.request("GET", "/healthz").status, 200);
    server.stop();
    server_.reset();
  }
}

TEST_F(ApiServerTest, StreamEventsArriveAsTheyHappen) {
  fake_.command_script = {
      {0ms, {{"type", "start"}, {"command_id", "c1"}, {"pid", 7}}},
      {1500ms, {{"type", "exit"}, {"exit_code", 0}, {"signal", 0}}},
  };
  start();
  auto c = connect();
  createSandbox(c, "s");
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(c.sendRequest("POST", "/v1/sandboxes/s/commands", R"({"argv":["x"]})"));
  HttpResponse head;
  ASSERT_TRUE(c.readHead(head));
  auto first = c.readChunk();
  auto first_at = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(first);
  EXPECT_EQ(nlohmann::json::parse(*first)["type"], "start");
  if (!kSanitizedBuild) {
    EXPECT_LT(first_at, 1000ms) << "the first event waited for the stream's end";
  }
  auto second = c.readChunk(5000);
  ASSERT_TRUE(second);
  EXPECT_EQ(nlohmann::json::parse(*second)["type"], "exit");
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 1400ms);
  EXPECT_EQ(c.readChunk(), "");
}

TEST_F(ApiServerTest, ClientGoneMidStreamDestroysTheStream) {
  fake_.command_script = {{0ms, {{"type", "start"}, {"command_id", "c1"}, {"pid", 7}}},
                          {20ms, {{"type", "stdout"}, {"data", "tick\n"}}}};
  fake_.command_endless = true;
  start();
  auto c = connect();
  createSandbox(c, "s");
  ASSERT_TRUE(c.sendRequest("POST", "/v1/sandboxes/s/commands", R"({"argv":["yes"]})"));
  HttpResponse head;
  ASSERT_TRUE(c.readHead(head));
  ASSERT_TRUE(c.readChunk());
  ASSERT_TRUE(c.readChunk());
  EXPECT_EQ(fake_.streams.destroyed.load(), 0);
  c.closeNow();
  auto deadline = std::chrono::steady_clock::now() + 3s;
  while (fake_.streams.destroyed_early.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(fake_.streams.destroyed_early.load(), 1);
}

TEST_F(ApiServerTest, QuietStreamNoticesTheClientLeaving) {
  // No event for a minute: the server must still notice the hang-up between polls.
  fake_.command_script = {{0ms, {{"type", "start"}, {"command_id", "c1"}, {"pid", 7}}},
                          {60000ms, {{"type", "exit"}, {"exit_code", 0}}}};
  start();
  auto c = connect();
  createSandbox(c, "s");
  ASSERT_TRUE(c.sendRequest("POST", "/v1/sandboxes/s/commands",
                            R"({"argv":["sleep","60"],"stream":false})"));
  std::this_thread::sleep_for(100ms);
  c.closeNow();
  auto deadline = std::chrono::steady_clock::now() + 3s;
  while (fake_.streams.destroyed_early.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(fake_.streams.destroyed_early.load(), 1);
}

long peakRssKb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

TEST_F(ApiServerTest, FiftyMegabyteUploadIsStreamed) {
  start();
  auto c = connect();
  createSandbox(c, "s");
  const uint64_t size = 50ull << 20;
  std::string piece(64 * 1024, '\0');
  for (size_t i = 0; i < piece.size(); ++i) piece[i] = static_cast<char>(i * 31 + 7);
  uint64_t hash = 1469598103934665603ull;
  for (uint64_t i = 0; i < size / piece.size(); ++i) {
    for (char ch : piece) hash = (hash ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  }
  {
    std::ofstream reset("/proc/self/clear_refs");
    reset << "5";  // resets VmHWM to the current RSS
  }
  long before = peakRssKb();
  ASSERT_TRUE(
      c.sendRaw("PUT /v1/sandboxes/s/files?path=/home/user/big HTTP/1.1\r\n"
                "Content-Length: " +
                std::to_string(size) + "\r\n\r\n"));
  for (uint64_t sent = 0; sent < size; sent += piece.size()) ASSERT_TRUE(c.sendRaw(piece));
  auto r = c.readResponse(30000);
  ASSERT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(r.json()["size"], size);
  EXPECT_EQ(fake_.last_upload_size, size);
  EXPECT_EQ(fake_.last_upload_hash, hash);
  long growth_kb = peakRssKb() - before;
  std::printf("50 MB upload: peak RSS grew by %ld KiB\n", growth_kb);
  EXPECT_LT(growth_kb, 16 * 1024) << "the upload was buffered";
}

TEST_F(ApiServerTest, KeepAliveReusesOneConnection) {
  auto& server = start();
  auto c = connect();
  for (int i = 0; i < 100; ++i) ASSERT_EQ(c.request("GET", "/healthz").status, 200);
  EXPECT_EQ(server.connections(), 1u);
  // HTTP/1.0 without keep-alive, and Connection: close, end the connection after the answer.
  ASSERT_TRUE(c.sendRaw("GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(c.readResponse().status, 200);
  EXPECT_TRUE(c.closedByServer(2000));
}

TEST_F(ApiServerTest, IdleConnectionsAreClosed) {
  options_.idle_timeout = 200ms;
  options_.header_timeout = 200ms;
  start();
  auto c = connect();
  EXPECT_EQ(c.request("GET", "/healthz").status, 200);
  EXPECT_TRUE(c.closedByServer(2000));
  // A header that never completes is cut off too (slow sender).
  auto d = connect();
  ASSERT_TRUE(d.sendRaw("GET /healthz HTTP/1.1\r\n"));
  EXPECT_TRUE(d.closedByServer(2000));
}

TEST_F(ApiServerTest, ConcurrentClients) {
  start();
  {
    auto c = connect();
    createSandbox(c, "shared");
  }
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 50; ++t) {
    threads.emplace_back([&, t] {
      auto c = HttpClient::unix(options_.socket_path);
      if (!c) return;
      for (int i = 0; i < 20; ++i) {
        auto r = (i % 2 == 0)
                     ? c->request("GET", "/v1/sandboxes/shared")
                     : c->request("POST", "/v1/sandboxes/shared/code",
                                  R"({"code":")" + std::to_string(t) + R"(","stream":false})");
        if (r.status == 200) good++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), 1000);
}

TEST_F(ApiServerTest, DrainFinishesInFlightRequestsAndRefusesNewOnes) {
  std::atomic<bool> in_create{false};
  fake_.on_create = [&] {
    in_create = true;
    std::this_thread::sleep_for(300ms);
  };
  auto& server = start();
  auto idle = connect();
  ASSERT_EQ(idle.request("GET", "/healthz").status, 200);

  HttpResponse created;
  std::thread slow([&] {
    auto c = connect();
    created = c.request("POST", "/v1/sandboxes", "{}");
  });
  while (!in_create) std::this_thread::sleep_for(1ms);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(server.drain(5s));
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 200ms);  // it waited for the create
  slow.join();
  EXPECT_EQ(created.status, 201);
  EXPECT_TRUE(server.draining());

  // No new connections: the socket file is gone.
  EXPECT_FALSE(HttpClient::unix(options_.socket_path));
  // An open connection hears that the server is draining, then is closed.
  auto r = idle.request("GET", "/healthz");
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.json()["draining"], true);
  EXPECT_EQ(r.json()["status"], "draining");
  EXPECT_EQ(r.header("connection"), "close");
  EXPECT_TRUE(idle.closedByServer(2000));
  server.stop();
}

TEST_F(ApiServerTest, DrainTimesOutAndStopBreaksStreams) {
  fake_.command_script = {{0ms, {{"type", "start"}, {"command_id", "c1"}, {"pid", 7}}},
                          {50ms, {{"type", "stdout"}, {"data", "tick\n"}}}};
  fake_.command_endless = true;
  auto& server = start();
  auto c = connect();
  createSandbox(c, "s");
  ASSERT_TRUE(c.sendRequest("POST", "/v1/sandboxes/s/commands", R"({"argv":["yes"]})"));
  HttpResponse head;
  ASSERT_TRUE(c.readHead(head));
  ASSERT_TRUE(c.readChunk());
  EXPECT_FALSE(server.drain(200ms));  // the endless stream is still in flight
  auto t0 = std::chrono::steady_clock::now();
  server.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s) << "stop() waited for a busy stream";
  EXPECT_EQ(fake_.streams.destroyed_early.load(), 1);
  EXPECT_EQ(server.connections(), 0u);
}

// Round trip of GET /healthz over the Unix socket on one keep-alive connection.
TEST_F(ApiServerTest, HealthzLatency) {
  start();
  auto c = connect();
  for (int i = 0; i < 100; ++i) c.request("GET", "/healthz");
  std::vector<double> us;
  for (int i = 0; i < 2000; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto r = c.request("GET", "/healthz");
    us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    ASSERT_EQ(r.status, 200);
  }
  std::sort(us.begin(), us.end());
  double p50 = us[us.size() / 2], p99 = us[us.size() * 99 / 100];
  std::printf(
      "GET /healthz over the Unix socket, 2000 keep-alive requests: p50 %.1f us, p99 %.1f us\n",
      p50, p99);
  RecordProperty("healthz_p50_us", std::to_string(p50));
  RecordProperty("healthz_p99_us", std::to_string(p99));
  if (!kSanitizedBuild) {
    EXPECT_LT(p50, 5000.0);
  }
}

}  // namespace
}  // namespace airlock::testing
