// `airlock serve` as an operator runs it, driven over its Unix socket the way clients do:
// the API contract end to end, the CLI client, SIGTERM draining, and kill -9 recovery.
#include <net/if.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "serve_harness.h"
#include "test_support.h"

namespace airlock::testing {
namespace {

TEST_F(ServeTest, ApiContractEndToEnd) {
  Serve serve(dir_);
  auto health = http(serve.sock(), "GET", "/healthz");
  ASSERT_EQ(health.status, 200);
  EXPECT_EQ(Json::parse(health.body)["status"], "ok");

  auto created = http(serve.sock(), "POST", "/v1/sandboxes",
                      R"({"name": "e2e", "metadata": {"k": "v"}, "language": "python"})");
  ASSERT_EQ(created.status, 201) << created.body;
  std::string id = Json::parse(created.body)["id"];

  auto cmd = http(serve.sock(), "POST", "/v1/sandboxes/e2e/commands",
                  R"({"cmd": "echo hello; echo oops >&2; exit 4"})");
  ASSERT_EQ(cmd.status, 200) << cmd.body;
  auto events = ndjson(cmd.body);
  ASSERT_GE(events.size(), 3u) << cmd.body;
  EXPECT_EQ(events.front()["type"], "start");
  EXPECT_EQ(events.back()["type"], "exit");
  EXPECT_EQ(events.back()["exit_code"], 4);

  auto agg = http(serve.sock(), "POST", "/v1/sandboxes/" + id + "/commands",
                  R"({"argv": ["printf", "%s", "x y"], "stream": false})");
  ASSERT_EQ(agg.status, 200) << agg.body;
  EXPECT_EQ(Json::parse(agg.body)["stdout"], "x y");

  auto put = http(serve.sock(), "PUT", "/v1/sandboxes/" + id + "/files?path=/home/user/in.csv",
                  "a,b\n1,2\n", "application/octet-stream");
  ASSERT_EQ(put.status, 201) << put.body;
  Json code_req = {
      {"code", "import csv\nrows = list(csv.reader(open('/home/user/in.csv')))\nlen(rows)"},
      {"stream", false}};
  auto code = http(serve.sock(), "POST", "/v1/sandboxes/" + id + "/code", code_req.dump());
  ASSERT_EQ(code.status, 200) << code.body;
  auto cj = Json::parse(code.body);
  EXPECT_EQ(cj["status"], "ok") << code.body;
  ASSERT_FALSE(cj["results"].empty()) << code.body;
  EXPECT_EQ(cj["results"][0]["text/plain"], "2");
  auto get = http(serve.sock(), "GET", "/v1/sandboxes/" + id + "/files?path=/home/user/in.csv");
  ASSERT_EQ(get.status, 200);
  EXPECT_EQ(get.body, "a,b\n1,2\n");

  // Bad input gets a precise 4xx, never a crash.
  auto malformed = http(serve.sock(), "POST", "/v1/sandboxes", "{\"name\": ");
  EXPECT_EQ(malformed.status, 400);
  EXPECT_EQ(Json::parse(malformed.body)["error"]["code"], "bad_request");
  auto unknown_field = http(serve.sock(), "POST", "/v1/sandboxes", R"({"nmae": "x"})");
  EXPECT_EQ(unknown_field.status, 400);
  EXPECT_NE(unknown_field.body.find("nmae"), std::string::npos) << unknown_field.body;
  auto wrong_type = http(serve.sock(), "POST", "/v1/sandboxes", R"({"keep_alive_s": "long"})");
  EXPECT_EQ(wrong_type.status, 400);
  EXPECT_NE(wrong_type.body.find("keep_alive_s"), std::string::npos) << wrong_type.body;
  auto missing = http(serve.sock(), "GET", "/v1/sandboxes/0123456789abcdef");
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(http(serve.sock(), "GET", "/v1/nothing-here").status, 404);

  auto openapi = http(serve.sock(), "GET", "/v1/openapi.json");
  ASSERT_EQ(openapi.status, 200);
  EXPECT_TRUE(Json::parse(openapi.body).contains("paths"));
  auto metrics = http(serve.sock(), "GET", "/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("airlock_sandboxes{state=\"running\"} 1"), std::string::npos)
      << metrics.body;

  EXPECT_EQ(http(serve.sock(), "DELETE", "/v1/sandboxes/" + id).status, 204);
  EXPECT_EQ(http(serve.sock(), "GET", "/v1/sandboxes/" + id).status, 404);
  int st = serve.stop(SIGTERM);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st;
}

TEST_F(ServeTest, SigtermDestroysEverySandbox) {
  Serve serve(dir_);
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(http(serve.sock(), "POST", "/v1/sandboxes", "{}").status, 201);
  auto during = snapshotHostResources();
  EXPECT_GT(during.airlock_cgroups, before_.airlock_cgroups) << "positive control: sandboxes exist";
  int st = serve.stop(SIGTERM);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st;
  EXPECT_FALSE(access((dir_.path() + "/airlock.sock").c_str(), F_OK) == 0)
      << "the socket file was left behind";
}

TEST_F(ServeTest, KillNineThenRestartReclaimsOrphans) {
  auto serve = std::make_unique<Serve>(dir_);
  auto created = http(serve->sock(), "POST", "/v1/sandboxes", "{}");
  ASSERT_EQ(created.status, 201);
  std::string id = Json::parse(created.body)["id"];
  auto bg = http(serve->sock(), "POST", "/v1/sandboxes/" + id + "/commands",
                 R"({"cmd": "sleep 300", "background": true})");
  ASSERT_EQ(bg.status, 201) << bg.body;
  serve->stop(SIGKILL);
  // Positive control: the dead supervisor's sandbox is still there.
  auto orphaned = snapshotHostResources();
  EXPECT_GT(orphaned.airlock_cgroups, before_.airlock_cgroups);
  // Without its journal (a supervisor that died before writing it) the sandbox cannot be adopted.
  ASSERT_EQ(unlink(("/run/airlock/sandboxes/" + id + ".json").c_str()), 0);
  serve->start();  // startup reclaims what the dead supervisor left
  EXPECT_EQ(settledHostResources(), before_)
      << "orphans of a kill -9'd supervisor survived its restart";
  EXPECT_EQ(http(serve->sock(), "GET", "/v1/sandboxes/" + id).status, 404);
  serve.reset();
}

// A sandbox outlives its supervisor's kill -9: the restarted supervisor adopts it with its id,
// name, metadata and files (its workspace is a tmpfs: only a live sandbox keeps it), and the
// dead supervisor's executions go on under their ids (session_survival_test.cc has the rest).
TEST_F(ServeTest, KillNineThenRestartAdoptsLiveSandboxes) {
  auto serve = std::make_unique<Serve>(dir_);
  auto created = http(serve->sock(), "POST", "/v1/sandboxes",
                      R"({"name": "keeper", "metadata": {"user": "u7"}, "keep_alive_s": 900})");
  ASSERT_EQ(created.status, 201) << created.body;
  auto sb = Json::parse(created.body);
  ASSERT_EQ(http(serve->sock(), "POST", "/v1/sandboxes/keeper/files/write",
                 R"({"path": "/home/user/state.txt", "content": "before the crash"})")
                .status,
            201);
  auto bg = http(serve->sock(), "POST", "/v1/sandboxes/keeper/commands",
                 R"({"cmd": "sleep 300", "background": true})");
  ASSERT_EQ(bg.status, 201) << bg.body;
  std::string cut_id = Json::parse(bg.body)["command_id"];
  serve->stop(SIGKILL);
  serve->start();

  auto got = http(serve->sock(), "GET", "/v1/sandboxes/keeper");
  ASSERT_EQ(got.status, 200) << "not adopted: " << got.body;
  auto adopted = Json::parse(got.body);
  EXPECT_EQ(adopted["id"], sb["id"]);
  EXPECT_EQ(adopted["metadata"]["user"], "u7");
  EXPECT_EQ(adopted["keep_alive_s"], 900);
  EXPECT_EQ(adopted["created_at"], sb["created_at"]);
  EXPECT_EQ(adopted["ends_at"], sb["ends_at"]);
  auto ran = http(serve->sock(), "POST", "/v1/sandboxes/keeper/commands",
                  R"({"cmd": "cat /home/user/state.txt; echo; ps -e -o comm= | grep -c sleep", )"
                  R"("stream": false})");
  ASSERT_EQ(ran.status, 200) << ran.body;
  EXPECT_EQ(Json::parse(ran.body)["stdout"], "before the crash\n1\n")
      << "files kept; the dead supervisor's command still runs";
  // Still audited: the new supervisor sees the adopted sandbox's execs (gVisor and a VM report
  // them through monitoring the adoption reconnected).
  bool saw_cat = false;
  const Json ran_result = Json::parse(ran.body);
  for (const auto& p : ran_result["audit"]["processes"])
    saw_cat = saw_cat || (p["argv"].is_array() && !p["argv"].empty() && p["argv"][0] == "cat");
  EXPECT_TRUE(saw_cat) << "the adopted sandbox's exec of cat went unrecorded: " << ran.body;
  auto metrics = http(serve->sock(), "GET", "/metrics");
  EXPECT_NE(metrics.body.find("airlock_sandboxes_adopted_total 1"), std::string::npos);

  // The command the crash cut off from its supervisor keeps its id, its argv and its state; new
  // ids never reuse it.
  auto listed = http(serve->sock(), "GET", "/v1/sandboxes/keeper/commands");
  ASSERT_EQ(listed.status, 200);
  Json cut, all = Json::parse(listed.body);
  for (const auto& c : all["commands"])
    if (c["command_id"] == cut_id) cut = c;
  ASSERT_FALSE(cut.is_null()) << cut_id << " is gone: " << listed.body;
  EXPECT_EQ(cut["state"], "running") << listed.body;
  EXPECT_EQ(cut["argv"], Json::array({"/bin/sh", "-c", "sleep 300"})) << listed.body;
  ASSERT_EQ(http(serve->sock(), "DELETE", "/v1/sandboxes/keeper/commands/" + cut_id).status, 204);
  auto events = http(serve->sock(), "GET", "/v1/sandboxes/keeper/commands/" + cut_id + "/events");
  ASSERT_EQ(events.status, 200);
  EXPECT_NE(events.body.find("\"type\":\"supervisor_restart\""), std::string::npos) << events.body;
  EXPECT_NE(events.body.find("\"signal\":9"), std::string::npos) << events.body;
  auto fresh = http(serve->sock(), "POST", "/v1/sandboxes/keeper/commands",
                    R"({"cmd": "true", "background": true})");
  ASSERT_EQ(fresh.status, 201) << fresh.body;
  std::string fresh_id = Json::parse(fresh.body)["command_id"];
  EXPECT_GT(std::stoi(fresh_id.substr(1)), std::stoi(cut_id.substr(1)))
      << "a new command reused the number of one a client may still hold";

  ASSERT_EQ(http(serve->sock(), "DELETE", "/v1/sandboxes/keeper").status, 204);
  serve.reset();
  // The adopted agent's parent is the host's init, which reaps it on its own schedule.
  EXPECT_EQ(settledHostResources(), before_);
}

// A sandbox with a network link and rules set through the API survives a kill -9 of its
// supervisor with both: the next one adopts the link (same host end) and puts the rules back.
TEST_F(ServeTest, KillNineKeepsANetworkedSandboxsLinkAndRuntimeRules) {
  auto serve = std::make_unique<Serve>(dir_, "[profiles.default.network]\nmode = \"open\"\n");
  auto created = http(serve->sock(), "POST", "/v1/sandboxes", R"({"name": "online"})");
  ASSERT_EQ(created.status, 201) << created.body;
  auto put = http(serve->sock(), "PUT", "/v1/sandboxes/online/network",
                  R"({"rules": ["deny tcp 192.0.2.0/24 *"]})");
  ASSERT_EQ(put.status, 200) << put.body;
  auto before = Json::parse(put.body);
  ASSERT_TRUE(before["link"].is_object()) << put.body;
  const std::string link = before["link"]["host_link"];
  ASSERT_NE(if_nametoindex(link.c_str()), 0u) << link;

  serve->stop(SIGKILL);
  serve->start();
  auto shown = http(serve->sock(), "GET", "/v1/sandboxes/online/network");
  ASSERT_EQ(shown.status, 200) << "not adopted: " << shown.body;
  auto after = Json::parse(shown.body);
  EXPECT_EQ(after["rules"], before["rules"]) << "the API's rules were lost in the restart";
  EXPECT_EQ(after["link"], before["link"]);
  EXPECT_NE(if_nametoindex(link.c_str()), 0u) << "the link of an adopted sandbox was removed";
  // Enforced, not only shown: the journaled deny rule refuses at once.
  auto ran = http(
      serve->sock(), "POST", "/v1/sandboxes/online/commands",
      R"({"cmd": "python3 -c \"import socket,errno\ntry:\n socket.create_connection(('192.0.2.1', 80), 3)\nexcept OSError as e:\n print(errno.errorcode.get(e.errno, e))\"", "stream": false})");
  ASSERT_EQ(ran.status, 200) << ran.body;
  auto result = Json::parse(ran.body);
  // What the program sees differs by backend (docs/gvisor.md, docs/microvm.md): the hook's
  // EPERM; gVisor's link filter answers with a reset; a VM's QEMU, refused on the host, answers
  // the guest with an ICMP unreachable.
  const char* refused = underGvisor()    ? "ECONNREFUSED\n"
                        : underMicrovm() ? "ENETUNREACH\n"
                                         : "EPERM\n";
  EXPECT_EQ(result["stdout"], refused) << ran.body;
  EXPECT_EQ(result["audit"]["connections"][0]["rule"], "rule:0") << ran.body;

