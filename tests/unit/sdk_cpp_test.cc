// The C++ client SDK against a fake supervisor: what each call sends, how answers and NDJSON
// events become Executions and CommandResults, the typed error kinds, and RAII ownership.
#include <gtest/gtest.h>

#include "airlock/client/http.h"
#include "airlock/client/sandbox.h"
#include "client_fake_server.h"
#include "test_support.h"

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

TEST(SdkSandbox, ListBehindAFleetProxyAsksEveryNode) {
  FakeServer server;
  // The proxy cannot merge the nodes' lists: it says so, and names the nodes at /v1/fleet.
  server.on("GET", "/v1/sandboxes", [](const RecordedRequest& req, Responder& r) {
    if (req.target.ends_with("node=n1"))
      return r.json(200, {{"sandboxes", {sandboxDoc("00000000000000a1")}}});
    if (req.target.ends_with("node=n2"))
      return r.json(
          200, {{"sandboxes", {sandboxDoc("00000000000000b1"), sandboxDoc("00000000000000b2")}}});
    r.error(400, "bad_request",
            "this fleet lists per node: add ?node=NAME (GET /v1/fleet names the nodes)");
  });
  server.json("GET", "/v1/fleet", 200, {{"nodes", {"n1", "n2"}}});
  auto all = Sandbox::list({{"user", "u1"}}, to(server));
  ASSERT_TRUE(all) << all.error().message();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[2].id, "00000000000000b2");
  EXPECT_EQ(server.last().target, "/v1/sandboxes?metadata.user=u1&node=n2");
  auto one = Sandbox::list({}, to(server), "n1");
  ASSERT_TRUE(one) << one.error().message();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ(server.last().target, "/v1/sandboxes?node=n1");
}

// POST /v1/sandboxes as the supervisor answers it: the requested mounts echoed with their
// defaults filled (path /mnt/ROOT[/sub/dir], writable false); a path outside /mnt is a 400.
void answerCreateWithMounts(const RecordedRequest& req, Responder& r) {
  Json body = req.json();
  Json mounts = Json::array();
  if (body.is_object() && body.contains("mounts"))
    for (const auto& m : body["mounts"]) {
      std::string source = m.value("source", std::string());
      std::string path = m.value("path", "/mnt/" + source.substr(source.find(':') + 1));
      if (!path.starts_with("/mnt/"))
        return r.error(400, "bad_request", "mounts: path '" + path + "' is not under /mnt");
      mounts.push_back(
          Json{{"source", source}, {"path", path}, {"writable", m.value("writable", false)}});
    }
  Json doc = sandboxDoc("0123456789abcdef", "web");
  doc["mounts"] = mounts;
  r.json(201, doc);
}

TEST(SdkSandbox, CreateSendsMountsAndReadsThemBack) {
  FakeServer server;
  server.on("POST", "/v1/sandboxes", answerCreateWithMounts);
  server.on("DELETE", "/v1/sandboxes/0123456789abcdef",
            [](const RecordedRequest&, Responder& r) { r.send(204, ""); });
  SandboxOptions o;
  o.name = "web";
  o.persistent = true;
  o.mounts = {{.source = "hostdir:datasets/imagenet", .path = "/mnt/imagenet", .writable = true},
              {.source = "hostdir:models"}};
  o.connection = to(server);
  auto sb = Sandbox::create(o);
  ASSERT_TRUE(sb) << sb.error().message();
  EXPECT_EQ(server.last().json(),
            (Json{{"name", "web"},
                  {"persistent", true},
                  {"mounts", Json::array({Json{{"source", "hostdir:datasets/imagenet"},
                                               {"path", "/mnt/imagenet"},
                                               {"writable", true}},
                                          Json{{"source", "hostdir:models"}}})}}));
  const auto& mounts = sb->info().mounts;
  ASSERT_EQ(mounts.size(), 2u);
  EXPECT_EQ(mounts[0].source, "hostdir:datasets/imagenet");
  EXPECT_EQ(mounts[0].path, "/mnt/imagenet");
  EXPECT_TRUE(mounts[0].writable);
  EXPECT_EQ(mounts[1].source, "hostdir:models");
  EXPECT_EQ(mounts[1].path, "/mnt/models") << "the default path, as the supervisor filled it";
  EXPECT_FALSE(mounts[1].writable);

  auto bare = Sandbox::create({.connection = to(server)});
  ASSERT_TRUE(bare) << bare.error().message();
  EXPECT_EQ(server.last().json(), Json::object()) << "no mounts field without mounts";
  EXPECT_TRUE(bare->info().mounts.empty());

  SandboxOptions bad;
  bad.mounts = {{.source = "hostdir:data", .path = "/etc/data"}};
  bad.connection = to(server);
  auto refused = Sandbox::create(bad);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind(), ErrorKind::kBadRequest);
  EXPECT_NE(refused.error().message().find("not under /mnt"), std::string::npos);
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
  EXPECT_FALSE(ex->restart) << "a run of this supervisor's is no recovered run";
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

