// The C++ client SDK against a fake supervisor: what each call sends, how answers and NDJSON
// events become Executions and CommandResults, the typed error kinds, and RAII ownership.
#include <gtest/gtest.h>

#include "airlock/client/http.h"
#include "airlock/client/sandbox.h"
#include "client_fake_server.h"

namespace airlock::sdk {
namespace {

using testing::FakeServer;
using testing::RecordedRequest;
using testing::Responder;

Json sandboxDoc(const std::string& id, const std::string& name = "") {
  return {{"id", id},
          {"name", name},
          {"tenant", "default"},
          {"profile", "default"},
          {"language", "python"},
          {"state", "running"},
          {"metadata", {{"user", "u1"}}},
          {"keep_alive_s", 300},
          {"created_at", 1795000000000}};
}

ConnectionOptions to(const FakeServer& server) { return {server.url(), ""}; }

// A fake supervisor holding one sandbox "0123456789abcdef" and counting its deletions.
struct OneSandbox {
  FakeServer server;
  std::atomic<int> deletes = 0;
  OneSandbox() {
    server.json("POST", "/v1/sandboxes", 201, sandboxDoc("0123456789abcdef", "web"));
    server.json("GET", "/v1/sandboxes/0123456789abcdef", 200,
                sandboxDoc("0123456789abcdef", "web"));
    server.json("GET", "/v1/sandboxes/web", 200, sandboxDoc("0123456789abcdef", "web"));
    server.on("DELETE", "/v1/sandboxes/0123456789abcdef",
              [this](const RecordedRequest&, Responder& r) {
                ++deletes;
                r.send(204, "");
              });
  }
};

TEST(SdkSandbox, CreateSendsTheOptionsAndOwnsTheSandbox) {
  OneSandbox fake;
  {
    SandboxOptions o;
    o.language = "python";
    o.name = "web";
    o.env = {{"MPLBACKEND", "Agg"}};
    o.metadata = {{"user", "u1"}};
    o.keep_alive_s = 600;
    o.connection = to(fake.server);
    auto sb = Sandbox::create(o);
    ASSERT_TRUE(sb) << sb.error().message();
    EXPECT_EQ(sb->id(), "0123456789abcdef");
    EXPECT_EQ(sb->info().name, "web");
    EXPECT_EQ(sb->info().metadata.at("user"), "u1");
    EXPECT_TRUE(sb->owned());
    auto body = fake.server.requests().front().json();
    EXPECT_EQ(body, (Json{{"language", "python"},
                          {"name", "web"},
                          {"env", {{"MPLBACKEND", "Agg"}}},
                          {"metadata", {{"user", "u1"}}},
                          {"keep_alive_s", 600}}));
    Sandbox moved = std::move(*sb);  // ownership moves, no early delete
    EXPECT_EQ(fake.deletes, 0);
  }
  EXPECT_EQ(fake.deletes, 1) << "an owned sandbox is destroyed when its object goes";
}

TEST(SdkSandbox, ConnectAndDetachDoNotDestroy) {
  OneSandbox fake;
  {
    auto sb = Sandbox::connect("web", to(fake.server));
    ASSERT_TRUE(sb) << sb.error().message();
    EXPECT_FALSE(sb->owned());
    auto made = Sandbox::create({.connection = to(fake.server)});
    ASSERT_TRUE(made);
    made->detach();
  }
  EXPECT_EQ(fake.deletes, 0);
}

TEST(SdkSandbox, ListFiltersByMetadata) {
  FakeServer server;
  server.json("GET", "/v1/sandboxes", 200,
              {{"sandboxes", {sandboxDoc("00000000000000a1"), sandboxDoc("00000000000000a2")}}});
  auto list = Sandbox::list({{"user", "u 1"}}, to(server));
  ASSERT_TRUE(list) << list.error().message();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[1].id, "00000000000000a2");
  EXPECT_EQ(server.last().target, "/v1/sandboxes?metadata.user=u%201");
}

TEST(SdkErrors, KindsFollowTheApiCodes) {
  FakeServer server;
  server.on("GET", "/v1/sandboxes/gone", [](const RecordedRequest&, Responder& r) {
    r.error(404, "not_found", "sandbox 'gone' not found");
  });
  server.on("POST", "/v1/sandboxes", [](const RecordedRequest&, Responder& r) {
    r.error(429, "too_many_requests", "tenant 'default' has 8 sandboxes, its limit");
  });
  auto missing = Sandbox::connect("gone", to(server));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind(), ErrorKind::kNotFound);
  EXPECT_EQ(missing.error().httpStatus(), 404);
  EXPECT_EQ(missing.error().code(), "not_found");
  EXPECT_EQ(missing.error().message(), "sandbox 'gone' not found (HTTP 404 not_found)");
  auto quota = Sandbox::create({.connection = to(server)});
  ASSERT_FALSE(quota);
  EXPECT_EQ(quota.error().kind(), ErrorKind::kQuota);
  EXPECT_EQ(kindName(quota.error().kind()), "too_many_requests");
  EXPECT_NE(quota.error().message().find("create sandbox: tenant 'default' has 8"),
            std::string::npos);

