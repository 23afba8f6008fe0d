// The sandbox, exec, code and files commands against a fake server: what they send, what they
// print, and their exit codes.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>

#include <gtest/gtest.h>

#include "client_fake_server.h"
#include "supervisor/cli/cli.h"
#include "supervisor/encoding/base64.h"

namespace airlock::cli {
namespace {

using nlohmann::json;
using testing::FakeServer;
using testing::RecordedRequest;
using testing::Responder;
using testing::TempDir;

using Command = int (*)(const std::vector<std::string>&);

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

// Runs a command function with AIRLOCK_URL pointing at `server`, its stdin from `stdin_data`
// and its stdout/stderr captured at the file-descriptor level (live output uses write(2)).
CliResult runCli(Command command, const std::vector<std::string>& args, const std::string& url,
                 const std::string& stdin_data = "") {
  TempDir dir;
  dir.write("stdin", stdin_data);
  ::setenv("AIRLOCK_URL", url.c_str(), 1);
  ::setenv("AIRLOCK_TOKEN", "tok", 1);
  std::cout.flush();
  std::fflush(stdout);
  int saved[3] = {::dup(0), ::dup(1), ::dup(2)};
  int in = ::open(dir.file("stdin").c_str(), O_RDONLY | O_CLOEXEC);
  int out = ::open(dir.file("out").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int err = ::open(dir.file("err").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ::dup2(in, 0);
  ::dup2(out, 1);
  ::dup2(err, 2);
  std::cin.clear();
  CliResult r;
  r.exit_code = command(args);
  std::cout.flush();
  std::cerr.flush();
  std::fflush(stdout);
  for (int fd = 0; fd < 3; ++fd) {
    ::dup2(saved[fd], fd);
    ::close(saved[fd]);
  }
  ::close(in);
  ::close(out);
  ::close(err);
  std::cin.clear();
  ::unsetenv("AIRLOCK_URL");
  ::unsetenv("AIRLOCK_TOKEN");
  r.out = dir.read("out");
  r.err = dir.read("err");
  return r;
}

CliResult runCli(Command command, const std::vector<std::string>& args, const FakeServer& server,
                 const std::string& stdin_data = "") {
  return runCli(command, args, server.url(), stdin_data);
}

// A foreground command's NDJSON answer: start, the given output events, then `exit`.
FakeServer::Handler commandStream(std::vector<json> output, json exit) {
  return [output, exit](const RecordedRequest&, Responder& r) {
    r.beginChunked(200);
    r.chunk(json{{"type", "start"}, {"command_id", "c1"}, {"pid", 7}}.dump() + "\n");
    for (const auto& ev : output) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      r.chunk(ev.dump() + "\n");
    }
    json last = exit;
    last["type"] = "exit";
    r.chunk(last.dump() + "\n");
    r.endChunked();
  };
}

// ---- exec ----

TEST(ClientCli, ExecStreamsOutputAndMirrorsTheExitCode) {
  FakeServer server;
  server.on("POST", "/v1/sandboxes/sb1/commands",
            commandStream({{{"type", "stdout"}, {"data", "hello\n"}},
                           {{"type", "stderr"}, {"data_base64", encoding::base64Encode("\xff!")}}},
                          {{"exit_code", 3}, {"signal", 0}, {"timed_out", false}}));
  auto r = runCli(
      execCommand,
      {"sb1", "--env", "A=1", "--cwd", "/tmp", "--timeout", "2.5", "--", "ls", "-la", "--env"},
      server);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(r.out, "hello\n");
  EXPECT_EQ(r.err, "\xff!");
  RecordedRequest req = server.last();
  EXPECT_EQ(req.header("authorization"), "Bearer tok");
  EXPECT_EQ(req.json(), (json{{"argv", {"ls", "-la", "--env"}},
                              {"env", {{"A", "1"}}},
                              {"cwd", "/tmp"},
                              {"timeout_s", 2.5},
                              {"stream", true}}));
}

TEST(ClientCli, ExecKilledBySignalExits128PlusSignal) {
  FakeServer server;
  server.on("POST", "/v1/sandboxes/sb1/commands",
            commandStream({}, {{"exit_code", -1}, {"signal", 9}, {"timed_out", false}}));
  auto r = runCli(execCommand, {"sb1", "--cmd", "kill -9 $$"}, server);
  EXPECT_EQ(r.exit_code, 137);
  EXPECT_NE(r.err.find("airlock: exec: the command was killed by SIGKILL"), std::string::npos)
      << r.err;
  EXPECT_EQ(server.last().json()["cmd"], "kill -9 $$");
  EXPECT_FALSE(server.last().json().contains("argv"));
}

TEST(ClientCli, ExecTimeoutExits124) {
  FakeServer server;
  server.on("POST", "/v1/sandboxes/sb1/commands",
            commandStream({}, {{"exit_code", -1}, {"signal", 9}, {"timed_out", true}}));
  auto r = runCli(execCommand, {"sb1", "--", "sleep", "100"}, server);
  EXPECT_EQ(r.exit_code, 124);
  EXPECT_NE(r.err.find("timeout"), std::string::npos) << r.err;
}

TEST(ClientCli, ExecStreamWithoutExitIsAnAirlockFailure) {
  FakeServer server;
  server.on("POST", "/v1/sandboxes/sb1/commands", [](const RecordedRequest&, Responder& r) {
    r.beginChunked(200);
    r.chunk("{\"type\":\"start\",\"command_id\":\"c1\"}\n");
    r.endChunked();
  });
  auto r = runCli(execCommand, {"sb1", "--", "true"}, server);
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("before the command exited"), std::string::npos) << r.err;
}

TEST(ClientCli, ExecBackgroundPrintsTheCommandId) {
  FakeServer server;
  server.json("POST", "/v1/sandboxes/sb1/commands", 201, {{"command_id", "c2"}, {"pid", 9}});
  auto r =
      runCli(execCommand, {"sb1", "--background", "--", "python3", "-m", "http.server"}, server);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "c2\n");
  EXPECT_EQ(server.last().json()["background"], true);
  EXPECT_FALSE(server.last().json().contains("stream"));
}

TEST(ClientCli, ExecPassesStdinInTheRequest) {
  FakeServer server;
  server.on("POST", "/v1/sandboxes/sb1/commands",
            commandStream({}, {{"exit_code", 0}, {"signal", 0}, {"timed_out", false}}));
  std::string input = "line 1\nline 2\n\xff";
  auto r = runCli(execCommand, {"sb1", "--stdin", "--", "cat"}, server, input);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  json body = server.last().json();
  ASSERT_TRUE(body.contains("stdin_base64")) << body.dump();
  EXPECT_EQ(encoding::base64Decode(body["stdin_base64"].get<std::string>()), input);
  // Without --stdin nothing is read or sent.
  auto quiet = runCli(execCommand, {"sb1", "--", "cat"}, server, input);
  EXPECT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_FALSE(server.last().json().contains("stdin_base64"));
}

TEST(ClientCli, ExecStdinTooLargeForTheRequestIsRefusedWithAHint) {
  FakeServer server;
  auto r =
      runCli(execCommand, {"sb1", "--stdin", "--", "cat"}, server, std::string((6 << 20) + 1, 'x'));
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("stdin is larger than 6 MiB"), std::string::npos) << r.err;
  EXPECT_TRUE(server.requests().empty());
}

