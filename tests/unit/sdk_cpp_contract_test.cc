// The C++ client SDK's types checked field by field against the API description the supervisor
// serves (supervisor/api/openapi.json, GET /v1/openapi.json), as the TypeScript SDK's contract
// test does: a fake supervisor answers a document with every property of a schema set, and each
// property must come out in the SDK's struct with its value (a table below says where); every
// key the SDK sends must be a property of the request's schema, and every property must be sent
// by some option or be listed as unused. C++ has no reflection, so a field the SDK adds without
// a property is caught by review of these tables, not by the test.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "airlock/client/http.h"
#include "airlock/client/sandbox.h"
#include "client_fake_server.h"

namespace airlock::sdk {
namespace {

using testing::FakeServer;
using testing::RecordedRequest;

const Json& openapi() {
  static const Json doc = [] {
    const auto path =
        std::filesystem::path(__FILE__).parent_path() / "../../supervisor/api/openapi.json";
    std::ifstream in(path);
    Json parsed = Json::parse(in, nullptr, false);
    if (parsed.is_discarded()) ADD_FAILURE() << "cannot read " << path;
    return parsed;
  }();
  return doc;
}

const Json& schema(const std::string& name) {
  return openapi()["components"]["schemas"][name]["properties"];
}

// Fields the description may not name yet (none today); checked once it does.
const std::map<std::string, std::set<std::string>> kPending = {};

// A value of the property's type, distinct per property so that a mix-up shows.
Json sample(const std::string& name, const Json& prop, int i) {
  std::string type;
  if (auto t = prop.find("type"); t != prop.end())
    type = t->is_array() ? t->front().get<std::string>() : t->get<std::string>();
  if (name == "mounts")
    return Json::array({{{"source", "hostdir:d"}, {"path", "/mnt/d"}, {"writable", true}}});
  if (name == "review") return {{"verdict", "allow"}, {"reviewer", "r"}, {"rule", "x"}};
  if (name == "state") return "running";
  if (name == "current_execution")
    return {{"kind", "command"}, {"id", "c1"}, {"started_at", 1795000000000 + i}};
  if (name == "recent_denials") return {{"review", 1000 + i}};
  if (name == "type") return "dir";
  if (type == "string") return name + "-" + std::to_string(i);
  if (type == "integer" || type == "number") return 1000 + i;
  if (type == "boolean") return true;
  if (type == "array") return name == "argv" ? Json::array({"sleep", "9"}) : Json::array();
  if (type == "object") return name == "metadata" ? Json{{"k", "v"}} : Json::object();
  return name + "-" + std::to_string(i);
}

Json documentOf(const std::string& schema_name) {
  Json doc = Json::object();
  int i = 0;
  for (const auto& [name, prop] : schema(schema_name).items()) doc[name] = sample(name, prop, i++);
  return doc;
}

// How a struct shows one property: its value as JSON, compared with what was sent.
template <typename T>
using Fields = std::map<std::string, std::function<Json(const T&)>>;

template <typename T>
void checkAnswer(const std::string& schema_name, const Json& doc, const T& parsed,
                 const Fields<T>& fields, const std::set<std::string>& unread = {}) {
  for (const auto& [name, value] : doc.items()) {
    if (unread.contains(name)) continue;
    auto it = fields.find(name);
    if (it == fields.end()) {
      ADD_FAILURE() << schema_name << "." << name
                    << " is in openapi.json but the C++ SDK does not read it";
      continue;
    }
    EXPECT_EQ(it->second(parsed), value) << schema_name << "." << name;
  }
  for (const auto& [name, _] : fields)
    if (!doc.contains(name) &&
        !(kPending.contains(schema_name) && kPending.at(schema_name).contains(name)))
      ADD_FAILURE() << schema_name << ": the C++ SDK reads '" << name
                    << "', which openapi.json does not describe";
}

Json mountsJson(const std::vector<Mount>& mounts) {
  Json out = Json::array();
  for (const auto& m : mounts)
    out.push_back({{"source", m.source}, {"path", m.path}, {"writable", m.writable}});
  return out;
}

Json reviewJson(const std::optional<Review>& r) {
  if (!r) return nullptr;
  return {{"verdict", r->verdict}, {"reviewer", r->reviewer}, {"rule", r->rule}};
}

const std::string kSb = "/v1/sandboxes/0123456789abcdef";

ConnectionOptions to(const FakeServer& server) { return {server.url(), ""}; }

TEST(SdkContract, SandboxAnswer) {
  FakeServer server;
  Json doc = documentOf("Sandbox");
  doc["id"] = "0123456789abcdef";
  server.json("GET", kSb, 200, doc);
  auto sb = Sandbox::connect("0123456789abcdef", to(server));
  ASSERT_TRUE(sb) << sb.error().message();
  const Fields<SandboxInfo> fields = {
      {"id", [](auto& s) { return Json(s.id); }},
      {"node", [](auto& s) { return s.node.empty() ? Json(nullptr) : Json(s.node); }},
      {"name", [](auto& s) { return Json(s.name); }},
      {"tenant", [](auto& s) { return Json(s.tenant); }},
      {"profile", [](auto& s) { return Json(s.profile); }},
      {"language", [](auto& s) { return Json(s.language); }},
      {"isolation", [](auto& s) { return Json(s.isolation); }},
      {"state", [](auto& s) { return Json(s.state); }},
      {"metadata", [](auto& s) { return Json(s.metadata); }},
      {"persistent", [](auto& s) { return Json(s.persistent); }},
      {"mounts", [](auto& s) { return mountsJson(s.mounts); }},
      {"created_at", [](auto& s) { return Json(s.created_at); }},
      {"last_active_at", [](auto& s) { return Json(s.last_active_at); }},
      {"keep_alive_s", [](auto& s) { return Json(s.keep_alive_s); }},
      {"idle_expires_at", [](auto& s) { return Json(s.idle_expires_at); }},
      {"lifetime_s", [](auto& s) { return Json(s.lifetime_s); }},
      {"ends_at", [](auto& s) { return Json(s.ends_at); }},
      {"commands_running", [](auto& s) { return Json(s.commands_running); }},
      {"contexts", [](auto& s) { return Json(s.contexts); }},
      {"current_execution",
       [](auto& s) {
         if (!s.current_execution) return Json();
         return Json{{"kind", s.current_execution->kind},
                     {"id", s.current_execution->id},
                     {"started_at", s.current_execution->started_at}};
       }},
      {"recent_denials", [](auto& s) { return Json(s.recent_denials); }},
  };
  checkAnswer("Sandbox", doc, sb->info(), fields);
  sb->detach();
}

TEST(SdkContract, SandboxMetricsAnswer) {
  FakeServer server;
  Json sandbox = documentOf("Sandbox");
  sandbox["id"] = "0123456789abcdef";
  server.json("GET", kSb, 200, sandbox);
  Json doc = documentOf("SandboxMetrics");
  server.json("GET", kSb + "/metrics", 200, doc);
  auto sb = Sandbox::connect("0123456789abcdef", to(server));
  ASSERT_TRUE(sb) << sb.error().message();
  auto m = sb->metrics();
  ASSERT_TRUE(m) << m.error().message();
  auto opt = [](const std::optional<uint64_t>& v) { return v ? Json(*v) : Json(); };
  checkAnswer("SandboxMetrics", doc, *m,
              Fields<SandboxMetrics>{
                  {"sandbox_id", [](auto& x) { return Json(x.sandbox_id); }},
                  {"cpu_seconds", [](auto& x) { return Json(x.cpu_seconds); }},
                  {"memory_bytes", [](auto& x) { return Json(x.memory_bytes); }},
                  {"memory_peak_bytes", [](auto& x) { return Json(x.memory_peak_bytes); }},
                  {"memory_limit_bytes", [&](auto& x) { return opt(x.memory_limit_bytes); }},
                  {"pids", [](auto& x) { return Json(x.pids); }},
                  {"pids_limit", [&](auto& x) { return opt(x.pids_limit); }},
                  {"disk_bytes", [](auto& x) { return Json(x.disk_bytes); }},
                  {"disk_limit_bytes", [&](auto& x) { return opt(x.disk_limit_bytes); }},
                  {"oom_kills", [](auto& x) { return Json(x.oom_kills); }},
                  {"executions", [](auto& x) { return Json(x.executions); }},
                  {"uptime_s", [](auto& x) { return Json(x.uptime_s); }},
                  {"sampled_at", [](auto& x) { return Json(x.sampled_at); }},
              });
  // null limits: unlimited.
  doc["memory_limit_bytes"] = nullptr;
  server.json("GET", kSb + "/metrics", 200, doc);
  auto unlimited = sb->metrics();
  ASSERT_TRUE(unlimited) << unlimited.error().message();
  EXPECT_FALSE(unlimited->memory_limit_bytes.has_value());
  EXPECT_TRUE(unlimited->pids_limit.has_value());
  sb->detach();
}

TEST(SdkContract, CommandFileEntryAndTransferAnswers) {
  FakeServer server;
  Json sandbox = documentOf("Sandbox");
  sandbox["id"] = "0123456789abcdef";
  server.json("GET", kSb, 200, sandbox);
  const Json command = documentOf("Command");
  server.json("GET", kSb + "/commands", 200, {{"commands", {command}}});
  const Json entry = documentOf("FileEntry");
  server.json("GET", kSb + "/files/list", 200, {{"path", "/home/user"}, {"entries", {entry}}});
  const Json transfer = documentOf("Transfer");
  server.json("GET", kSb + "/transfers", 200, {{"transfers", {transfer}}});
  auto sb = Sandbox::connect("0123456789abcdef", to(server));
  ASSERT_TRUE(sb) << sb.error().message();

  auto commands = sb->commands().list();
  ASSERT_TRUE(commands && commands->size() == 1);
  checkAnswer("Command", command, commands->front(),
              Fields<CommandInfo>{
                  {"command_id", [](auto& c) { return Json(c.command_id); }},
                  {"argv", [](auto& c) { return Json(c.argv); }},
                  {"pid", [](auto& c) { return Json(c.pid); }},
                  {"state", [](auto& c) { return Json(c.state); }},
                  {"background", [](auto& c) { return Json(c.background); }},
                  {"started_at", [](auto& c) { return Json(c.started_at); }},
                  {"exit_code", [](auto& c) { return c.exit_code ? Json(*c.exit_code) : Json(); }},
                  {"signal", [](auto& c) { return c.signal ? Json(*c.signal) : Json(); }},
              });

  auto entries = sb->files().list("/home/user");
  ASSERT_TRUE(entries && entries->size() == 1);
  checkAnswer("FileEntry", entry, entries->front(),
              Fields<EntryInfo>{
                  {"name", [](auto& e) { return Json(e.name); }},
                  {"path", [](auto& e) { return Json(e.path); }},
                  {"type", [](auto& e) { return Json(e.type); }},
                  {"size", [](auto& e) { return Json(e.size); }},
                  {"mode", [](auto& e) { return Json(e.mode); }},
                  {"mtime_ms", [](auto& e) { return Json(e.mtime_ms); }},
              });

  auto transfers = sb->listTransfers();
  ASSERT_TRUE(transfers && transfers->size() == 1);
  checkAnswer("Transfer", transfer, transfers->front(),
              Fields<TransferRecord>{
                  {"id", [](auto& t) { return Json(t.id); }},
                  {"direction", [](auto& t) { return Json(t.direction); }},
                  {"plugin", [](auto& t) { return Json(t.plugin); }},
                  {"location", [](auto& t) { return Json(t.location); }},
                  {"sandbox_path", [](auto& t) { return Json(t.sandbox_path); }},
                  {"files", [](auto& t) { return Json(t.files); }},
                  {"dirs", [](auto& t) { return Json(t.dirs); }},
                  {"links", [](auto& t) { return Json(t.links); }},
                  {"bytes", [](auto& t) { return Json(t.bytes); }},
                  {"archive_bytes", [](auto& t) { return Json(t.archive_bytes); }},
                  {"sha256", [](auto& t) { return Json(t.sha256); }},
                  {"ms", [](auto& t) { return Json(t.ms); }},
                  {"status", [](auto& t) { return Json(t.status); }},
                  {"error", [](auto& t) { return Json(t.error); }},
                  {"review", [](auto& t) { return reviewJson(t.review); }},
              });
  sb->detach();
}

// Every key sent in `sent` is a property of `schema_name` (or pending); every property is sent
// by some option, or is listed in `unused`.
void checkRequest(const std::string& schema_name, const std::vector<RecordedRequest>& sent,
                  const std::set<std::string>& unused = {}) {
  const Json& props = schema(schema_name);
  std::set<std::string> keys;
  for (const auto& r : sent) {
    const Json body = r.json();  // items() refers into it: it must outlive the loop
    for (const auto& [key, _] : body.items()) keys.insert(key);
  }
  for (const auto& key : keys)
    EXPECT_TRUE(props.contains(key) ||
                (kPending.contains(schema_name) && kPending.at(schema_name).contains(key)))
        << schema_name << ": the C++ SDK sends '" << key
        << "', which openapi.json does not describe";
  for (const auto& [prop, _] : props.items())
    EXPECT_TRUE(keys.contains(prop) || unused.contains(prop))
        << schema_name << ": openapi.json describes '" << prop
        << "', which no C++ SDK option sends";
}

std::vector<RecordedRequest> sentTo(const FakeServer& server, const std::string& method,
                                    const std::string& path) {
  std::vector<RecordedRequest> out;
  for (auto& r : server.requests())
    if (r.method == method && r.path == path) out.push_back(r);
  return out;
}

TEST(SdkContract, Requests) {
  FakeServer server;
  Json sandbox = documentOf("Sandbox");
  sandbox["id"] = "0123456789abcdef";
  server.json("POST", "/v1/sandboxes", 201, sandbox);
  server.json("DELETE", kSb, 204, nullptr);
  server.on("POST", kSb + "/code", [](const RecordedRequest&, testing::Responder& r) {
    r.send(200,
           R"({"type":"end","status":"ok"})"
           "\n",
           "application/x-ndjson");
  });
  server.on("POST", kSb + "/commands", [](const RecordedRequest& req, testing::Responder& r) {
    if (req.json().value("background", false))
      r.json(201, {{"command_id", "c1"}, {"pid", 2}});
    else
      r.send(200,
             R"({"type":"exit","exit_code":0,"signal":0})"
             "\n",
             "application/x-ndjson");
  });
  auto sb = Sandbox::create({.profile = "p",
                             .language = "python",
                             .name = "n",
                             .env = {{"A", "b"}},
                             .metadata = {{"k", "v"}},
                             .keep_alive_s = 60,
                             .lifetime_s = 120,
                             .persistent = true,
                             .mounts = {{.source = "hostdir:d"}},
                             .isolation = "gvisor",
                             .connection = to(server)});
  ASSERT_TRUE(sb) << sb.error().message();
  checkRequest("SandboxSpec", sentTo(server, "POST", "/v1/sandboxes"));

  ASSERT_TRUE(sb->runCode("1", {.language = "python", .context_id = "c", .timeout_s = 5}));
  // The C++ SDK always reads a run as events, and has no per-run environment (the contract's
  // `env`, which the TypeScript and Python SDKs send) yet.
  checkRequest("CodeSpec", sentTo(server, "POST", kSb + "/code"), {"stream", "env"});

  ASSERT_TRUE(sb->commands().run(
      "echo", {.env = {{"A", "b"}}, .cwd = "/tmp", .stdin_data = "in", .timeout_s = 5}));
  ASSERT_TRUE(sb->commands().start(std::vector<std::string>{"cat"}));
  // Bytes for stdin go as text (stdin); every command is read as events.
  checkRequest("CommandSpec", sentTo(server, "POST", kSb + "/commands"),
               {"stdin_base64", "stream"});
}

}  // namespace
}  // namespace airlock::sdk