  auto unreachable = Sandbox::connect("x", {"unix:///nonexistent/airlock.sock", ""});
  ASSERT_FALSE(unreachable);
  EXPECT_EQ(unreachable.error().kind(), ErrorKind::kConnection);
  auto bad_url = Sandbox::connect("x", {"ftp://x", ""});
  ASSERT_FALSE(bad_url);
  EXPECT_EQ(bad_url.error().kind(), ErrorKind::kInvalidArgument);
}

TEST(SdkErrors, ReviewDenialCarriesReviewerRuleAndReason) {
  OneSandbox fake;
  fake.server.on(
      "POST", "/v1/sandboxes/0123456789abcdef/code", [](const RecordedRequest&, Responder& r) {
        r.json(403,
               {{"error",
                 {{"code", "denied_by_review"},
                  {"message", "denied by reviewer 'patterns', rule 'py-subprocess': no processes"},
                  {"review",
                   {{"verdict", "deny"},
                    {"reviewer", "patterns"},
                    {"rule", "py-subprocess"},
                    {"reason", "no processes"},
                    {"duration_ms", 0.2},
                    {"cached", false}}}}}});
      });
  auto sb = Sandbox::connect("web", to(fake.server));
  ASSERT_TRUE(sb);
  auto ex = sb->runCode("import subprocess");
  ASSERT_FALSE(ex);
  EXPECT_EQ(ex.error().kind(), ErrorKind::kDeniedByReview);
  ASSERT_TRUE(ex.error().review());
  EXPECT_EQ(ex.error().review()->reviewer, "patterns");
  EXPECT_EQ(ex.error().review()->rule, "py-subprocess");
  EXPECT_EQ(ex.error().review()->reason, "no processes");
  EXPECT_EQ(ex.error().review()->verdict, "deny");
}

// An execution's audit summary as the supervisor sends it in exit/end events (docs/api.md).
constexpr const char* kAuditJson =
    R"j("audit":{"execution":"9b1e0c2d4f6a8e01","processes_started":1,)j"
    R"j("processes":[{"ns_pid":5,"path":"/usr/bin/python3","argv":["python3","-c"]}],)j"
    R"j("connections_allowed":0,"connections_denied":1,"connections":[{"verdict":"deny",)j"
    R"j("protocol":"tcp","address":"10.255.255.1","port":80,"rule":"protected:10.0.0.0/8",)j"
    R"j("rule_text":"protected range 10.0.0.0/8 (private)","count":1}],"bytes_sent":0,)j"
    R"j("bytes_received":0,"events_dropped":0,"fail_closed":false,"failed":false,)j"
    R"j("first_denial":"connection to 10.255.255.1:80/tcp refused by protected range"})j";

