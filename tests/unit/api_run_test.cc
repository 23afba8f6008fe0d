// POST /v1/runs without sandboxes: the request decoder's errors name the field, and the HTTP
// layer streams a run's events or folds them into one document (against a fake service).
#include <gtest/gtest.h>

#include "supervisor/api/request_decoding.h"
#include "supervisor/api/router.h"
#include "supervisor/api/server.h"
#include "tests/support/test_support.h"
#include "tests/unit/api_fake_service.h"
#include "tests/unit/api_test_client.h"

namespace airlock::testing {
namespace {

using api::decodeRun;

std::string errorOf(std::string_view body) {
  auto r = decodeRun(body);
  EXPECT_FALSE(r.has_value()) << body;
  if (r) return "";
  EXPECT_EQ(r.error().code, ErrorCode::kBadRequest);
  return r.error().message;
}

TEST(ApiRunDecoding, FullBody) {
  auto r = decodeRun(R"j({"profile": "data", "language": "python", "code": "print(1)",
      "args": ["a", "b c"], "env": {"MODE": "fast"}, "timeout_s": 5, "memory_mb": 256,
      "stdin_base64": "AP8=", "files_in": [{"path": "in/x.csv", "content": "1,2\n"},
      {"path": "/tmp/b", "content_base64": "/w=="}], "files_out": [{"path": "out.png"}],
      "stream": false})j");
  ASSERT_TRUE(r) << r.error().message;
  const auto& s = r->spec;
  EXPECT_EQ(s.profile, "data");
  EXPECT_EQ(s.language, "python");
  EXPECT_EQ(s.code, "print(1)");
  EXPECT_TRUE(s.script_name.empty());
  EXPECT_EQ(s.args, (std::vector<std::string>{"a", "b c"}));
  EXPECT_EQ(s.env.at("MODE"), "fast");
  EXPECT_EQ(s.timeout_s, 5u);
  EXPECT_EQ(s.memory_mb, 256u);
  ASSERT_TRUE(s.stdin_data);
  EXPECT_EQ(*s.stdin_data, std::string("\0\xff", 2));
  ASSERT_EQ(s.files_in.size(), 2u);
  EXPECT_EQ(s.files_in[0].path, "in/x.csv");
  EXPECT_EQ(s.files_in[0].content, "1,2\n");
  EXPECT_EQ(s.files_in[1].content, "\xff");
  EXPECT_EQ(s.files_out, (std::vector<std::string>{"out.png"}));
  EXPECT_FALSE(r->stream);
}

TEST(ApiRunDecoding, ScriptAndDefaults) {
  auto r = decodeRun(R"({"script": {"name": "greet.py", "content_base64": "cHJpbnQoMSk="}})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->spec.script_name, "greet.py");
  EXPECT_EQ(r->spec.code, "print(1)");
  EXPECT_TRUE(r->spec.language.empty());
  EXPECT_FALSE(r->spec.stdin_data) << "no stdin field: the program's stdin is empty";
  EXPECT_FALSE(r->spec.timeout_s);
  EXPECT_TRUE(r->stream);
  auto empty_stdin = decodeRun(R"({"language": "sh", "code": "cat", "stdin": ""})");
  ASSERT_TRUE(empty_stdin);
  EXPECT_EQ(empty_stdin->spec.stdin_data, "");
}

TEST(ApiRunDecoding, ErrorsNameTheField) {
  EXPECT_EQ(errorOf(""), "request body is empty; expected a JSON object");
  EXPECT_EQ(errorOf(R"({"language": "python"})"),
            "one of the fields 'code' or 'script' is required");
  EXPECT_EQ(errorOf(R"({"language": "python", "code": "1", "script": {"name": "a.py"}})"),
            "fields 'code' and 'script' are exclusive: give exactly one");
  EXPECT_EQ(errorOf(R"({"code": "1"})"),
            "field 'language' is required with 'code' (a script's extension can name it)");
  EXPECT_EQ(errorOf(R"({"language": "py", "code": "1", "code_base64": "MQ=="})"),
            "fields 'code' and 'code_base64' are exclusive");
  EXPECT_EQ(errorOf(R"({"script": "a.py"})"), "field 'script': expected an object, got string");
  EXPECT_EQ(errorOf(R"({"script": {"content": "x"}})"), "field 'script.name' is required");
  EXPECT_EQ(errorOf(R"({"script": {"name": "../a.py", "content": "x"}})"),
            "field 'script.name': expected a file name (no '/', at most 255 bytes), got "
            "'../a.py'");
  EXPECT_EQ(errorOf(R"({"script": {"name": "a.py"}})"),
            "one of the fields 'script.content' or 'script.content_base64' is required");
  EXPECT_EQ(errorOf(R"({"script": {"name": "a.py", "content": "", "mode": 1}})"),
            "unknown field 'script.mode'");
  EXPECT_EQ(errorOf(R"({"language": "py", "code": "1", "timeout_s": "5"})"),
            "field 'timeout_s': expected an integer, got string");
  EXPECT_EQ(errorOf(R"({"language": "py", "code": "1", "timeout_s": 0})"),
            "field 'timeout_s': must be positive, got 0");
  EXPECT_EQ(errorOf(R"({"language": "py", "code": "1", "timeout_s": 4294967296})"),
            "field 'timeout_s': 4294967296 is too large");
  EXPECT_EQ(errorOf(R"({"language": "py", "code": "1", "memory_mb": 1.5})"),
            "field 'memory_mb': expected an integer, got number");
  EXPECT_EQ(errorOf(R"({"language": "py", "code": "1", "timout_s": 5})"),
            "unknown field 'timout_s' (did you mean 'timeout_s'?)");
  EXPECT_EQ(errorOf(R"({"language": "py", "code": "1", "args": ["a", 1]})"),
            "field 'args[1]': expected a string, got number");
  EXPECT_EQ(errorOf(R"({"language": "py", "code": "1", "env": {"A=B": "c"}})"),
            "field 'env': 'A=B' is not a variable name (empty or has '=')");
  EXPECT_EQ(errorOf(R"({"language": "py", "code": "1", "stdin": "a", "stdin_base64": "YQ=="})"),
            "fields 'stdin' and 'stdin_base64' are exclusive");
  EXPECT_EQ(errorOf(R"({"language": "py", "code": "1", "stdin_base64": "!"})"),
            "field 'stdin_base64': not valid base64");
  EXPECT_EQ(errorOf(R"({"language": "py", "code": "1", "files_in": {}})"),
            "field 'files_in': expected an array of objects, got object");
  EXPECT_EQ(errorOf(R"({"language": "py", "code": "1", "files_in": ["a"]})"),
            "field 'files_in[0]': expected an object, got string");
  EXPECT_EQ(errorOf(R"({"language": "py", "code": "1",
                        "files_in": [{"path": "a", "content": ""}, {"content": "x"}]})"),
            "field 'files_in[1].path' is required");
  EXPECT_EQ(errorOf(R"({"language": "py", "code": "1", "files_in": [{"path": ""}]})"),
            "field 'files_in[0].path': must not be empty");
  EXPECT_EQ(errorOf(R"({"language": "py", "code": "1", "files_in": [{"path": "a"}]})"),
            "one of the fields 'files_in[0].content' or 'files_in[0].content_base64' is "
            "required");
  EXPECT_EQ(errorOf(R"({"language": "py", "code": "1",
                        "files_in": [{"path": "a", "content_base64": "%%"}]})"),
            "field 'files_in[0].content_base64': not valid base64");
  EXPECT_EQ(errorOf(R"({"language": "py", "code": "1", "files_out": [{"path": "a", "pth": 1}]})"),
            "unknown field 'files_out[0].pth' (did you mean 'files_out[0].path'?)");
  EXPECT_EQ(errorOf(R"({"language": "py", "code": "1", "files_out": [{"path": 3}]})"),
            "field 'files_out[0].path': expected a string, got number");
  std::string many_in = R"({"language": "py", "code": "1", "files_in": [)";
  for (int i = 0; i < 257; ++i)
    many_in += std::string(i ? "," : "") + R"({"path": "a", "content": ""})";
  EXPECT_EQ(errorOf(many_in + "]}"), "field 'files_in': at most 256 files, got 257");
  std::string many_out = R"({"language": "py", "code": "1", "files_out": [)";
  for (int i = 0; i < 65; ++i) many_out += std::string(i ? "," : "") + R"({"path": "a"})";
  EXPECT_EQ(errorOf(many_out + "]}"), "field 'files_out': at most 64 files, got 65");
}