TEST(SdkCode, ARunTakenOverAfterARestartIsFetchedWithWhatWasHeld) {
  OneSandbox fake;
  fake.server.on("GET", "/v1/sandboxes/0123456789abcdef/contexts/python-2/runs/last/events",
                 [](const RecordedRequest&, Responder& r) {
                   r.beginChunked(200);
                   r.chunk(R"({"type":"supervisor_restart","run_id":"r4","held_bytes":120,)"
                           R"("dropped_bytes":7})"
                           "\n");
                   r.chunk(R"({"type":"stdout","data":"slept 42\n"})"
                           "\n");
                   r.chunk(R"({"type":"result","data":{"text/plain":"42"}})"
                           "\n");
                   r.chunk(R"({"type":"end","status":"ok","context_id":"python-2"})"
                           "\n");
                   r.endChunked();
                 });
  fake.server.json("GET", "/v1/sandboxes/0123456789abcdef/contexts/python/runs/r1/events", 404,
                   {{"error", {{"code", "not_found"}, {"message", "no run r1 taken over"}}}});
  auto sb = Sandbox::connect("web", to(fake.server));
  ASSERT_TRUE(sb);
  std::string live;
  RunCodeOptions o;
  o.on_stdout = [&](std::string_view s) { live += s; };
  auto ex = sb->recoveredRun("python-2", "last", o);
  ASSERT_TRUE(ex) << ex.error().message();
  EXPECT_EQ(fake.server.last().method, "GET");
  ASSERT_TRUE(ex->restart);
  EXPECT_EQ(ex->restart->run_id, "r4");
  EXPECT_EQ(ex->restart->held_bytes, 120u);
  EXPECT_EQ(ex->restart->dropped_bytes, 7u);
  EXPECT_EQ(live, "slept 42\n");
  EXPECT_EQ(ex->stdout_text, "slept 42\n");
  EXPECT_EQ(ex->text(), "42");
  EXPECT_EQ(ex->context_id, "python-2");
  // A run that was not taken over: a typed error.
  auto none = sb->recoveredRun("python", "r1");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().kind(), ErrorKind::kNotFound);
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

// A transfer record as the supervisor sends it (docs/transfer.md, The record).
Json transferDoc(const std::string& status = "ok", const Json& error = nullptr) {
  return {{"id", "tr-1"},
          {"direction", "in"},
          {"plugin", "http"},
          {"location", "https://data.example.com/iris.tar.gz?..."},
          {"sandbox_path", "/home/user/data"},
          {"files", 3},
          {"dirs", 1},
          {"links", 0},
          {"bytes", 4096},
          {"archive_bytes", 812},
          {"sha256", status == "ok" ? Json(std::string(64, 'a')) : Json(nullptr)},
          {"ms", 41.5},
          {"status", status},
          {"error", error}};
}

std::string transferEvent(Json record) {
  record["type"] = "transfer";
  return record.dump() + "\n";
}