  ASSERT_EQ(http(serve->sock(), "DELETE", "/v1/sandboxes/online").status, 204);
  EXPECT_EQ(if_nametoindex(link.c_str()), 0u);
  // With its last sandbox gone, so is airlock's nftables table (adopting it had listed the
  // table, a listing once read later as the sets' and taken for elements still there).
  EXPECT_NE(runCommand({"/usr/sbin/nft", "list", "table", "inet", "airlock"}).exit_code, 0);
  serve.reset();
  EXPECT_EQ(settledHostResources(), before_);
}

// With server.reattach_grace_s = 0 sandboxes end with their supervisor: after a kill -9 the next
// one finds nothing to adopt (the positive control is the test above, with the default grace).
TEST_F(ServeTest, KillNineWithoutReattachGraceEndsSandboxes) {
  auto serve = std::make_unique<Serve>(dir_, "reattach_grace_s = 0\n");
  ASSERT_EQ(http(serve->sock(), "POST", "/v1/sandboxes", R"({"name": "short-lived"})").status, 201);
  serve->stop(SIGKILL);
  auto t0 = std::chrono::steady_clock::now();
  serve->start();
  // Its agent exits rather than wait: the new supervisor must not wait the whole handshake
  // timeout (10 s) for a channel that will never come.
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(http(serve->sock(), "GET", "/v1/sandboxes/short-lived").status, 404);
  auto metrics = http(serve->sock(), "GET", "/metrics");
  EXPECT_NE(metrics.body.find("airlock_sandboxes_adopted_total 0"), std::string::npos)
      << metrics.body;
  serve.reset();
  EXPECT_EQ(settledHostResources(), before_);
}

// A journaled sandbox whose agent is gone when the next supervisor starts (no grace here; also a
// kill -9 in the middle of a DELETE) cannot be adopted: the failed adoption leaves it to the
// reclaim, which releases its persistent workspace's host mount, so the workspace opens again.
TEST_F(ServeTest, KillNineWithoutReattachGraceReleasesPersistentWorkspaces) {
  auto serve = std::make_unique<Serve>(
      dir_, "reattach_grace_s = 0\nstate_dir = \"" + dir_.file("persist") + "\"\n");
  const std::string spec = R"({"name": "diary", "persistent": true})";
  auto created = http(serve->sock(), "POST", "/v1/sandboxes", spec);
  ASSERT_EQ(created.status, 201) << created.body;
  ASSERT_EQ(http(serve->sock(), "PUT", "/v1/sandboxes/diary/files?path=/home/user/day1.txt", "rain",
                 "application/octet-stream")
                .status,
            201);
  std::string id = Json::parse(created.body)["id"];
  auto journal = Json::parse(readFile("/run/airlock/sandboxes/" + id + ".json"));
  const pid_t agent = journal["agent_pid"].get<pid_t>();
  serve->stop(SIGKILL);
  // The agent ends without a supervisor, and the host's init reaps it.
  for (int i = 0; i < 100 && kill(agent, 0) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_NE(kill(agent, 0), 0) << "the agent outlived its supervisor with no grace";
  serve->start();
  EXPECT_EQ(http(serve->sock(), "GET", "/v1/sandboxes/diary").status, 404);
  EXPECT_EQ(settledHostResources(), before_)
      << "the unadoptable sandbox's workspace stayed mounted";
  auto again = http(serve->sock(), "POST", "/v1/sandboxes", spec);
  ASSERT_EQ(again.status, 201) << again.body;
  auto read = http(serve->sock(), "GET", "/v1/sandboxes/diary/files?path=/home/user/day1.txt");
  EXPECT_EQ(read.status, 200);
  EXPECT_EQ(read.body, "rain");
  ASSERT_EQ(http(serve->sock(), "DELETE", "/v1/sandboxes/diary").status, 204);
  serve.reset();
}

// A supervisor killed while it made a workspace image (mkfs.ext4 of a temporary file) leaves that
// file behind: the next one removes it, and keeps one whose maker still runs.
TEST_F(ServeTest, RestartRemovesHalfMadeWorkspaceImagesOfDeadSupervisors) {
  auto dead = runCommand({"/bin/sh", "-c", "echo $$"});
  ASSERT_EQ(dead.exit_code, 0);
  const std::string pid = dead.out.substr(0, dead.out.find('\n'));
  const std::string alive = std::to_string(getpid());
  const std::string ws = "persist/workspaces/default/";
  dir_.write(ws + ".new-" + pid + "-half.ext4", "half-made");
  dir_.write(ws + ".new-" + alive + "-busy.ext4", "being made");
  dir_.write(ws + "kept.ext4", "an image");
  Serve serve(dir_, "state_dir = \"" + dir_.file("persist") + "\"\n");
  EXPECT_NE(access(dir_.file(ws + ".new-" + pid + "-half.ext4").c_str(), F_OK), 0);
  EXPECT_EQ(access(dir_.file(ws + ".new-" + alive + "-busy.ext4").c_str(), F_OK), 0);
  EXPECT_EQ(dir_.read(ws + "kept.ext4"), "an image");
}

// Killed between writing a sandbox's lock file or journal under a temporary name and renaming
// it, a supervisor leaves that file: the next one removes it.
TEST_F(ServeTest, RestartRemovesHalfWrittenJournalsAndLockFiles) {
  const std::string dir = "/run/airlock/sandboxes/";
  for (const char* name : {".0123456789abcdef.json.new", ".0123456789abcdef.new"}) {
    std::ofstream(dir + name) << "{";
  }
  Serve serve(dir_);
  EXPECT_NE(access((dir + ".0123456789abcdef.json.new").c_str(), F_OK), 0);
  EXPECT_NE(access((dir + ".0123456789abcdef.new").c_str(), F_OK), 0);
}

// A persistent workspace survives its supervisor being killed with -9, even when its sandbox
// cannot be adopted: the restart releases the dead sandbox's host mount and loop device, and the
// next sandbox of that name finds every file.
TEST_F(ServeTest, KillNineKeepsPersistentWorkspacesIntact) {
  auto serve = std::make_unique<Serve>(dir_, "state_dir = \"" + dir_.file("persist") + "\"\n");
  const std::string spec = R"({"name": "notebook", "persistent": true})";
  auto created = http(serve->sock(), "POST", "/v1/sandboxes", spec);
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(Json::parse(created.body)["persistent"], true);
  auto wrote = http(serve->sock(), "POST", "/v1/sandboxes/notebook/files/write",
                    R"({"path": "/home/user/notes.txt", "content": "kept"})");
  ASSERT_EQ(wrote.status, 201) << wrote.body;
  auto made = http(serve->sock(), "POST", "/v1/sandboxes/notebook/commands",
                   R"({"cmd": "head -c 1000000 /dev/urandom > /home/user/blob && )"
                   R"(md5sum < /home/user/blob", "stream": false})");
  ASSERT_EQ(made.status, 200) << made.body;
  std::string md5 = Json::parse(made.body)["stdout"];
  ASSERT_EQ(http(serve->sock(), "POST", "/v1/sandboxes/notebook/commands",
                 R"({"cmd": "sleep 300", "background": true})")
                .status,
            201);