TEST(ApiRunDecoding, TransfersNameTheirLocationAndDirectory) {
  auto r = api::decodeRun(R"({"language": "shell", "code": "true",
      "transfers_in": [{"source": "hostdir:data/set", "path": "set"}],
      "transfers_out": [{"path": "set", "dest": "https://bucket.example.com/set.tar.gz"}]})");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->spec.transfers_in.size(), 1u);
  EXPECT_EQ(r->spec.transfers_in[0].location, "hostdir:data/set");
  EXPECT_EQ(r->spec.transfers_in[0].path, "set");
  ASSERT_EQ(r->spec.transfers_out.size(), 1u);
  EXPECT_EQ(r->spec.transfers_out[0].location, "https://bucket.example.com/set.tar.gz");
  EXPECT_EQ(errorOf(R"({"language": "shell", "code": "1", "transfers_in": [{"path": "a"}]})"),
            "field 'transfers_in[0].source' is required: a URL or hostdir:ROOT/path");
  EXPECT_EQ(errorOf(R"({"language": "shell", "code": "1", "transfers_out": [{"dest": "x:y"}]})"),
            "field 'transfers_out[0].path' is required");
}

TEST(ApiRunDecoding, TheRouteIsPostOnly) {
  auto m = api::matchRoute("POST", "/v1/runs");
  ASSERT_EQ(m.status, api::RouteMatch::Status::kFound);
  EXPECT_EQ(m.route->id, api::RouteId::kRun);
  auto get = api::matchRoute("GET", "/v1/runs");
  EXPECT_EQ(get.status, api::RouteMatch::Status::kMethodNotAllowed);
  EXPECT_EQ(get.allow, "POST");
}