TEST(ClientCli, ExecUnknownSandboxShowsTheServersMessage) {
  FakeServer server;
  server.on("POST", "/v1/sandboxes/nope/commands", [](const RecordedRequest&, Responder& r) {
    r.error(404, "not_found", "sandbox 'nope' not found");
  });
  auto r = runCli(execCommand, {"nope", "--", "ls"}, server);
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_EQ(r.err, "airlock: sandbox 'nope' not found (HTTP 404 not_found)\n");
}

TEST(ClientCli, ExecBadUsageIs125) {
  FakeServer server;
  EXPECT_EQ(runCli(execCommand, {"sb1"}, server).exit_code, 125);
  EXPECT_EQ(runCli(execCommand, {"sb1", "--cmd", "ls", "--", "ls"}, server).exit_code, 125);
  EXPECT_EQ(runCli(execCommand, {"sb1", "--env", "novalue", "--", "ls"}, server).exit_code, 125);
  EXPECT_EQ(runCli(execCommand, {"sb1", "--bogus", "--", "ls"}, server).exit_code, 125);
  EXPECT_TRUE(server.requests().empty());
}

TEST(ClientCli, SupervisorNotRunningIs125WithAHint) {
  TempDir dir;
  auto r = runCli(execCommand, {"sb1", "--", "ls"}, "unix://" + dir.file("none.sock"));
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_EQ(r.err, "airlock: cannot connect to " + dir.file("none.sock") +
                       ": ENOENT — is `airlock serve` running?\n");
  auto bad = runCli(sandboxCommand, {"ls"}, "ftp://x");
  EXPECT_EQ(bad.exit_code, 125);
  EXPECT_EQ(bad.err, "airlock: AIRLOCK_URL 'ftp://x': scheme must be unix:// or http://\n");
}