  serve->stop(SIGKILL);
  // (A microVM's workspace is its guest's disk, never mounted on the host.)
  if (!underMicrovm()) {
    EXPECT_GT(snapshotHostResources().airlock_mounts, before_.airlock_mounts)
        << "positive control: the dead supervisor's workspace is still mounted";
  }
  // Not adoptable (no journal): the restart reclaims the sandbox, the workspace stays on disk.
  std::string id = Json::parse(created.body)["id"];
  ASSERT_EQ(unlink(("/run/airlock/sandboxes/" + id + ".json").c_str()), 0);
  serve->start();
  EXPECT_EQ(settledHostResources(), before_)
      << "the dead supervisor's sandbox or workspace mount survived";

  ASSERT_EQ(http(serve->sock(), "POST", "/v1/sandboxes", spec).status, 201);
  auto read = http(serve->sock(), "POST", "/v1/sandboxes/notebook/commands",
                   R"({"cmd": "cat /home/user/notes.txt; echo; md5sum < /home/user/blob", )"
                   R"("stream": false})");
  ASSERT_EQ(read.status, 200) << read.body;
  EXPECT_EQ(Json::parse(read.body)["stdout"], "kept\n" + md5);

  auto list = http(serve->sock(), "GET", "/v1/workspaces");
  ASSERT_EQ(list.status, 200);
  auto ws = Json::parse(list.body)["workspaces"];
  ASSERT_EQ(ws.size(), 1u) << list.body;
  EXPECT_EQ(ws[0]["name"], "notebook");
  EXPECT_EQ(ws[0]["in_use"], true);
  EXPECT_EQ(http(serve->sock(), "DELETE", "/v1/workspaces/notebook").status, 409);
  ASSERT_EQ(http(serve->sock(), "DELETE", "/v1/sandboxes/notebook").status, 204);
  EXPECT_EQ(http(serve->sock(), "DELETE", "/v1/workspaces/notebook").status, 204);
  EXPECT_EQ(http(serve->sock(), "DELETE", "/v1/workspaces/notebook").status, 404);
  serve.reset();
}