// A service whose runs play a script: output, a notice, then the result.
class RunService : public FakeService {
 public:
  std::optional<sandbox::ServiceError> refuse;
  std::vector<ScriptedEvent> run_script;
  sandbox::ProgramSpec last_run;
  std::string last_run_tenant;

  SResult<std::unique_ptr<sandbox::EventStream>> runOneShot(
      const sandbox::Caller& caller, const sandbox::ProgramSpec& spec) override {
    std::lock_guard lock(mu);
    last_run = spec;
    last_run_tenant = caller.tenant;
    if (refuse) return std::unexpected(*refuse);
    return std::unique_ptr<sandbox::EventStream>(
        std::make_unique<ScriptedStream>(run_script, streams));
  }
};

class ApiRunServer : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.socket_path = dir_.file("api.sock");
    Json record = {{"schema", 1}, {"status", "exited"}, {"exit_code", 3}, {"stdout", "hi\n"}};
    fake_.run_script = {
        {{}, {{"type", "notice"}, {"message", "policy relaxation: x"}}},
        {{}, {{"type", "stdout"}, {"data", "hi\n"}}},
        {std::chrono::milliseconds(50), {{"type", "stderr"}, {"data_base64", "/w=="}}},
        {{},
         {{"type", "result"},
          {"record", record},
          {"files_out", {{{"sandbox_path", "/home/user/o"}, {"content_base64", "eA=="}}}}}}};
    auto s = api::Server::start(fake_, options_);
    ASSERT_TRUE(s) << s.error().message();
    server_ = std::move(*s);
  }
  HttpResponse post(const std::string& body) {
    auto c = HttpClient::unix(options_.socket_path);
    EXPECT_TRUE(c);
    if (!c) return {};
    return c->request("POST", "/v1/runs", body);
  }

  TempDir dir_;
  RunService fake_;
  api::ServerOptions options_;
  std::unique_ptr<api::Server> server_;
};

TEST_F(ApiRunServer, StreamsEventsThenTheResult) {
  auto r = post(R"j({"language": "python", "code": "print('hi')",
                    "files_in": [{"path": "in.txt", "content_base64": "AAE="}]})j");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("content-type"), "application/x-ndjson");
  std::vector<Json> events;
  for (size_t pos = 0, nl; (nl = r.body.find('\n', pos)) != std::string::npos; pos = nl + 1)
    events.push_back(Json::parse(r.body.substr(pos, nl - pos)));
  ASSERT_EQ(events.size(), 4u) << r.body;
  EXPECT_EQ(events[0]["type"], "notice");
  EXPECT_EQ(events[1], (Json{{"type", "stdout"}, {"data", "hi\n"}}));
  EXPECT_EQ(events[2]["data_base64"], "/w==");
  EXPECT_EQ(events[3]["type"], "result");
  EXPECT_EQ(events[3]["record"]["exit_code"], 3);
  std::lock_guard lock(fake_.mu);
  EXPECT_EQ(fake_.last_run.code, "print('hi')");
  ASSERT_EQ(fake_.last_run.files_in.size(), 1u);
  EXPECT_EQ(fake_.last_run.files_in[0].content, std::string("\0\1", 2));
  EXPECT_EQ(fake_.last_run_tenant, "default");
}

TEST_F(ApiRunServer, StreamFalseAnswersTheResultDocument) {
  auto r = post(R"({"language": "python", "code": "1", "stream": false})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("content-type"), "application/json");
  auto doc = r.json();
  EXPECT_FALSE(doc.contains("type")) << r.body;
  EXPECT_EQ(doc["record"]["status"], "exited");
  EXPECT_EQ(doc["record"]["stdout"], "hi\n");
  EXPECT_EQ(doc["files_out"][0]["content_base64"], "eA==");
}

TEST_F(ApiRunServer, BadBodiesAndRefusalsAreErrorsNamingWhy) {
  auto bad = post(R"({"language": "python", "code": "1", "files_out": [{}]})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.json()["error"]["message"], "field 'files_out[0].path' is required");
  {
    std::lock_guard lock(fake_.mu);
    fake_.refuse = sandbox::ServiceError{ErrorCode::kTooManyRequests, "tenant 'default' is full"};
  }
  auto full = post(R"({"language": "python", "code": "1"})");
  EXPECT_EQ(full.status, 429);
  EXPECT_EQ(full.json()["error"]["code"], "too_many_requests");
  EXPECT_EQ(full.json()["error"]["message"], "tenant 'default' is full");
  // The body limit applies to the program and files it carries.
  server_.reset();
  options_.max_json_body = 64;
  auto s = api::Server::start(fake_, options_);
  ASSERT_TRUE(s);
  server_ = std::move(*s);
  auto big = post(R"({"language": "python", "code": ")" + std::string(100, 'x') + R"("})");
  EXPECT_EQ(big.status, 413);
  EXPECT_EQ(big.json()["error"]["message"], "request body is over the 64-byte limit");
}

}  // namespace
}  // namespace airlock::testing