TEST(SdkTransfers, TransferInStreamsProgressThenAnswersTheRecord) {
  OneSandbox fake;
  fake.server.on("POST", "/v1/sandboxes/0123456789abcdef/transfers",
                 [](const RecordedRequest&, Responder& r) {
                   r.beginChunked(200);
                   r.chunk(R"({"type":"progress","transfer_id":"tr-1","bytes":400,"rate_bps":1600})"
                           "\n");
                   r.chunk(R"({"type":"progress","transfer_id":"tr-1","bytes":812,"rate_bps":1700})"
                           "\n");
                   r.chunk(transferEvent(transferDoc()));
                   r.endChunked();
                 });
  auto sb = Sandbox::connect("web", to(fake.server));
  ASSERT_TRUE(sb);
  std::vector<TransferProgress> seen;
  TransferOptions o;
  o.on_progress = [&](const TransferProgress& p) { seen.push_back(p); };
  auto t = sb->transferIn("https://data.example.com/iris.tar.gz?sig=x", "/home/user/data", o);
  ASSERT_TRUE(t) << t.error().message();
  EXPECT_EQ(fake.server.last().json(),
            (Json{{"direction", "in"},
                  {"source", "https://data.example.com/iris.tar.gz?sig=x"},
                  {"path", "/home/user/data"}}));
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].transfer_id, "tr-1");
  EXPECT_EQ(seen[0].bytes, 400u);
  EXPECT_EQ(seen[1].rate_bps, 1700u);
  EXPECT_EQ(t->id, "tr-1");
  EXPECT_EQ(t->direction, "in");
  EXPECT_EQ(t->plugin, "http");
  EXPECT_EQ(t->sandbox_path, "/home/user/data");
  EXPECT_EQ(t->files, 3u);
  EXPECT_EQ(t->dirs, 1u);
  EXPECT_EQ(t->bytes, 4096u);
  EXPECT_EQ(t->archive_bytes, 812u);
  EXPECT_EQ(t->sha256, std::string(64, 'a'));
  EXPECT_DOUBLE_EQ(t->ms, 41.5);
  EXPECT_TRUE(t->ok());
  EXPECT_EQ(t->error, "");

  // An answer that is one JSON document (not NDJSON) is read as one event as well.
  Json out = transferDoc();
  out["direction"] = "out";
  out["type"] = "transfer";
  fake.server.json("POST", "/v1/sandboxes/0123456789abcdef/transfers", 200, out);
  auto sent = sb->transferOut("hostdir:results/run.tar.gz", "/home/user/results");
  ASSERT_TRUE(sent) << sent.error().message();
  EXPECT_EQ(fake.server.last().json(), (Json{{"direction", "out"},
                                             {"dest", "hostdir:results/run.tar.gz"},
                                             {"path", "/home/user/results"}}));
  EXPECT_EQ(sent->direction, "out");
}

TEST(SdkTransfers, ARecordThatIsNotOkIsTransferFailedWithItsErrorText) {
  OneSandbox fake;
  std::string status, error;
  fake.server.on(
      "POST", "/v1/sandboxes/0123456789abcdef/transfers",
      [&](const RecordedRequest&, Responder& r) {
        r.beginChunked(200);
        r.chunk(transferEvent(transferDoc(status, error.empty() ? Json(nullptr) : Json(error))));
        r.endChunked();
      });
  auto sb = Sandbox::connect("web", to(fake.server));
  ASSERT_TRUE(sb);
  for (auto [s, e] : std::vector<std::pair<std::string, std::string>>{
           {"denied", "URL 'https://evil.example/x.tgz' matches no transfer.http.allow pattern"},
           {"error", "entry '../x': a '..' component (it would leave the target)"},
           {"cancelled", ""}}) {
    status = s;
    error = e;
    auto t = sb->transferIn("https://evil.example/x.tgz", "/home/user/x");
    ASSERT_FALSE(t) << s;
    EXPECT_EQ(t.error().kind(), ErrorKind::kTransferFailed);
    EXPECT_EQ(kindName(t.error().kind()), "transfer_failed");
    EXPECT_EQ(t.error().code(), s);
    EXPECT_EQ(t.error().message(), "transfer in 'https://evil.example/x.tgz' into /home/user/x: " +
                                       s + ": " + (e.empty() ? "no reason given" : e));
  }
}

TEST(SdkTransfers, RefusalsAndAStreamWithoutItsRecord) {
  OneSandbox fake;
  bool refuse = true;
  fake.server.on("POST", "/v1/sandboxes/0123456789abcdef/transfers",
                 [&](const RecordedRequest&, Responder& r) {
                   if (refuse)
                     return r.error(400, "bad_request", "field 'path': must be an absolute path");
                   r.beginChunked(200);
                   r.chunk(R"({"type":"progress","transfer_id":"tr-1","bytes":1,"rate_bps":1})"
                           "\n");
                   r.endChunked();
                 });
  auto sb = Sandbox::connect("web", to(fake.server));
  ASSERT_TRUE(sb);
  auto bad = sb->transferIn("hostdir:data/x", "x");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind(), ErrorKind::kBadRequest);
  EXPECT_EQ(bad.error().message(),
            "transfer in 'hostdir:data/x' into x: field 'path': must be an absolute path (HTTP "
            "400 bad_request)");
  refuse = false;
  auto cut = sb->transferIn("hostdir:data/x", "/home/user/x");
  ASSERT_FALSE(cut);
  EXPECT_EQ(cut.error().kind(), ErrorKind::kProtocol);
  const size_t before = fake.server.requests().size();
  auto empty = sb->transferOut("", "/home/user/x");
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(fake.server.requests().size(), before) << "refused before sending";
}