TEST(SdkCode, EventsBecomeAnExecutionAndLiveCallbacks) {
  OneSandbox fake;
  fake.server.on(
      "POST", "/v1/sandboxes/0123456789abcdef/code", [](const RecordedRequest&, Responder& r) {
        r.beginChunked(200);
        r.chunk(R"({"type":"stdout","data":"hello\n"})"
                "\n");
        r.chunk(R"({"type":"stderr","data_base64":"/w=="})"
                "\n");
        r.chunk(R"({"type":"display","data":{"image/png":"iVBORw0KGgo=","text/plain":"<Figure>"}})"
                "\n");
        r.chunk(R"({"type":"result","data":{"text/plain":"42"}})"
                "\n");
        r.chunk(
            R"({"type":"end","status":"ok","duration_ms":12.5,"context_id":"python","context_restarted":false,)"
            R"("review":{"verdict":"allow","reviewer":null,"rule":null,"reason":null},)" +
            std::string(kAuditJson) + "}\n");
        r.endChunked();
      });
  auto sb = Sandbox::connect("web", to(fake.server));
  ASSERT_TRUE(sb);
  std::string live;
  int results = 0;
  RunCodeOptions o;
  o.language = "python";
  o.timeout_s = 5;
  o.on_stdout = [&](std::string_view s) { live += s; };
  o.on_result = [&](const DisplayData&) { ++results; };
  auto ex = sb->runCode("print('hello')\n41 + 1", o);
  ASSERT_TRUE(ex) << ex.error().message();
  EXPECT_EQ(fake.server.last().json(), (Json{{"code", "print('hello')\n41 + 1"},
                                             {"stream", true},
                                             {"language", "python"},
                                             {"timeout_s", 5.0}}));
  EXPECT_EQ(live, "hello\n");
  EXPECT_EQ(results, 2);
  EXPECT_EQ(ex->stdout_text, "hello\n");
  EXPECT_EQ(ex->stderr_text, "\xff");
  EXPECT_EQ(ex->text(), "42");
  ASSERT_EQ(ex->results.size(), 2u);
  EXPECT_EQ(ex->results[0].png(), "iVBORw0KGgo=");
  EXPECT_FALSE(ex->results[0].is_main_result);
  EXPECT_EQ(ex->status, RunStatus::kOk);
  EXPECT_EQ(ex->context_id, "python");
  ASSERT_TRUE(ex->review);
  EXPECT_EQ(ex->review->verdict, "allow");
  EXPECT_FALSE(ex->error);
  ASSERT_TRUE(ex->audit);
  EXPECT_EQ(ex->audit->execution, "9b1e0c2d4f6a8e01");
  ASSERT_EQ(ex->audit->processes.size(), 1u);
  EXPECT_EQ(ex->audit->processes[0].path, "/usr/bin/python3");
  EXPECT_EQ(ex->audit->processes[0].argv, (std::vector<std::string>{"python3", "-c"}));
  EXPECT_EQ(ex->audit->connections_denied, 1u);
  ASSERT_EQ(ex->audit->connections.size(), 1u);
  EXPECT_FALSE(ex->audit->connections[0].allowed);
  EXPECT_EQ(ex->audit->connections[0].port, 80);
  EXPECT_EQ(ex->audit->connections[0].rule, "protected:10.0.0.0/8");
  EXPECT_EQ(ex->audit->first_denial,
            "connection to 10.255.255.1:80/tcp refused by protected range");
  EXPECT_FALSE(ex->audit->failed);
}

TEST(SdkCode, RaisedErrorIsAnOutcomeAndTimeoutIsAnError) {
  OneSandbox fake;
  std::atomic<int> calls = 0;
  fake.server.on(
      "POST", "/v1/sandboxes/0123456789abcdef/code", [&](const RecordedRequest&, Responder& r) {
        r.beginChunked(200);
        if (calls++ == 0) {
          r.chunk(
              R"({"type":"error","name":"ZeroDivisionError","value":"division by zero","traceback":["Traceback...","ZeroDivisionError: division by zero"]})"
              "\n");
          r.chunk(R"({"type":"end","status":"error","context_id":"python"})"
                  "\n");
        } else {
          r.chunk(R"({"type":"stdout","data":"partial\n"})"
                  "\n");
          r.chunk(R"({"type":"end","status":"timeout","context_restarted":false})"
                  "\n");
        }
        r.endChunked();
      });
  auto sb = Sandbox::connect("web", to(fake.server));
  ASSERT_TRUE(sb);
  auto raised = sb->runCode("1/0");
  ASSERT_TRUE(raised) << raised.error().message();
  ASSERT_TRUE(raised->error);
  EXPECT_EQ(raised->error->name, "ZeroDivisionError");
  EXPECT_EQ(raised->error->traceback.size(), 2u);
  EXPECT_EQ(raised->status, RunStatus::kError);

  std::string live;
  RunCodeOptions o;
  o.on_stdout = [&](std::string_view s) { live += s; };
  auto slow = sb->runCode("while True: pass", o);
  ASSERT_FALSE(slow);
  EXPECT_EQ(slow.error().kind(), ErrorKind::kTimeout);
  EXPECT_NE(slow.error().message().find("keeps its state"), std::string::npos);
  EXPECT_EQ(live, "partial\n");
}

TEST(SdkCode, StreamWithoutEndIsAProtocolError) {
  OneSandbox fake;
  fake.server.on("POST", "/v1/sandboxes/0123456789abcdef/code",
                 [](const RecordedRequest&, Responder& r) {
                   r.beginChunked(200);
                   r.chunk(R"({"type":"stdout","data":"x"})"
                           "\n");
                   r.endChunked();
                 });
  auto sb = Sandbox::connect("web", to(fake.server));
  ASSERT_TRUE(sb);
  auto ex = sb->runCode("x");
  ASSERT_FALSE(ex);
  EXPECT_EQ(ex.error().kind(), ErrorKind::kProtocol);
}