// The review chain over HTTP: a denial is 403 denied_by_review with the verdict; an allowed run
// carries its verdict; the approvals routes answer on the Unix socket.
TEST_F(ServeTest, ReviewDenialsAndVerdictsOverHttp) {
  Serve serve(dir_, R"(
[profiles.default.review]
chain = ["patterns"]
[[profiles.default.review.patterns.rules]]
id = "no-rm"
pattern = '\brm\b'
action = "deny"
reason = "deleting files is not allowed"
)");
  ASSERT_EQ(http(serve.sock(), "POST", "/v1/sandboxes", R"({"name": "rv"})").status, 201);
  auto denied = http(serve.sock(), "POST", "/v1/sandboxes/rv/commands",
                     R"({"cmd": "rm -rf /home/user", "stream": false})");
  EXPECT_EQ(denied.status, 403);
  auto err = Json::parse(denied.body)["error"];
  EXPECT_EQ(err["code"], "denied_by_review");
  EXPECT_EQ(err["review"]["verdict"], "deny");
  EXPECT_EQ(err["review"]["reviewer"], "patterns");
  EXPECT_EQ(err["review"]["rule"], "no-rm");
  auto allowed = http(serve.sock(), "POST", "/v1/sandboxes/rv/commands",
                      R"({"cmd": "echo ok", "stream": false})");
  ASSERT_EQ(allowed.status, 200) << allowed.body;
  EXPECT_EQ(Json::parse(allowed.body)["review"]["verdict"], "allow");
  auto reviews = http(serve.sock(), "GET", "/v1/reviews");
  ASSERT_EQ(reviews.status, 200);
  EXPECT_TRUE(Json::parse(reviews.body)["reviews"].empty());
  EXPECT_EQ(http(serve.sock(), "POST", "/v1/reviews/0123456789abcdef/approve", "{}").status, 404);
  ASSERT_EQ(http(serve.sock(), "DELETE", "/v1/sandboxes/rv").status, 204);
}

