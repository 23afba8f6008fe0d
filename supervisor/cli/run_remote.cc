// airlock run through `airlock serve`: flags → POST /v1/runs → live output, files, exit code.
#include "supervisor/cli/run_remote.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <vector>

#include "airlock/client/http.h"
#include "airlock/policy/relaxation_summary.h"
#include "airlock/unique_fd.h"
#include "supervisor/cli/cli.h"
#include "supervisor/encoding/base64.h"
#include "supervisor/sandbox/run_result.h"

namespace airlock::cli {

namespace {

using Json = nlohmann::json;

// Program, files in and stdin travel inside the request (base64 for bytes that are not UTF-8):
// past this the request could not fit any supervisor's server.max_json_body_kb (at most 1 GiB).
constexpr uint64_t kMaxCarried = 768ull << 20;

constexpr const char* kTooLargeHint =
    "; the program, --file contents and stdin travel inside the request to airlock serve, "
    "within its policy's server.max_json_body_kb (use --local to run in this process, or a "
    "sandbox and `airlock files put`)";

// An --out whose destination a transfer plugin of the supervisor takes (a URL, hostdir:...):
// sent as a transfer out, not carried back as a file.
bool transferOut(const sandbox::FileCopy& f) {
  return sandbox::namesTransfer(f.local) && !f.local.starts_with("file:");
}

// The --out files carried back in the answer, in the order the record lists them.
std::vector<const sandbox::FileCopy*> filesOut(const sandbox::RunRequest& req) {
  std::vector<const sandbox::FileCopy*> out;
  for (const auto& f : req.files_out)
    if (!transferOut(f)) out.push_back(&f);
  return out;
}

// 0 when a connection to `ep` is accepted, else the errno of the attempt.
int probe(const sdk::Endpoint& ep) {
  int fd = sdk::connectSocket(ep);
  if (fd < 0) return -fd;
  close(fd);
  return 0;
}

// A signal ends this process at once; closing the connection is how the supervisor learns to
// stop the run and remove its sandbox. Messages are made before any signal can arrive.
char g_stop_message[3][96];

void onStopSignal(int signo) {
  const char* m = g_stop_message[signo == SIGINT ? 0 : signo == SIGTERM ? 1 : 2];
  (void)!write(STDERR_FILENO, m, std::strlen(m));
  _exit(128 + signo);
}

void installSignals() {
  const int signals[3] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction sa {};
  sa.sa_handler = &onStopSignal;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; ++i) {
    std::snprintf(g_stop_message[i], sizeof g_stop_message[i],
                  "airlock: run: stopped by SIG%s; the supervisor removes the sandbox\n",
                  sigabbrev_np(signals[i]));
    sigaction(signals[i], &sa, nullptr);
  }
  signal(SIGPIPE, SIG_IGN);  // a closed stdout must not kill us before the run is reported
}

void writeAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the reader went away; the run goes on
    data.remove_prefix(static_cast<size_t>(n));
  }
}

// Text under `key` when it is UTF-8, else base64 under `key`_base64.
void putBytes(Json& j, const std::string& key, const std::string& bytes) {
  if (encoding::isValidUtf8(bytes))
    j[key] = bytes;
  else
    j[key + "_base64"] = encoding::base64Encode(bytes);
}

// The whole of `fd`, counting against what one request may carry.
Result<std::string> readAll(int fd, const std::string& what, uint64_t& carried) {
  std::string data;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sysError("read", what);
    if (n == 0) return data;
    carried += static_cast<uint64_t>(n);
    if (carried > kMaxCarried)
      return fail("the run's program, files and stdin are over " +
                  std::to_string(kMaxCarried >> 20) + " MiB" + kTooLargeHint);
    data.append(buf, static_cast<size_t>(n));
  }
}

Result<std::string> readLocal(const std::string& path, uint64_t& carried) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return sysError("open", path);
  return readAll(fd.get(), path, carried);
}