TEST(SdkCommands, RunCollectsOutputAndExitCode) {
  OneSandbox fake;
  fake.server.on(
      "POST", "/v1/sandboxes/0123456789abcdef/commands",
      [](const RecordedRequest& req, Responder& r) {
        r.beginChunked(200);
        r.chunk(R"({"type":"start","command_id":"c1","pid":7})"
                "\n");
        r.chunk(R"({"type":"stdout","data":"a\n"})"
                "\n");
        if (req.json().contains("timeout_s")) {
          r.chunk(
              R"({"type":"exit","exit_code":137,"signal":9,"timed_out":true,"duration_ms":2000})"
              "\n");
        } else {
          r.chunk(R"({"type":"exit","exit_code":3,"signal":0,"timed_out":false,"duration_ms":3.1,)"
                  R"("audit":{"execution":"e2","failed":true,"events_dropped":7},)"
                  R"("error":"the audit lost 7 events"})"
                  "\n");
        }
        r.endChunked();
      });
  auto sb = Sandbox::connect("web", to(fake.server));
  ASSERT_TRUE(sb);
  std::string live;
  CommandOptions o;
  o.env = {{"K", "V"}};
  o.cwd = "/tmp";
  o.stdin_data = "in";
  o.on_stdout = [&](std::string_view s) { live += s; };
  auto r = sb->commands().run("echo a; exit 3", o);
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->command_id, "c1");
  EXPECT_EQ(r->stdout_text, "a\n");
  EXPECT_EQ(live, "a\n");
  ASSERT_TRUE(r->audit);
  EXPECT_EQ(r->audit->execution, "e2");
  EXPECT_TRUE(r->audit->failed);
  EXPECT_EQ(r->audit->events_dropped, 7u);
  EXPECT_EQ(r->error, "the audit lost 7 events");
  EXPECT_EQ(
      fake.server.last().json(),
      (Json{{"cmd", "echo a; exit 3"}, {"env", {{"K", "V"}}}, {"cwd", "/tmp"}, {"stdin", "in"}}));

  auto argv = sb->commands().run(std::vector<std::string>{"ls", "-la"});
  ASSERT_TRUE(argv);
  EXPECT_EQ(fake.server.last().json()["argv"], Json::array({"ls", "-la"}));

  CommandOptions slow;
  slow.timeout_s = 2;
  auto timed_out = sb->commands().run("sleep 9", slow);
  ASSERT_FALSE(timed_out);
  EXPECT_EQ(timed_out.error().kind(), ErrorKind::kTimeout);
  EXPECT_FALSE(sb->commands().run(std::vector<std::string>{}));
}

TEST(SdkCommands, BackgroundHandleWaitsFeedsAndKills) {
  OneSandbox fake;
  const std::string base = "/v1/sandboxes/0123456789abcdef/commands";
  fake.server.json("POST", base, 201, {{"command_id", "c2"}, {"pid", 9}});
  fake.server.on("GET", base + "/c2/events", [](const RecordedRequest&, Responder& r) {
    r.beginChunked(200);
    r.chunk(R"({"type":"stdout","data":"served\n"})"
            "\n");
    r.chunk(R"({"type":"exit","exit_code":0,"signal":15,"timed_out":false})"
            "\n");
    r.endChunked();
  });
  fake.server.json("POST", base + "/c2/stdin", 204, nullptr);
  fake.server.json("POST", base + "/c2/signal", 204, nullptr);
  fake.server.json("DELETE", base + "/c2", 204, nullptr);
  auto sb = Sandbox::connect("web", to(fake.server));
  ASSERT_TRUE(sb);
  auto h = sb->commands().start("python3 -m http.server");
  ASSERT_TRUE(h) << h.error().message();
  EXPECT_EQ(h->id(), "c2");
  EXPECT_EQ(h->pid(), 9);
  EXPECT_EQ(fake.server.last().json()["background"], true);
  ASSERT_TRUE(h->sendStdin("line\n", true));
  EXPECT_EQ(fake.server.last().json(), (Json{{"data", "line\n"}, {"eof", true}}));
  ASSERT_TRUE(h->signal("SIGTERM"));
  EXPECT_EQ(fake.server.last().json(), (Json{{"signal", "SIGTERM"}}));
  auto done = h->wait();
  ASSERT_TRUE(done) << done.error().message();
  EXPECT_EQ(done->stdout_text, "served\n");
  EXPECT_EQ(done->signal, 15);
  EXPECT_EQ(done->command_id, "c2");
  ASSERT_TRUE(h->kill());
  EXPECT_EQ(fake.server.last().method, "DELETE");
}