// The approval queue from the CLI: a held command waits until `airlock review approve` lets it
// run, or `airlock review reject` denies it with the operator's reason.
TEST_F(ServeTest, CliApprovesAndRejectsHeldExecutions) {
  Serve serve(dir_, R"(
[profiles.default.review]
chain = ["patterns"]
hold_deadline_s = 60
[[profiles.default.review.patterns.rules]]
id = "ask-curl"
pattern = '\bcurl\b'
action = "hold"
reason = "network tools need a human"
)");
  std::vector<std::string> env = {"AIRLOCK_URL=unix://" + serve.sock()};
  ASSERT_EQ(http(serve.sock(), "POST", "/v1/sandboxes", R"({"name": "held"})").status, 201);
  for (bool approve : {true, false}) {
    SCOPED_TRACE(approve ? "approve" : "reject");
    Response held;
    std::thread caller([&] {
      held = http(serve.sock(), "POST", "/v1/sandboxes/held/commands",
                  R"({"cmd": "echo curl-was-approved", "stream": false})");
    });
    std::string rid;
    for (int i = 0; i < 200 && rid.empty(); ++i) {
      auto ls = runCommand({airlockBinary(), "review", "ls", "--json"}, "", 30, env);
      ASSERT_EQ(ls.exit_code, 0) << ls.err;
      auto pending = Json::parse(ls.out)["reviews"];
      if (!pending.empty())
        rid = pending[0]["review_id"];
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    ASSERT_FALSE(rid.empty()) << "the held command never showed up in `airlock review ls`";
    auto table = runCommand({airlockBinary(), "review", "ls"}, "", 30, env);
    EXPECT_NE(table.out.find("patterns:ask-curl"), std::string::npos) << table.out;
    auto decided = runCommand({airlockBinary(), "review", approve ? "approve" : "reject", rid,
                               "--reason", "looked at it"},
                              "", 30, env);
    EXPECT_EQ(decided.exit_code, 0) << decided.err;
    EXPECT_EQ(decided.out, (approve ? "approved " : "rejected ") + rid + "\n");
    caller.join();
    if (approve) {
      ASSERT_EQ(held.status, 200) << held.body;
      EXPECT_EQ(Json::parse(held.body)["stdout"], "curl-was-approved\n");
    } else {
      ASSERT_EQ(held.status, 403) << held.body;
      EXPECT_NE(held.body.find("looked at it"), std::string::npos) << held.body;
    }
    // Decided once: a second decision is an error naming the review.
    auto again = runCommand({airlockBinary(), "review", "approve", rid}, "", 30, env);
    EXPECT_EQ(again.exit_code, 125);
    EXPECT_NE(again.err.find("404"), std::string::npos) << again.err;
  }
  ASSERT_EQ(http(serve.sock(), "DELETE", "/v1/sandboxes/held").status, 204);
}

TEST_F(ServeTest, CliClientTalksToTheSupervisor) {
  Serve serve(dir_);
  std::vector<std::string> env = {"AIRLOCK_URL=unix://" + serve.sock()};
  auto created = runCommand({airlockBinary(), "sandbox", "create", "--name", "cli"}, "", 60, env);
  ASSERT_EQ(created.exit_code, 0) << created.err;
  auto out = runCommand({airlockBinary(), "exec", "cli", "--", "echo", "hi"}, "", 60, env);
  EXPECT_EQ(out.exit_code, 0) << out.err;
  EXPECT_EQ(out.out, "hi\n");
  auto code7 = runCommand({airlockBinary(), "exec", "cli", "--cmd", "exit 7"}, "", 60, env);
  EXPECT_EQ(code7.exit_code, 7) << code7.err;
  dir_.write("local.txt", "payload\n");
  auto put = runCommand(
      {airlockBinary(), "files", "put", "cli", dir_.file("local.txt"), "/home/user/p.txt"}, "", 60,
      env);
  EXPECT_EQ(put.exit_code, 0) << put.err;
  auto code = runCommand({airlockBinary(), "code", "cli", "-c", "open('/home/user/p.txt').read()"},
                         "", 60, env);
  EXPECT_EQ(code.exit_code, 0) << code.err;
  EXPECT_NE(code.out.find("payload"), std::string::npos) << code.out;
  auto ls = runCommand({airlockBinary(), "sandbox", "ls"}, "", 60, env);
  EXPECT_NE(ls.out.find("cli"), std::string::npos) << ls.out;
  auto rm = runCommand({airlockBinary(), "sandbox", "rm", "cli"}, "", 60, env);
  EXPECT_EQ(rm.exit_code, 0) << rm.err;
  auto gone = runCommand({airlockBinary(), "sandbox", "get", "cli"}, "", 60, env);
  EXPECT_NE(gone.exit_code, 0);
  EXPECT_NE(gone.err.find("not found"), std::string::npos) << gone.err;
}

}  // namespace
}  // namespace airlock::testing