// ---- code ----

// A few bytes standing in for a PNG: the client only decodes and writes them.
const std::string kPng = std::string("\x89PNG\r\n\x1a\n", 8) + std::string("\x00\x01\xfe\xff", 4);

TEST(ClientCli, CodeWritesDisplayPngsAndPrintsTheResult) {
  FakeServer server;
  server.on("POST", "/v1/sandboxes/sb1/code", [](const RecordedRequest&, Responder& r) {
    r.beginChunked(200);
    r.chunk(json{{"type", "stdout"}, {"data", "hello\n"}}.dump() + "\n");
    r.chunk(
        json{{"type", "display"},
             {"data", {{"image/png", encoding::base64Encode(kPng)}, {"text/plain", "<Figure>"}}}}
            .dump() +
        "\n");
    r.chunk(
        json{{"type", "display"}, {"data", {{"image/png", encoding::base64Encode("2nd")}}}}.dump() +
        "\n");
    r.chunk(json{{"type", "result"}, {"data", {{"text/plain", "3"}}}}.dump() + "\n");
    r.chunk(json{{"type", "end"}, {"status", "ok"}, {"context_id", "python"}}.dump() + "\n");
    r.endChunked();
  });
  TempDir out;
  auto r = runCli(
      codeCommand,
      {"sb1", "--save-dir", out.path(), "--timeout", "10", "--context", "ctx1", "-c", "1 + 2"},
      server);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hello\n3\n");
  EXPECT_EQ(testing::readFile(out.file("airlock-display-1.png")), kPng);
  EXPECT_EQ(testing::readFile(out.file("airlock-display-2.png")), "2nd");
  EXPECT_NE(r.err.find("display 1 saved to " + out.file("airlock-display-1.png")),
            std::string::npos)
      << r.err;
  EXPECT_EQ(
      server.last().json(),
      (json{{"code", "1 + 2"}, {"stream", true}, {"context_id", "ctx1"}, {"timeout_s", 10.0}}));
}

TEST(ClientCli, CodeFromAFileTakesItsLanguage) {
  FakeServer server;
  server.on("POST", "/v1/sandboxes/sb1/code", [](const RecordedRequest&, Responder& r) {
    r.beginChunked(200);
    r.chunk("{\"type\":\"end\",\"status\":\"ok\"}\n");
    r.endChunked();
  });
  TempDir dir;
  dir.write("job.js", "console.log(1)\n");
  auto r = runCli(codeCommand, {"sb1", dir.file("job.js")}, server);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(server.last().json()["code"], "console.log(1)\n");
  EXPECT_EQ(server.last().json()["language"], "node");
  auto from_stdin = runCli(codeCommand, {"sb1", "-", "--language", "python"}, server, "print(2)");
  EXPECT_EQ(from_stdin.exit_code, 0) << from_stdin.err;
  EXPECT_EQ(server.last().json()["code"], "print(2)");
  EXPECT_EQ(server.last().json()["language"], "python");
}