TEST(SdkTransfers, ListAndCancel) {
  OneSandbox fake;
  const std::string base = "/v1/sandboxes/0123456789abcdef/transfers";
  Json running = transferDoc("running");
  Json done = transferDoc();
  done["id"] = "tr-2";
  fake.server.json("GET", base, 200, {{"transfers", {running, done, "junk"}}});
  fake.server.json("DELETE", base + "/tr-1", 204, nullptr);
  fake.server.on("DELETE", base + "/tr-2", [](const RecordedRequest&, Responder& r) {
    r.error(409, "conflict", "transfer 'tr-2' already ended (ok)");
  });
  fake.server.on("DELETE", base + "/tr-5",
                 [](const RecordedRequest&, Responder& r) { r.error(500, "internal", "boom"); });
  auto sb = Sandbox::connect("web", to(fake.server));
  ASSERT_TRUE(sb);
  auto list = sb->listTransfers();
  ASSERT_TRUE(list) << list.error().message();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].status, "running");
  EXPECT_EQ((*list)[1].id, "tr-2");
  EXPECT_EQ(sb->cancelTransfer("tr-1").value_or(false), true);
  EXPECT_EQ(fake.server.last().method, "DELETE");
  EXPECT_EQ(sb->cancelTransfer("tr-2").value_or(true), false) << "already ended";
  EXPECT_EQ(sb->cancelTransfer("tr-9").value_or(true), false) << "unknown (404)";
  EXPECT_EQ(fake.server.last().target, base + "/tr-9");
  auto broken = sb->cancelTransfer("tr-5");
  ASSERT_FALSE(broken);
  EXPECT_EQ(broken.error().kind(), ErrorKind::kServer);
}

TEST(SdkTransfers, ArchivesUpAndDown) {
  OneSandbox fake;
  const std::string base = "/v1/sandboxes/0123456789abcdef/archive";
  std::string stored;
  fake.server.on("PUT", base, [&](const RecordedRequest& req, Responder& r) {
    if (req.body == "evil")
      return r.error(400, "bad_request",
                     "archive into /home/user/x: entry 'lnk': a symlink to '/etc/passwd', "
                     "outside the target");
    stored = req.body;
    Json rec = transferDoc();
    rec.erase("id");
    rec["plugin"] = "upload";
    rec["archive_bytes"] = req.body.size();
    r.json(201, rec);
  });
  fake.server.on("GET", base, [&](const RecordedRequest&, Responder& r) {
    r.send(200, stored, "application/octet-stream");
  });
  auto sb = Sandbox::connect("web", to(fake.server));
  ASSERT_TRUE(sb);
  const std::string bytes("\x1f\x8b\x00\xff tar", 8);
  auto up = sb->uploadArchive("/home/user/a b", bytes);
  ASSERT_TRUE(up) << up.error().message();
  EXPECT_EQ(fake.server.last().target, base + "?path=%2Fhome%2Fuser%2Fa%20b");
  EXPECT_EQ(fake.server.last().header("content-length"), "8");
  EXPECT_EQ(stored, bytes);
  EXPECT_EQ(up->plugin, "upload");
  EXPECT_EQ(up->archive_bytes, 8u);
  auto refused = sb->uploadArchive("/home/user/x", "evil");
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind(), ErrorKind::kBadRequest);
  EXPECT_NE(refused.error().message().find("outside the target"), std::string::npos);

  testing::TempDir dir;
  dir.write("in.tar.gz", std::string(300000, 'z'));
  auto from_file = sb->uploadArchiveFrom(dir.file("in.tar.gz"), "/home/user/big");
  ASSERT_TRUE(from_file) << from_file.error().message();
  EXPECT_EQ(stored, std::string(300000, 'z'));
  EXPECT_EQ(sb->uploadArchiveFrom(dir.file("missing"), "/home/user/x").error().kind(),
            ErrorKind::kInvalidArgument);

  auto down = sb->downloadArchive("/home/user/big", "zip");
  ASSERT_TRUE(down) << down.error().message();
  EXPECT_EQ(fake.server.last().target, base + "?path=%2Fhome%2Fuser%2Fbig&format=zip");
  EXPECT_EQ(*down, stored);
  auto to_file = sb->downloadArchiveTo("/home/user/big", dir.file("out.tar.gz"));
  ASSERT_TRUE(to_file) << to_file.error().message();
  EXPECT_EQ(*to_file, 300000u);
  EXPECT_EQ(fake.server.last().target, base + "?path=%2Fhome%2Fuser%2Fbig&format=tar.gz");
  EXPECT_EQ(dir.read("out.tar.gz"), stored);
  const size_t before = fake.server.requests().size();
  auto bad = sb->downloadArchive("/home/user/big", "rar");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(fake.server.requests().size(), before) << "refused before sending";
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