Result<> writeLocal(const std::string& path, std::string_view data) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) return sysError("open", path);
  while (!data.empty()) {
    ssize_t n = write(fd.get(), data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      auto e = sysError("write", path);
      unlink(path.c_str());  // no half-written copies
      return e;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

Result<> requireText(const std::string& text, const std::string& what) {
  if (encoding::isValidUtf8(text)) return {};
  return fail(what + " is not UTF-8 text, which a run through airlock serve needs (use --local)");
}

// The POST /v1/runs body for `req`; messages as the in-process run words them.
Result<Json> buildRequest(const sandbox::RunRequest& req, bool pass_stdin) {
  Json body = {{"stream", true}};
  uint64_t carried = 0;
  if (!req.profile.empty()) body["profile"] = req.profile;
  if (!req.language.empty()) body["language"] = req.language;
  if (req.inline_code) {
    if (req.language.empty())
      return fail(
          "no language given: pass --lang (python, node, shell) or a script file with a known "
          "extension");
    carried += req.code.size();
    putBytes(body, "code", req.code);
  } else {
    auto content = readLocal(req.script, carried);
    if (!content) return Unexpected(content.error());
    const std::string name = std::filesystem::path(req.script).filename().string();
    if (auto t = requireText(name, "the script's name '" + req.script + "'"); !t)
      return Unexpected(t.error());
    Json script = {{"name", name}};
    putBytes(script, "content", *content);
    body["script"] = std::move(script);
  }
  for (const auto& a : req.args)
    if (auto t = requireText(a, "argument '" + a + "'"); !t) return Unexpected(t.error());
  body["args"] = req.args;
  for (const auto& [k, v] : req.env)
    if (auto t = requireText(k + v, "--env " + k); !t) return Unexpected(t.error());
  body["env"] = req.env;
  if (req.timeout_s) body["timeout_s"] = *req.timeout_s;
  if (req.memory_mb) body["memory_mb"] = *req.memory_mb;
  body["files_in"] = Json::array();
  for (const auto& f : req.files_in) {
    auto content = readLocal(f.local, carried);
    if (!content)
      return Unexpected(std::move(content.error()).wrap("--file " + f.local + ":" + f.sandbox));
    if (auto t = requireText(f.sandbox, "--file " + f.local + ":" + f.sandbox); !t)
      return Unexpected(t.error());
    Json file = {{"path", f.sandbox}};
    putBytes(file, "content", *content);
    body["files_in"].push_back(std::move(file));
  }
  body["files_out"] = Json::array();
  body["transfers_out"] = Json::array();
  for (const auto& f : req.files_out) {
    if (auto t = requireText(f.sandbox + f.local, "--out " + f.sandbox); !t)
      return Unexpected(t.error());
    if (transferOut(f))
      body["transfers_out"].push_back({{"path", f.sandbox}, {"dest", f.local}});
    else
      body["files_out"].push_back({{"path", f.sandbox}});
  }
  body["transfers_in"] = Json::array();
  for (const auto& t : req.transfers_in) {
    if (auto ok = requireText(t.local + t.sandbox, "--in " + t.local); !ok)
      return Unexpected(ok.error());
    body["transfers_in"].push_back({{"source", t.local}, {"path", t.sandbox}});
  }
  if (pass_stdin) {
    auto data = readAll(STDIN_FILENO, "standard input", carried);
    if (!data) return Unexpected(data.error());
    putBytes(body, "stdin", *data);
  }
  return body;
}

// The bytes of a stdout/stderr event ("data" text or "data_base64").
std::string eventBytes(const Json& event) {
  auto it = event.find("data");
  if (it != event.end() && it->is_string()) return it->get<std::string>();
  it = event.find("data_base64");
  if (it != event.end() && it->is_string())
    return encoding::base64Decode(it->get_ref<const std::string&>()).value_or("");
  return {};
}

// Fills in the record what only this side knows (local paths), writes the files out, prints
// what the in-process run prints, and returns its exit code.
int report(Json result, const sandbox::RunRequest& req, const RemoteRun& options,
           const uint64_t kept[2]) {
  Json record = result.value("record", Json::object());
  if (!record.is_object()) record = sandbox::errorRecord("the supervisor sent a malformed result");
  if (auto it = record.find("files_in"); it != record.end() && it->is_array())
    for (size_t i = 0; i < it->size() && i < req.files_in.size(); ++i)
      (*it)[i]["local_path"] = req.files_in[i].local;
  bool out_failed = false;
  const Json carried = result.value("files_out", Json::array());
  const auto files_out = filesOut(req);
  if (auto it = record.find("files_out"); it != record.end() && it->is_array()) {
    for (size_t i = 0; i < it->size() && i < files_out.size(); ++i) {
      Json& f = (*it)[i];
      f["local_path"] = files_out[i]->local;
      if (f.value("error", Json()).is_null()) {
        std::optional<std::string> bytes;
        if (i < carried.size() && carried[i].is_object() &&
            carried[i].value("content_base64", Json()).is_string())
          bytes = encoding::base64Decode(carried[i]["content_base64"].get<std::string>());
        auto w = bytes ? writeLocal(files_out[i]->local, *bytes)
                       : Result<>(fail("the supervisor sent no content for it"));
        if (!w) {
          f["error"] = w.error().message();
          f["bytes"] = 0;
        }
      }
      out_failed = out_failed || !f.value("error", Json()).is_null();
    }
  }

  if (options.json) {
    std::cout << record.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
  } else {
    if (auto m = record.value("message", Json()); m.is_string() && !m.get<std::string>().empty())
      printError(m.get<std::string>());
    for (int i = 0; i < 2; ++i) {
      const std::string stream = i == 0 ? "stdout" : "stderr";
      if (record.value(stream + "_truncated", false))
        printError(stream + " truncated: kept " + std::to_string(kept[i]) + " of " +
                   std::to_string(record.value(stream + "_bytes", uint64_t{0})) +
                   " bytes (limits.output_bytes)");
    }
    if (auto it = record.find("files_out"); it != record.end() && it->is_array())
      for (const auto& f : *it)
        if (f.value("error", Json()).is_string())
          printError("--out " + f.value("sandbox_path", std::string()) + ": " +
                     f["error"].get<std::string>());
  }
  // A program that succeeded but whose output could not be copied out did not do its job.
  if (out_failed && record.value("status", "") == "exited" &&
      record.value("exit_code", Json()) == 0)
    return sandbox::kExitAirlockError;
  const Json code = record.value("airlock_exit_code", Json());
  return code.is_number_integer() ? code.get<int>() : sandbox::kExitAirlockError;
}

}  // namespace

Result<std::optional<sdk::Endpoint>> reachableSupervisor(std::string& tried) {
  auto ep = sdk::endpointFromEnvironment();
  if (!ep) return fail(ep.error().message());
  int err = probe(*ep);
  if (err == 0) return std::optional<sdk::Endpoint>(*ep);
  tried = "no `airlock serve` accepts connections at " + ep->describe() + " (" +
          Error::errnoName(err) + ")";
  return std::optional<sdk::Endpoint>();
}

int runRemote(const sdk::Endpoint& endpoint, const sandbox::RunRequest& req,
              const RemoteRun& options) {
  installSignals();
  auto failed = [&](const std::string& message) {
    if (options.json)
      std::cout << sandbox::errorRecord(message).dump(-1, ' ', false,
                                                      Json::error_handler_t::replace)
                << "\n";
    else
      printError(message);
    return sandbox::kExitAirlockError;
  };
  auto body = buildRequest(req, options.pass_stdin);
  if (!body) return failed(body.error().message());

  const char* token = std::getenv("AIRLOCK_TOKEN");
  sdk::Http http(endpoint, token != nullptr ? token : "");
  uint64_t kept[2] = {0, 0};
  std::optional<Json> result;
  // The supervisor sends each relaxation as a notice before any output; without -v they are
  // said as one line, when the first other event comes.
  constexpr std::string_view kRelaxation = "policy relaxation: ";
  std::vector<std::string> relaxations;
  auto sayRelaxations = [&] {
    if (!relaxations.empty() && !options.json)
      printError(policy::relaxationSummary(relaxations) + "; -v for details");
    relaxations.clear();
  };
  auto streamed = http.stream("POST", "/v1/runs", *body, [&](const Json& event) {
    const std::string type = event.value("type", "");
    const std::string message = type == "notice" ? event.value("message", "") : "";
    if (!options.verbose && message.starts_with(kRelaxation)) {
      relaxations.push_back(message.substr(kRelaxation.size()));
      return;
    }
    sayRelaxations();
    if (type == "stdout" || type == "stderr") {
      std::string bytes = eventBytes(event);
      kept[type == "stdout" ? 0 : 1] += bytes.size();
      if (!options.json) writeAll(type == "stdout" ? STDOUT_FILENO : STDERR_FILENO, bytes);
    } else if (type == "notice") {
      if (!options.json) printError(event.value("message", ""));
    } else if (type == "result") {
      result = event;
    }
  });
  sayRelaxations();
  const std::string where = "run: airlock serve at " + endpoint.describe() + ": ";
  if (!streamed) {
    std::string m = where + streamed.error().message();
    if (streamed.error().httpStatus() == 413) m += kTooLargeHint;
    return failed(m);
  }
  if (!result) return failed(where + "the run's events ended without its result");
  return report(std::move(*result), req, options, kept);
}

}  // namespace airlock::cli