TEST(ClientCli, CodeErrorPrintsNameValueAndTracebackAndExits1) {
  FakeServer server;
  server.on("POST", "/v1/sandboxes/sb1/code", [](const RecordedRequest&, Responder& r) {
    r.beginChunked(200);
    r.chunk(json{{"type", "error"},
                 {"name", "ZeroDivisionError"},
                 {"value", "division by zero"},
                 {"traceback", {"Traceback (most recent call last):", "  File \"<cell>\", line 1"}}}
                .dump() +
            "\n");
    r.chunk("{\"type\":\"end\",\"status\":\"error\"}\n");
    r.endChunked();
  });
  auto r = runCli(codeCommand, {"sb1", "-c", "1/0"}, server);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "Traceback (most recent call last):\n  File \"<cell>\", line 1\n"
            "ZeroDivisionError: division by zero\n");
}

TEST(ClientCli, CodeTimeoutExits124) {
  FakeServer server;
  server.on("POST", "/v1/sandboxes/sb1/code", [](const RecordedRequest&, Responder& r) {
    r.beginChunked(200);
    r.chunk(
        "{\"type\":\"end\",\"status\":\"timeout\",\"context_restarted\":true,"
        "\"context_id\":\"python\"}\n");
    r.endChunked();
  });
  auto r = runCli(codeCommand, {"sb1", "-c", "while True: pass"}, server);
  EXPECT_EQ(r.exit_code, 124);
  EXPECT_NE(r.err.find("context 'python' was restarted"), std::string::npos) << r.err;
}

TEST(ClientCli, CodeNeedsExactlyOneSource) {
  FakeServer server;
  EXPECT_EQ(runCli(codeCommand, {"sb1"}, server).exit_code, 125);
  EXPECT_EQ(runCli(codeCommand, {"sb1", "-c", "1", "file.py"}, server).exit_code, 125);
  EXPECT_TRUE(server.requests().empty());
}

// ---- sandbox ----

TEST(ClientCli, SandboxCreateSendsOnlyTheGivenFieldsAndPrintsTheId) {
  FakeServer server;
  server.json("POST", "/v1/sandboxes", 201, {{"id", "3f2a9c0d1e4b5a67"}, {"name", "web-1"}});
  auto r = runCli(sandboxCommand,
                  {"create", "--profile", "data", "--name", "web-1", "--env", "K=V", "--meta",
                   "user=u1", "--meta", "team=x", "--keep-alive", "600", "--persistent"},
                  server);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "3f2a9c0d1e4b5a67\n");
  EXPECT_EQ(server.last().json(), (json{{"profile", "data"},
                                        {"name", "web-1"},
                                        {"env", {{"K", "V"}}},
                                        {"metadata", {{"user", "u1"}, {"team", "x"}}},
                                        {"keep_alive_s", 600},
                                        {"persistent", true}}));
  auto j = runCli(sandboxCommand, {"create", "--json"}, server);
  EXPECT_EQ(json::parse(j.out)["name"], "web-1");
  EXPECT_EQ(server.last().json(), json::object());
}