TEST(SdkFiles, WriteReadListAndTheRest) {
  OneSandbox fake;
  const std::string base = "/v1/sandboxes/0123456789abcdef/files";
  std::string stored;
  fake.server.on("PUT", base, [&](const RecordedRequest& req, Responder& r) {
    stored = req.body;
    r.json(201, {{"path", "/home/user/a.bin"}, {"size", req.body.size()}});
  });
  fake.server.on("GET", base, [&](const RecordedRequest&, Responder& r) {
    r.send(200, stored, "application/octet-stream");
  });
  fake.server.json(
      "GET", base + "/list", 200,
      {{"path", "/home/user"},
       {"entries",
        {{{"name", "a.bin"}, {"type", "file"}, {"size", 4}, {"mode", 420}, {"mtime_ms", 1}},
         {{"name", "d"}, {"type", "dir"}, {"size", 0}}}}});
  fake.server.on("GET", base + "/stat", [](const RecordedRequest& req, Responder& r) {
    if (req.target.find("missing") != std::string::npos)
      return r.error(404, "not_found", "no such file '/home/user/missing'");
    r.json(200, {{"path", "/home/user/a.bin"}, {"name", "a.bin"}, {"type", "file"}, {"size", 4}});
  });
  fake.server.json("POST", base + "/mkdir", 201, {{"path", "/home/user/d"}});
  fake.server.json("POST", base + "/remove", 204, nullptr);
  fake.server.json("POST", base + "/rename", 204, nullptr);
  auto sb = Sandbox::connect("web", to(fake.server));
  ASSERT_TRUE(sb);
  const std::string bytes("\x00\xff\x01z", 4);
  ASSERT_TRUE(sb->files().write("/home/user/a b.bin", bytes, 0600));
  EXPECT_EQ(fake.server.last().target, base + "?path=%2Fhome%2Fuser%2Fa%20b.bin&mode=0600");
  auto read = sb->files().read("/home/user/a.bin");
  ASSERT_TRUE(read) << read.error().message();
  EXPECT_EQ(*read, bytes);
  auto list = sb->files().list("/home/user");
  ASSERT_TRUE(list);
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].path, "/home/user/a.bin");
  EXPECT_EQ((*list)[0].mode, 0644u);
  EXPECT_EQ((*list)[1].type, "dir");
  EXPECT_EQ(sb->files().exists("/home/user/a.bin").value_or(false), true);
  auto missing = sb->files().exists("/home/user/missing");
  ASSERT_TRUE(missing);
  EXPECT_FALSE(*missing);
  ASSERT_TRUE(sb->files().mkdir("/home/user/d"));
  EXPECT_EQ(fake.server.last().json(), (Json{{"path", "/home/user/d"}, {"parents", true}}));
  ASSERT_TRUE(sb->files().remove("/home/user/d", true));
  EXPECT_EQ(fake.server.last().json(), (Json{{"path", "/home/user/d"}, {"recursive", true}}));
  ASSERT_TRUE(sb->files().rename("/home/user/a", "/home/user/b"));
  EXPECT_EQ(fake.server.last().json(), (Json{{"from", "/home/user/a"}, {"to", "/home/user/b"}}));
}

TEST(SdkSandbox, SetTimeoutAndKill) {
  OneSandbox fake;
  Json extended = sandboxDoc("0123456789abcdef", "web");
  extended["keep_alive_s"] = 900;
  fake.server.json("POST", "/v1/sandboxes/0123456789abcdef/keepalive", 200, extended);
  auto sb = Sandbox::create({.connection = to(fake.server)});
  ASSERT_TRUE(sb);
  ASSERT_TRUE(sb->setTimeout(900));
  EXPECT_EQ(fake.server.last().json(), (Json{{"keep_alive_s", 900}}));
  EXPECT_EQ(sb->info().keep_alive_s, 900);
  ASSERT_TRUE(sb->kill());
  EXPECT_EQ(fake.deletes, 1);
  EXPECT_FALSE(sb->owned()) << "killed: the destructor must not delete again";
}

}  // namespace
}  // namespace airlock::sdk