namespace airlock::testing {
namespace {

// `cmake --install` lays down what an operator (and the systemd unit) expects, and the installed
// policy is valid.
TEST(Install, LayoutHasBinaryAgentPluginsPolicyUnitAndStateDir) {
  TempDir prefix;
  auto r =
      runCommand({"/usr/bin/cmake", "--install", buildDir(), "--prefix", prefix.path()}, "", 120);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* path :
       {"bin/airlock", "libexec/airlock/airlock-agent", "etc/airlock/policy.toml",
        "lib/systemd/system/airlock.service", "var/lib/airlock"}) {
    EXPECT_EQ(access((prefix.path() + "/" + path).c_str(), F_OK), 0) << path;
  }
  std::string unit = readFile(prefix.path() + "/lib/systemd/system/airlock.service");
  // The unit names the configured prefix (a package configures with its own); here it is only
  // checked to run `airlock serve` with the installed policy.
  EXPECT_NE(unit.find("/bin/airlock serve --policy "), std::string::npos) << unit;
  EXPECT_NE(unit.find("/airlock/policy.toml"), std::string::npos) << unit;
  auto check = runCommand({prefix.path() + "/bin/airlock", "policy", "check",
                           prefix.path() + "/etc/airlock/policy.toml"});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
}

}  // namespace
}  // namespace airlock::testing