TEST(ClientCli, SandboxCreateMountsSplitSourcePathAndRw) {
  FakeServer server;
  server.json("POST", "/v1/sandboxes", 201, {{"id", "3f2a9c0d1e4b5a67"}});
  auto r = runCli(
      sandboxCommand,
      {"create", "--mount", "hostdir:datasets/imagenet:/mnt/imagenet:rw", "--mount",
       "hostdir:datasets", "--mount", "hostdir:out:rw", "--mount", "hostdir:models/v2:/mnt/m"},
      server);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(
      server.last().json(),
      (json{{"mounts", json::array({json{{"source", "hostdir:datasets/imagenet"},
                                         {"path", "/mnt/imagenet"},
                                         {"writable", true}},
                                    json{{"source", "hostdir:datasets"}},
                                    json{{"source", "hostdir:out"}, {"writable", true}},
                                    json{{"source", "hostdir:models/v2"}, {"path", "/mnt/m"}}})}}));
  size_t sent = server.requests().size();
  for (std::string bad : {"datasets", "s3:bucket", "hostdir:", "hostdir:data:rw:/mnt/x",
                          "hostdir:data:ro", "hostdir:data::rw", "hostdir:data:mnt/x"}) {
    auto refused = runCli(sandboxCommand, {"create", "--mount", bad}, server);
    EXPECT_EQ(refused.exit_code, 125) << bad;
    EXPECT_NE(refused.err.find("--mount '" + bad + "': expected hostdir:ROOT"), std::string::npos)
        << refused.err;
  }
  EXPECT_EQ(server.requests().size(), sent) << "a bad --mount is refused before sending";
}

TEST(ClientCli, SandboxLsFiltersByMetadataAndPrintsATable) {
  FakeServer server;
  int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  server.json("GET", "/v1/sandboxes", 200,
              {{"sandboxes",
                {{{"id", "3f2a9c0d1e4b5a67"},
                  {"name", "analysis-42"},
                  {"profile", "default"},
                  {"state", "running"},
                  {"created_at", now - 125000},
                  {"idle_expires_at", now + 250000}}}}});
  auto r = runCli(sandboxCommand, {"ls", "--meta", "user=u 1"}, server);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(server.last().target, "/v1/sandboxes?metadata.user=u%201");
  EXPECT_EQ(r.out,
            "ID                NAME         PROFILE  STATE    AGE   IDLE-EXPIRES\n"
            "3f2a9c0d1e4b5a67  analysis-42  default  running  2m5s  in 4m10s\n");
}

TEST(ClientCli, SandboxRmRemovesEachAndFailsIfAnyFailed) {
  FakeServer server;
  server.json("DELETE", "/v1/sandboxes/a", 204, nullptr);
  server.on("DELETE", "/v1/sandboxes/b", [](const RecordedRequest&, Responder& r) {
    r.error(404, "not_found", "sandbox 'b' not found");
  });
  server.json("DELETE", "/v1/sandboxes/c", 204, nullptr);
  auto r = runCli(sandboxCommand, {"rm", "a", "b", "c"}, server);
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_EQ(r.out, "a\nc\n");
  EXPECT_EQ(r.err, "airlock: sandbox 'b' not found (HTTP 404 not_found)\n");
  EXPECT_EQ(server.requests().size(), 3u);
}

TEST(ClientCli, SandboxGetAndKeepAlive) {
  FakeServer server;
  json sb = {{"id", "3f2a9c0d1e4b5a67"}, {"name", "n"}, {"state", "running"}};
  server.json("GET", "/v1/sandboxes/n", 200, sb);
  server.json("POST", "/v1/sandboxes/n/keepalive", 200, sb);
  auto get = runCli(sandboxCommand, {"get", "n"}, server);
  EXPECT_EQ(get.exit_code, 0) << get.err;
  EXPECT_NE(get.out.find("id:"), std::string::npos);
  EXPECT_NE(get.out.find("3f2a9c0d1e4b5a67"), std::string::npos);
  EXPECT_NE(get.out.find("\nmounts:            -\n"), std::string::npos) << get.out;
  auto get_json = runCli(sandboxCommand, {"get", "n", "--json"}, server);
  EXPECT_EQ(json::parse(get_json.out), sb);
  auto ka = runCli(sandboxCommand, {"keepalive", "n", "--lifetime", "7200"}, server);
  EXPECT_EQ(ka.exit_code, 0) << ka.err;
  EXPECT_EQ(server.last().json(), (json{{"lifetime_s", 7200}}));
}

