// Request decoding, base64, routing and the OpenAPI document, without sockets.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "supervisor/api/http_metrics.h"
#include "supervisor/api/openapi.h"
#include "supervisor/api/request_decoding.h"
#include "supervisor/api/response_encoding.h"
#include "supervisor/api/router.h"
#include "supervisor/encoding/base64.h"

namespace airlock::api {

using encoding::base64Decode;
using encoding::base64Encode;
using encoding::isValidUtf8;
namespace {

using sandbox::ErrorCode;

template <typename R>
std::string errorOf(const R& r) {
  EXPECT_FALSE(r.has_value());
  if (r) return "";
  EXPECT_EQ(r.error().code, ErrorCode::kBadRequest);
  return r.error().message;
}

TEST(ApiDecoding, CreateSandboxFullBody) {
  auto s = decodeCreateSandbox(
      R"({"profile":"default","language":"python","name":"analysis-42","env":{"MPLBACKEND":"Agg"},
          "metadata":{"user":"u1"},"keep_alive_s":300,"lifetime_s":3600,"persistent":true,
          "isolation":"gvisor"})");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->name, "analysis-42");
  EXPECT_EQ(s->isolation, "gvisor");
  EXPECT_EQ(s->env.at("MPLBACKEND"), "Agg");
  EXPECT_EQ(s->metadata.at("user"), "u1");
  EXPECT_EQ(*s->keep_alive_s, 300);
  EXPECT_EQ(*s->lifetime_s, 3600);
  EXPECT_TRUE(s->persistent);
}

TEST(ApiDecoding, EmptyBodyIsAnEmptyObjectWhereAllFieldsAreOptional) {
  ASSERT_TRUE(decodeCreateSandbox(""));
  ASSERT_TRUE(decodeKeepAlive("  \n"));
  EXPECT_EQ(errorOf(decodeRunCommand("")), "request body is empty; expected a JSON object");
}

TEST(ApiDecoding, ErrorsNameTheField) {
  EXPECT_EQ(errorOf(decodeRunCommand(R"({"argv":["ls"],"timeout_s":"30"})")),
            "field 'timeout_s': expected a number, got string");
  EXPECT_EQ(errorOf(decodeRunCommand(R"({"argv":["ls"],"timeout":30})")),
            "unknown field 'timeout' (did you mean 'timeout_s'?)");
  EXPECT_EQ(errorOf(decodeRunCommand(R"({"argv":["ls", 3]})")),
            "field 'argv[1]': expected a string, got number");
  EXPECT_EQ(errorOf(decodeRunCommand(R"({"argv":["ls"],"env":{"K":1}})")),
            "field 'env.K': expected a string, got number");
  EXPECT_EQ(errorOf(decodeRunCommand(R"({"argv":["ls"],"cmd":"ls"})")),
            "fields 'argv' and 'cmd' are exclusive: give exactly one");
  EXPECT_EQ(errorOf(decodeRunCommand(R"({"env":{}})")),
            "one of the fields 'argv' or 'cmd' is required");
  EXPECT_EQ(errorOf(decodeCreateSandbox(R"({"keep_alive_s":1.5})")),
            "field 'keep_alive_s': expected an integer, got number");
  EXPECT_EQ(errorOf(decodeCreateSandbox(R"({"keep_alive_s":-1})")),
            "field 'keep_alive_s': must be positive, got -1");
  EXPECT_EQ(errorOf(decodeCreateSandbox(R"({"persistent":true})")),
            "field 'persistent': needs a 'name'");
  EXPECT_EQ(errorOf(decodeWriteFile(R"({"content":"x"})")), "field 'path' is required");
  EXPECT_EQ(errorOf(decodeWriteFile(R"({"path":"rel","content":"x"})")),
            "field 'path': must be an absolute path, got 'rel'");
  EXPECT_EQ(errorOf(decodeReadFile(R"({"path":"/a","encoding":"latin1"})")),
            "field 'encoding': expected 'utf-8' or 'base64', got 'latin1'");
  EXPECT_EQ(errorOf(decodeSignal(R"({"signal":"SIGFOO"})")),
            "field 'signal': unknown signal 'SIGFOO'");
  EXPECT_EQ(errorOf(decodeStdin(R"({"data_base64":"!!"})")),
            "field 'data_base64': not valid base64");
  EXPECT_EQ(errorOf(decodeRename(R"({"from":"/a"})")), "field 'to' is required");
  EXPECT_EQ(errorOf(decodeRunCode(R"([1])")), "request body: expected a JSON object, got array");
  EXPECT_EQ(errorOf(decodeRunCommand(R"({"argv":["a\u0000b"]})")),
            "field 'argv[0]': contains a NUL byte");
}

// Code runs' per-run env and a context's cwd (docs/contexts.md).
TEST(ApiDecoding, CodeEnvAndContextCwd) {
  auto r = decodeRunCode(R"({"code":"1","env":{"A_1":"x","_b":""}})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->spec.env.at("A_1"), "x");
  EXPECT_EQ(r->spec.env.at("_b"), "");
  EXPECT_EQ(errorOf(decodeRunCode(R"({"code":"1","env":{"1A":"x"}})")),
            "field 'env': '1A' is not a variable name (letters, digits and '_', not starting "
            "with a digit)");
  EXPECT_EQ(errorOf(decodeRunCode(R"({"code":"1","env":{"A":2}})")),
            "field 'env.A': expected a string, got number");
  auto c = decodeCreateContext(R"({"language":"bash","cwd":"/home/user/p"})");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->cwd, "/home/user/p");
  EXPECT_EQ(errorOf(decodeCreateContext(R"({"cwd":"p"})")),
            "field 'cwd': must be an absolute path, got 'p'");
}

TEST(ApiDecoding, MalformedJsonSaysWhere) {
  std::string msg = errorOf(decodeRunCommand("{\"argv\": [\"ls\",]}"));
  EXPECT_NE(msg.find("malformed JSON body: parse error at line 1, column 16"), std::string::npos)
      << msg;
  msg = errorOf(decodeRunCommand(std::string(100, '[')));
  EXPECT_NE(msg.find("nested deeper than 64 levels"), std::string::npos) << msg;
}

TEST(ApiDecoding, NullMeansAbsent) {
  auto r = decodeRunCommand(
      R"({"argv":["ls","-la"],"cmd":null,"stdin":"text","stdin_base64":null,"stream":false})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->spec.argv.size(), 2u);
  EXPECT_EQ(r->spec.stdin_data, "text");
  EXPECT_FALSE(r->stream);
}

TEST(ApiDecoding, SignalsAndModes) {
  EXPECT_EQ(decodeSignal(R"({"signal":"SIGTERM"})")->signo, 15);
  EXPECT_EQ(decodeSignal(R"({"signal":"KILL"})")->signo, 9);
  EXPECT_EQ(decodeSignal(R"({"signal":2})")->signo, 2);
  EXPECT_FALSE(decodeSignal(R"({"signal":0})"));
  EXPECT_FALSE(decodeSignal(R"({"signal":99999999999999})"));
  EXPECT_EQ(parseOctalMode("0644"), 0644u);
  EXPECT_EQ(parseOctalMode("755"), 0755u);
  EXPECT_FALSE(parseOctalMode("0800"));
  EXPECT_FALSE(parseOctalMode("17777"));
  EXPECT_EQ(decodeWriteFile(R"({"path":"/a","content":"","mode":"0600"})")->mode, 0600u);
  EXPECT_EQ(decodeWriteFile(R"({"path":"/a","content":"","mode":420})")->mode, 0644u);
  auto b = decodeWriteFile(R"({"path":"/a","content_base64":"AP8="})");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->content, std::string("\0\xff", 2));
}

TEST(ApiBase64, RoundTripsAndRejectsNonCanonical) {
  std::mt19937 rng(7);
  for (size_t len = 0; len < 300; ++len) {
    std::string bytes(len, '\0');
    for (auto& c : bytes) c = static_cast<char>(rng());
    auto enc = base64Encode(bytes);
    EXPECT_EQ(enc.size(), (len + 2) / 3 * 4);
    auto dec = base64Decode(enc);
    ASSERT_TRUE(dec);
    EXPECT_EQ(*dec, bytes);
  }
  EXPECT_EQ(base64Encode("hello"), "aGVsbG8=");
  EXPECT_FALSE(base64Decode("aGVsbG8"));
  EXPECT_FALSE(base64Decode(" aGVsbG8="));
  EXPECT_FALSE(base64Decode("aG=sbG8="));
  EXPECT_FALSE(base64Decode("a==="));
  EXPECT_TRUE(isValidUtf8("h\xc3\xa9llo"));
  EXPECT_FALSE(isValidUtf8("\xff"));
  EXPECT_FALSE(isValidUtf8("\xc0\x80"));      // overlong NUL
  EXPECT_FALSE(isValidUtf8("\xed\xa0\x80"));  // surrogate
}

// Thousands of random and mutated bodies through every decoder: each must either decode or
// fail with bad_request and a message, never crash or throw.
TEST(ApiDecodingFuzz, EveryDecoderSurvivesMutatedBodies) {
  using Decoder = std::function<std::optional<std::string>(std::string_view)>;
  auto wrap = [](auto fn) -> Decoder {
    return [fn](std::string_view body) -> std::optional<std::string> {
      auto r = fn(body);
      if (r) return std::nullopt;
      return std::string(sandbox::errorCodeName(r.error().code)) + ": " + r.error().message;
    };
  };
  std::vector<std::pair<Decoder, std::string>> decoders = {
      {wrap(decodeCreateSandbox),
       R"({"profile":"default","name":"a","env":{"A":"b"},"metadata":{"u":"1"},"keep_alive_s":3,"persistent":true})"},
      {wrap(decodeKeepAlive), R"({"keep_alive_s":600,"lifetime_s":7200})"},
      {wrap(decodeRunCommand),
       R"({"argv":["ls","-la"],"env":{"K":"V"},"cwd":"/home/user","stdin_base64":"aGk=","timeout_s":30,"background":false,"stream":true})"},
      {wrap(decodeStdin), R"({"data":"abc","eof":true})"},
      {wrap(decodeSignal), R"({"signal":"SIGTERM"})"},
      {wrap(decodeRunCode),
       R"({"code":"1+1","language":"python","context_id":null,"timeout_s":3})"},
      {wrap(decodeCreateContext), R"({"language":"python"})"},
      {wrap(decodeWriteFile), R"({"path":"/a","content_base64":"AAEC","mode":"0644"})"},
      {wrap(decodeReadFile), R"({"path":"/a","encoding":"base64"})"},
      {wrap(decodeMkdir), R"({"path":"/a/b","parents":true})"},
      {wrap(decodeRemove), R"({"path":"/a","recursive":true})"},
      {wrap(decodeRename), R"({"from":"/a","to":"/b"})"},
  };
  const std::vector<std::string> fragments = {"{",
                                              "}",
                                              "[",
                                              "]",
                                              ",",
                                              ":",
                                              "\"",
                                              "null",
                                              "true",
                                              "false",
                                              "-1",
                                              "1e309",
                                              "0.5",
                                              "18446744073709551616",
                                              "\"\\u0000\"",
                                              "\"\\ud800\"",
                                              "\xff",
                                              "\"argv\"",
                                              "\"path\"",
                                              "\"signal\"",
                                              "{\"a\":{}}",
                                              "[[[[",
                                              "\\",
                                              " ",
                                              "9223372036854775807",
                                              "\"/\""};
  std::mt19937_64 rng(20251122);
  int ok = 0, rejected = 0;
  for (auto& [decode, seed] : decoders) {
    ASSERT_FALSE(decode(seed)) << "seed must decode: " << seed << ": " << *decode(seed);
    for (int i = 0; i < 3000; ++i) {
      std::string body = seed;
      int mutations = 1 + static_cast<int>(rng() % 4);
      for (int m = 0; m < mutations; ++m) {
        size_t pos = body.empty() ? 0 : rng() % (body.size() + 1);
        switch (rng() % 6) {
          case 0:  // flip a byte
            if (!body.empty()) body[pos % body.size()] = static_cast<char>(rng());
            break;
          case 1:  // truncate
            body.resize(pos);
            break;
          case 2:  // insert a fragment
            body.insert(pos, fragments[rng() % fragments.size()]);
            break;
          case 3:  // delete a run
            body.erase(pos, rng() % 8);
            break;
          case 4: {  // random bytes
            std::string junk(rng() % 16, '\0');
            for (auto& c : junk) c = static_cast<char>(rng());
            body.insert(pos, junk);
            break;
          }
          case 5:  // replace a value with another JSON type
            if (auto colon = body.find(':', pos); colon != std::string::npos) {
              auto end = body.find_first_of(",}", colon);
              if (end != std::string::npos) {
                body.replace(colon + 1, end - colon - 1, fragments[rng() % fragments.size()]);
              }
            }
            break;
        }
      }
      std::optional<std::string> err;
      ASSERT_NO_THROW(err = decode(body)) << body;
      if (!err) {
        ++ok;
      } else {
        ++rejected;
        ASSERT_EQ(err->rfind("bad_request: ", 0), 0u) << *err;
        ASSERT_GT(err->size(), std::string("bad_request: ").size());
      }
    }
    // Pure noise too.
    for (int i = 0; i < 500; ++i) {
      std::string noise(rng() % 64, '\0');
      for (auto& c : noise) c = static_cast<char>(rng());
      auto err = decode(noise);
      if (err) {
        ASSERT_EQ(err->rfind("bad_request: ", 0), 0u) << *err;
      }
    }
  }
  // The mutations reach both outcomes, so the loop tested decoding, not only parsing.
  EXPECT_GT(ok, 100);
  EXPECT_GT(rejected, 1000);
}

TEST(ApiRouter, MatchesParamsAndMethods) {
  auto m = matchRoute("GET", "/v1/sandboxes/web-1/commands/c%2D1/events");
  ASSERT_EQ(m.status, RouteMatch::Status::kFound);
  EXPECT_EQ(m.route->id, RouteId::kCommandEvents);
  EXPECT_EQ(m.params.at("sb"), "web-1");
  EXPECT_EQ(m.params.at("cid"), "c-1");

  m = matchRoute("PATCH", "/v1/sandboxes/web-1");
  ASSERT_EQ(m.status, RouteMatch::Status::kMethodNotAllowed);
  EXPECT_EQ(m.allow, "GET, DELETE");
  EXPECT_EQ(matchRoute("GET", "/v1/nothing").status, RouteMatch::Status::kNotFound);
  EXPECT_EQ(matchRoute("GET", "/v1/sandboxes//commands").status, RouteMatch::Status::kNotFound);
  EXPECT_EQ(matchRoute("GET", "/v1/sandboxes/a%2Fb").status, RouteMatch::Status::kBadPath);
  EXPECT_EQ(matchRoute("GET", "/v1/sandboxes/a%zz").status, RouteMatch::Status::kBadPath);
  EXPECT_EQ(matchRoute("GET", "/v1/sandboxes/sb/files/list").route->id, RouteId::kListFiles);
  EXPECT_EQ(matchRoute("PUT", "/v1/sandboxes/sb/files").route->id, RouteId::kPutFile);

  // The port proxy's routes take any method and the rest of the path, raw.
  auto proxied = matchRoute("PATCH", "/v1/sandboxes/sb/ports/8000/a/b%20c/");
  ASSERT_EQ(proxied.status, RouteMatch::Status::kFound);
  EXPECT_EQ(proxied.route->id, RouteId::kProxyPort);
  EXPECT_EQ(proxied.params["port"], "8000");
  EXPECT_EQ(proxied.params["path"], "/a/b%20c/");
  EXPECT_EQ(matchRoute("GET", "/v1/sandboxes/sb/ports/8000").params["path"], "/");
  EXPECT_EQ(matchRoute("POST", "/v1/sandboxes/sb/ports/8000/link").route->id,
            RouteId::kCreatePortLink);
  EXPECT_EQ(matchRoute("GET", "/v1/sandboxes/sb/ports/8000/link").route->id, RouteId::kProxyPort);
  auto linked = matchRoute("GET", "/v1/ports/tok/index.html");
  ASSERT_EQ(linked.status, RouteMatch::Status::kFound);
  EXPECT_EQ(linked.params["token"], "tok");
  EXPECT_EQ(linked.params["path"], "/index.html");
  EXPECT_EQ(matchRoute("GET", "/v1/ports").status, RouteMatch::Status::kNotFound);

  std::vector<std::pair<std::string, std::string>> q;
  std::string error;
  ASSERT_TRUE(parseQuery("metadata.user=u1&path=%2Fhome%2Fa+b&x", q, error));
  ASSERT_EQ(q.size(), 3u);
  EXPECT_EQ(q[1].second, "/home/a b");
  EXPECT_FALSE(parseQuery("path=%2", q, error));
}

// Every route of the router is in the OpenAPI document, and the document has no other.
TEST(ApiOpenApi, DocumentCoversExactlyTheRouteTable) {
  auto doc = sandbox::Json::parse(openApiDocument(), nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << "openapi.json is not valid JSON";
  EXPECT_EQ(doc["openapi"].get<std::string>().substr(0, 2), "3.");
  std::set<std::string> documented, routed;
  for (auto& [path, ops] : doc["paths"].items()) {
    for (auto& [method, op] : ops.items()) {
      std::string m = method;
      for (auto& c : m) c = static_cast<char>(std::toupper(c));
      documented.insert(m + " " + path);
      EXPECT_TRUE(op.contains("responses")) << m << " " << path;
    }
  }
  for (const Route& r : routeTable()) {
    if (std::string_view(r.method) == "*") {
      for (const char* m : kAnyMethods) routed.insert(std::string(m) + " " + r.pattern);
    } else {
      routed.insert(std::string(r.method) + " " + r.pattern);
    }
  }
  // MCP's Streamable HTTP transport is answered beside the router (supervisor/mcp).
  for (const char* m : {"POST", "GET", "DELETE"}) routed.insert(std::string(m) + " /mcp");
  EXPECT_EQ(documented, routed);
}

// The live view's fields (airlock top, /ui): always present, null or zero when idle.
TEST(ApiEncoding, SandboxCarriesCurrentExecutionAndDenials) {
  sandbox::SandboxInfo idle;
  idle.id = "sb1";
  auto j = encodeSandbox(idle);
  ASSERT_TRUE(j.contains("current_execution"));
  EXPECT_TRUE(j["current_execution"].is_null());
  EXPECT_EQ(j["recent_denials"], (sandbox::Json{{"review", 0}}));

  sandbox::SandboxInfo busy = idle;
  busy.current_execution = {{"kind", "command"}, {"id", "c3"}, {"started_at", 1795000000000}};
  busy.review_denials = 2;
  j = encodeSandbox(busy);
  EXPECT_EQ(j["current_execution"]["kind"], "command");
  EXPECT_EQ(j["current_execution"]["id"], "c3");
  EXPECT_EQ(j["current_execution"]["started_at"], 1795000000000);
  EXPECT_EQ(j["recent_denials"]["review"], 2);
}

TEST(ApiEncoding, AggregatesCommandAndCodeEvents) {
  CommandAggregate cmd;
  cmd.add({{"type", "start"}, {"command_id", "c1"}, {"pid", 7}});
  cmd.add({{"type", "stdout"}, {"data", "a"}});
  cmd.add({{"type", "stdout"}, {"data_base64", base64Encode("b")}});
  cmd.add({{"type", "stderr"}, {"data_base64", "/w=="}});
  EXPECT_FALSE(cmd.complete());
  cmd.add({{"type", "exit"}, {"exit_code", 3}, {"signal", 0}, {"duration_ms", 1.5}});
  ASSERT_TRUE(cmd.complete());
  auto doc = cmd.document();
  EXPECT_EQ(doc["command_id"], "c1");
  EXPECT_EQ(doc["stdout"], "ab");
  EXPECT_EQ(doc["stderr_base64"], "/w==");
  EXPECT_FALSE(doc.contains("stderr"));
  EXPECT_EQ(doc["exit_code"], 3);

  CodeAggregate code;
  code.add({{"type", "stdout"}, {"data", "hi\n"}});
  code.add({{"type", "result"}, {"data", {{"text/plain", "3"}}}});
  code.add({{"type", "error"}, {"name", "E"}, {"value", "v"}, {"traceback", {"t"}}});
  code.add(
      {{"type", "end"}, {"status", "error"}, {"context_id", "python"}, {"execution_count", 4}});
  auto c = code.document();
  EXPECT_EQ(c["execution_count"], 4);
  EXPECT_EQ(c["status"], "error");
  EXPECT_EQ(c["results"].size(), 1u);
  EXPECT_EQ(c["error"]["name"], "E");
  EXPECT_FALSE(c["error"].contains("type"));
}

TEST(ApiEncoding, ErrorBodyNeverThrowsOnBadUtf8) {
  auto body = errorBody({ErrorCode::kNotFound, "sandbox '\xff' not found"});
  auto j = sandbox::Json::parse(body);
  EXPECT_EQ(j["error"]["code"], "not_found");
}

TEST(ApiMetrics, TextHasEveryFamily) {
  HttpMetrics m;
  m.observe("/healthz", 200, 0.0002);
  m.observe("/v1/sandboxes", 401, 0.002);
  m.connectionOpened();
  std::string t = m.text();
  EXPECT_NE(t.find("airlock_http_requests_total{route=\"/healthz\",code=\"200\"} 1"),
            std::string::npos);
  EXPECT_NE(t.find("airlock_http_request_seconds_bucket{route=\"/healthz\",le=\"0.0005\"} 1"),
            std::string::npos);
  EXPECT_NE(t.find("airlock_http_connections 1"), std::string::npos);
  EXPECT_NE(t.find("airlock_rejections_total{reason=\"unauthorized\"} 1"), std::string::npos);
}

TEST(ApiMetrics, RejectionsJoinTheServiceFamily) {
  HttpMetrics m;
  m.observe("/v1/sandboxes", 429, 0.001);
  std::string service_text =
      "# TYPE airlock_sandboxes gauge\nairlock_sandboxes 1\n"
      "# TYPE airlock_rejections_total counter\n"
      "airlock_rejections_total{reason=\"tenant_sandboxes\"} 2\n"
      "# TYPE airlock_audit_drops_total counter\nairlock_audit_drops_total 0\n";
  std::string t = m.render(service_text);
  size_t first = t.find("# TYPE airlock_rejections_total");
  ASSERT_NE(first, std::string::npos);
  EXPECT_EQ(t.find("# TYPE airlock_rejections_total", first + 1), std::string::npos) << t;
  size_t theirs = t.find("airlock_rejections_total{reason=\"tenant_sandboxes\"} 2\n");
  size_t ours = t.find("airlock_rejections_total{reason=\"too_many_requests\"} 1\n");
  size_t next_family = t.find("# TYPE airlock_audit_drops_total");
  ASSERT_NE(ours, std::string::npos) << t;
  EXPECT_LT(theirs, ours);
  EXPECT_LT(ours, next_family);
  EXPECT_NE(t.find("airlock_http_requests_total{route=\"/v1/sandboxes\",code=\"429\"} 1"),
            std::string::npos);
  // Without a service family, ours comes whole.
  EXPECT_NE(m.render("x 1").find("# TYPE airlock_rejections_total counter"), std::string::npos);
}

}  // namespace
}  // namespace airlock::api

namespace airlock::api {
namespace {

// The fast writer for output events must produce exactly what the generic one means.
TEST(ApiEventLine, OutputEventsRoundTripThroughTheFastEscaper) {
  const std::vector<std::string> texts = {"",
                                          "plain text\n",
                                          "quote \" backslash \\ tab \t cr \r",
                                          std::string("\0\x01\x1f", 3),
                                          "héllo 😀",
                                          std::string(100000, 'x') + "\"end"};
  for (const auto& t : texts) {
    for (const char* type : {"stdout", "stderr"}) {
      Json e{{"type", type}, {"data", t}};
      std::string line = eventLine(e);
      ASSERT_FALSE(line.empty());
      EXPECT_EQ(line.back(), '\n');
      EXPECT_EQ(Json::parse(line), e) << line.substr(0, 200);
      EXPECT_TRUE(line.starts_with(std::string(R"({"type":")") + type)) << "type comes first";
    }
  }
  Json other{{"type", "exit"}, {"exit_code", 0}};
  EXPECT_EQ(eventLine(other), dumpJson(other) + "\n");
}

}  // namespace
}  // namespace airlock::api