TEST(ClientCli, SandboxGetShowsItsMounts) {
  FakeServer server;
  server.json(
      "GET", "/v1/sandboxes/n", 200,
      {{"id", "3f2a9c0d1e4b5a67"},
       {"mounts",
        json::array(
            {json{{"source", "hostdir:datasets"}, {"path", "/mnt/datasets"}, {"writable", false}},
             json{
                 {"source", "hostdir:out/run1"}, {"path", "/mnt/results"}, {"writable", true}}})}});
  auto get = runCli(sandboxCommand, {"get", "n"}, server);
  EXPECT_EQ(get.exit_code, 0) << get.err;
  EXPECT_NE(get.out.find("\nmounts:            hostdir:datasets at /mnt/datasets (read-only)\n"
                         "                   hostdir:out/run1 at /mnt/results (read-write)\n"),
            std::string::npos)
      << get.out;
}

// ---- files ----

TEST(ClientCli, FilesPutAndGetRoundTrip) {
  FakeServer server;
  std::string stored;
  server.on("PUT", "/v1/sandboxes/sb1/files", [&](const RecordedRequest& req, Responder& r) {
    stored = req.body;
    r.json(201, {{"path", "/home/user/data/a.csv"}, {"size", req.body.size()}});
  });
  server.on("GET", "/v1/sandboxes/sb1/files", [&](const RecordedRequest&, Responder& r) {
    r.send(200, stored, "application/octet-stream");
  });
  TempDir dir;
  dir.write("a.csv", "x,y\n1,2\n", 0640);
  auto put = runCli(filesCommand, {"put", "sb1", dir.file("a.csv"), "data/", "--progress"}, server);
  EXPECT_EQ(put.exit_code, 0) << put.err;
  EXPECT_EQ(server.last().target,
            "/v1/sandboxes/sb1/files?path=%2Fhome%2Fuser%2Fdata%2Fa.csv&mode=0640");
  EXPECT_EQ(stored, "x,y\n1,2\n");
  EXPECT_NE(put.err.find("sent 8 B (8 bytes) in"), std::string::npos) << put.err;

  std::filesystem::create_directory(dir.file("out"));
  auto get = runCli(filesCommand, {"get", "sb1", "/home/user/data/a.csv", dir.file("out")}, server);
  EXPECT_EQ(get.exit_code, 0) << get.err;
  EXPECT_EQ(get.err, "");  // no progress: stderr is not a terminal
  EXPECT_EQ(testing::readFile(dir.file("out/a.csv")), "x,y\n1,2\n");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.file("out")),
                          std::filesystem::directory_iterator()),
            1);
}

TEST(ClientCli, FilesGetFailureLeavesNoFile) {
  FakeServer server;
  server.on("GET", "/v1/sandboxes/sb1/files", [](const RecordedRequest&, Responder& r) {
    r.error(404, "not_found", "'/home/user/x' not found");
  });
  TempDir dir;
  auto r = runCli(filesCommand, {"get", "sb1", "x", dir.file("x")}, server);
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_EQ(r.err, "airlock: '/home/user/x' not found (HTTP 404 not_found)\n");
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(ClientCli, FilesLsPrintsEntries) {
  FakeServer server;
  server.json("GET", "/v1/sandboxes/sb1/files/list", 200,
              {{"path", "/home/user"},
               {"entries",
                {{{"name", "data"}, {"type", "dir"}, {"size", 4096}, {"mode", 0755}},
                 {{"name", "a.csv"}, {"type", "file"}, {"size", 8}, {"mode", 0644}}}}});
  auto r = runCli(filesCommand, {"ls", "sb1"}, server);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(server.last().target, "/v1/sandboxes/sb1/files/list?path=%2Fhome%2Fuser");
  EXPECT_EQ(r.out,
            "drwxr-xr-x  4096  -  data/\n"
            "-rw-r--r--  8     -  a.csv\n");
}

}  // namespace
}  // namespace airlock::cli
