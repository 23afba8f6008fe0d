// airlock sandbox|exec|code|files and review ls|approve|reject: talk to a running `airlock serve`
// through its HTTP API (docs/api.md). Each command turns flags into one or a few requests and the
// answers into output and an exit code.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include "airlock/unique_fd.h"
#include "supervisor/cli/cli.h"
#include "supervisor/client/client.h"
#include "supervisor/encoding/base64.h"
#include "supervisor/sandbox/run_result.h"

namespace po = boost::program_options;

namespace airlock::cli {

namespace {

using client::Client;
using client::Json;
using client::percentEncode;
using Clock = std::chrono::steady_clock;

constexpr int kExitFailed = sandbox::kExitAirlockError;  // 125: the client or the supervisor failed
constexpr int kExitTimeout = sandbox::kExitTimeout;      // 124

constexpr const char* kSandboxUsage = R"(Usage:
  airlock sandbox create [--profile P] [--language L] [--name N] [--env K=V]... [--meta K=V]...
                         [--keep-alive S] [--lifetime S] [--persistent] [--json]
  airlock sandbox ls [--meta K=V]... [--json]
  airlock sandbox get SB [--json]
  airlock sandbox rm SB...
  airlock sandbox keepalive SB [--keep-alive S] [--lifetime S] [--json]

Manages sandboxes of a running `airlock serve`. SB is a sandbox id or name. The supervisor is
found from AIRLOCK_URL (unix:///path/to.sock or http://127.0.0.1:PORT; default
unix:///run/airlock/airlock.sock) and AIRLOCK_TOKEN (sent as a bearer token).

Exit code: 0 on success; 125 when the request failed (bad flags, supervisor not reachable, or
an error answer such as an unknown sandbox).
)";

constexpr const char* kExecUsage = R"(Usage:
  airlock exec SB [options] -- ARGV...
  airlock exec SB [options] --cmd 'shell string'

Runs a command in sandbox SB and streams its stdout and stderr live. ARGV[0] is looked up on
the sandbox's PATH; --cmd runs the string with /bin/sh -c.

Exit code: the command's own; 128+N when it was killed by signal N; 124 when it hit its
timeout; 125 when airlock failed (bad flags, supervisor not reachable, error answer).

Options)";

constexpr const char* kCodeUsage = R"(Usage: airlock code SB [options] (-c CODE | FILE | -)

Runs code in a stateful context of sandbox SB: variables, imports and files persist between
calls to the same context. Prints stdout and stderr live, then the value of the last
expression. Every display image (e.g. each open matplotlib figure) is written to
airlock-display-<n>.png in the current directory (or --save-dir).

Exit code: 0 when the code ran; 1 when it raised an error or its context was lost; 124 when it
hit its timeout; 125 when airlock failed (bad flags, supervisor not reachable, error answer).

Options)";

constexpr const char* kFilesUsage = R"(Usage:
  airlock files put SB LOCAL SANDBOX_PATH [--mode OCTAL] [--progress]
  airlock files get SB SANDBOX_PATH LOCAL [--progress]
  airlock files ls SB [SANDBOX_PATH] [--json]

Copies files into and out of sandbox SB, streaming them (any size). Relative sandbox paths are
under /home/user; a SANDBOX_PATH ending in '/' (put) or a LOCAL directory (get) keeps the file's
name; LOCAL '-' (get) writes to stdout. Progress goes to stderr when it is a terminal or with
--progress.

Exit code: 0 on success; 125 when the transfer failed.
)";

// "airlock: <message>" on stderr, like printError (cli.cc), without needing the dispatcher.
void report(const std::string& message) { std::cerr << "airlock: " << message << "\n"; }

// ---- small helpers ----

std::string str(const Json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return "";
  const Json& v = j[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  return v.dump();
}

int64_t num(const Json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return 0;
  return j[key].is_number_float() ? static_cast<int64_t>(j[key].get<double>())
                                  : j[key].get<int64_t>();
}

bool flag(const Json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_boolean() && j[key].get<bool>();
}

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// 42s, 5m, 3h, 2d: the largest whole unit.
std::string humanDuration(int64_t ms) {
  int64_t s = ms / 1000;
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m";
  if (s < 86400) return std::to_string(s / 3600) + "h";
  return std::to_string(s / 86400) + "d";
}

std::string humanBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) bytes /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buf;
}

std::string sandboxTarget(const std::string& sb) { return "/v1/sandboxes/" + percentEncode(sb); }

// Relative sandbox paths are under /home/user, as in `airlock run --file`.
std::string sandboxPath(const std::string& p) { return p.starts_with('/') ? p : "/home/user/" + p; }

Result<std::map<std::string, std::string>> parseKeyValues(const std::vector<std::string>& items,
                                                          const std::string& flag_name) {
  std::map<std::string, std::string> out;
  for (const auto& kv : items) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) return fail(flag_name + " '" + kv + "': expected K=V");
    out[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return out;
}

Result<> writeAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sysError("write", fd == STDOUT_FILENO ? "stdout" : "stderr");
    data.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

// The bytes of a stdout/stderr event: "data" when UTF-8, else "data_base64".
std::string eventBytes(const Json& ev) {
  if (ev.contains("data") && ev["data"].is_string()) return ev["data"].get<std::string>();
  if (ev.contains("data_base64") && ev["data_base64"].is_string())
    return encoding::base64Decode(ev["data_base64"].get<std::string>()).value_or("");
  return "";
}

// Parses flags and positionals. A value means: stop and exit with it (help shown, bad flags).
std::optional<int> parseArgs(const std::string& name, const std::vector<std::string>& args,
                             po::options_description& opts, po::variables_map& vm,
                             std::vector<std::string>& positional) {
  opts.add_options()("help,h", "show this help");
  po::options_description hidden;
  hidden.add_options()("positional", po::value(&positional)->composing(), "");
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description pos;
  pos.add("positional", -1);
  try {
    po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    report(name + ": " + e.what() + " (see `airlock " + name + " --help`)");
    return kExitFailed;
  }
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  return std::nullopt;
}

Result<Client> connectClient() { return Client::fromEnvironment(); }

// Prints `r`'s error and returns 125, or runs `ok` on its value.
template <typename T, typename F>
int orFail(Result<T> r, F&& ok) {
  if (!r) {
    report(r.error().message());
    return kExitFailed;
  }
  return ok(*r);
}

// ---- airlock sandbox ----

void printTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], row[i].size());
    }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    std::cout << line << "\n";
  }
}

std::string untilText(int64_t at_ms, int64_t now) {
  if (at_ms <= 0) return "-";
  if (at_ms <= now) return "now";
  return "in " + humanDuration(at_ms - now);
}

std::string metadataText(const Json& sb) {
  std::string out;
  if (!sb.contains("metadata") || !sb["metadata"].is_object()) return out;
  for (const auto& [k, v] : sb["metadata"].items())
    out += (out.empty() ? "" : ",") + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
  return out;
}

void printSandbox(const Json& sb) {
  int64_t now = nowMs();
  auto ago = [&](const char* key) {
    int64_t at = num(sb, key);
    return at > 0 ? humanDuration(std::max<int64_t>(0, now - at)) + " ago" : std::string("-");
  };
  std::vector<std::vector<std::string>> rows = {
      {"id:", str(sb, "id")},
      {"name:", str(sb, "name").empty() ? "-" : str(sb, "name")},
      {"tenant:", str(sb, "tenant")},
      {"profile:", str(sb, "profile")},
      {"language:", str(sb, "language")},
      {"state:", str(sb, "state")},
      {"persistent:", flag(sb, "persistent") ? "yes" : "no"},
      {"metadata:", metadataText(sb).empty() ? "-" : metadataText(sb)},
      {"created:", ago("created_at")},
      {"last active:", ago("last_active_at")},
      {"keep-alive:", std::to_string(num(sb, "keep_alive_s")) + "s"},
      {"idle expires:", untilText(num(sb, "idle_expires_at"), now)},
      {"lifetime:", std::to_string(num(sb, "lifetime_s")) + "s"},
      {"ends:", untilText(num(sb, "ends_at"), now)},
      {"commands running:", std::to_string(num(sb, "commands_running"))},
      {"contexts:", std::to_string(num(sb, "contexts"))},
  };
  printTable(rows);
}

int sandboxCreate(const std::vector<std::string>& args) {
  std::string profile, language, name;
  std::vector<std::string> env, meta, positional;
  int64_t keep_alive = 0, lifetime = 0;
  bool persistent = false, json = false;
  po::options_description opts("Usage: airlock sandbox create [options]\n\nOptions");
  opts.add_options()("profile,p", po::value(&profile), "profile of the supervisor's policy")(
      "language,l", po::value(&language), "default language of `airlock code` calls")(
      "name,n", po::value(&name), "a name, unique among your sandboxes ([a-zA-Z0-9._-]{1,63})")(
      "env,e", po::value(&env)->composing(), "K=V for every process in the sandbox (repeatable)")(
      "meta", po::value(&meta)->composing(), "K=V metadata to find it by (repeatable)")(
      "keep-alive", po::value(&keep_alive), "seconds it may sit idle before it is destroyed")(
      "lifetime", po::value(&lifetime), "seconds until it is destroyed, whatever the activity")(
      "persistent", po::bool_switch(&persistent),
      "keep /home/user on disk for the next sandbox of the same --name")(
      "json", po::bool_switch(&json), "print the sandbox as JSON instead of its id");
  po::variables_map vm;
  if (auto exit = parseArgs("sandbox create", args, opts, vm, positional)) return *exit;
  if (!positional.empty()) {
    report("sandbox create: unexpected argument '" + positional[0] + "'");
    return kExitFailed;
  }
  Json body = Json::object();
  if (!profile.empty()) body["profile"] = profile;
  if (!language.empty()) body["language"] = language;
  if (!name.empty()) body["name"] = name;
  auto env_map = parseKeyValues(env, "--env");
  auto meta_map = parseKeyValues(meta, "--meta");
  if (!env_map || !meta_map) {
    report("sandbox create: " + (!env_map ? env_map : meta_map).error().message());
    return kExitFailed;
  }
  if (!env_map->empty()) body["env"] = *env_map;
  if (!meta_map->empty()) body["metadata"] = *meta_map;
  if (vm.count("keep-alive")) body["keep_alive_s"] = keep_alive;
  if (vm.count("lifetime")) body["lifetime_s"] = lifetime;
  if (persistent) body["persistent"] = true;
  auto c = connectClient();
  if (!c) return report(c.error().message()), kExitFailed;
  return orFail(c->call("POST", "/v1/sandboxes", body), [&](const Json& sb) {
    std::cout << (json ? sb.dump(2) : str(sb, "id")) << "\n";
    return 0;
  });
}

int sandboxList(const std::vector<std::string>& args) {
  std::vector<std::string> meta, positional;
  bool json = false;
  po::options_description opts("Usage: airlock sandbox ls [options]\n\nOptions");
  opts.add_options()("meta", po::value(&meta)->composing(),
                     "K=V: only sandboxes with this metadata (repeatable)")(
      "json", po::bool_switch(&json), "print the answer as JSON");
  po::variables_map vm;
  if (auto exit = parseArgs("sandbox ls", args, opts, vm, positional)) return *exit;
  auto meta_map = parseKeyValues(meta, "--meta");
  if (!meta_map) return report("sandbox ls: " + meta_map.error().message()), kExitFailed;
  std::string target = "/v1/sandboxes";
  char sep = '?';
  for (const auto& [k, v] : *meta_map) {
    target += sep + ("metadata." + percentEncode(k)) + "=" + percentEncode(v);
    sep = '&';
  }
  auto c = connectClient();
  if (!c) return report(c.error().message()), kExitFailed;
  return orFail(c->call("GET", target), [&](const Json& answer) {
    if (json) {
      std::cout << answer.dump(2) << "\n";
      return 0;
    }
    int64_t now = nowMs();
    std::vector<std::vector<std::string>> rows = {
        {"ID", "NAME", "PROFILE", "STATE", "AGE", "IDLE-EXPIRES"}};
    if (answer.contains("sandboxes") && answer["sandboxes"].is_array())
      for (const auto& sb : answer["sandboxes"]) {
        int64_t created = num(sb, "created_at");
        rows.push_back({str(sb, "id"), str(sb, "name").empty() ? "-" : str(sb, "name"),
                        str(sb, "profile"), str(sb, "state"),
                        created > 0 ? humanDuration(std::max<int64_t>(0, now - created)) : "-",
                        untilText(num(sb, "idle_expires_at"), now)});
      }
    printTable(rows);
    return 0;
  });
}

int sandboxGet(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  bool json = false;
  po::options_description opts("Usage: airlock sandbox get SB [options]\n\nOptions");
  opts.add_options()("json", po::bool_switch(&json), "print the sandbox as JSON");
  po::variables_map vm;
  if (auto exit = parseArgs("sandbox get", args, opts, vm, positional)) return *exit;
  if (positional.size() != 1) return report("sandbox get: expected one SB"), kExitFailed;
  auto c = connectClient();
  if (!c) return report(c.error().message()), kExitFailed;
  return orFail(c->call("GET", sandboxTarget(positional[0])), [&](const Json& sb) {
    if (json)
      std::cout << sb.dump(2) << "\n";
    else
      printSandbox(sb);
    return 0;
  });
}

int sandboxRemove(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  po::options_description opts("Usage: airlock sandbox rm SB...\n\nOptions");
  po::variables_map vm;
  if (auto exit = parseArgs("sandbox rm", args, opts, vm, positional)) return *exit;
  if (positional.empty()) return report("sandbox rm: expected at least one SB"), kExitFailed;
  auto c = connectClient();
  if (!c) return report(c.error().message()), kExitFailed;
  int exit = 0;
  for (const auto& sb : positional) {
    auto r = c->call("DELETE", sandboxTarget(sb));
    if (!r) {
      report(r.error().message());
      exit = kExitFailed;
    } else {
      std::cout << sb << "\n";
    }
  }
  return exit;
}

int sandboxKeepAlive(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  int64_t keep_alive = 0, lifetime = 0;
  bool json = false;
  po::options_description opts("Usage: airlock sandbox keepalive SB [options]\n\nOptions");
  opts.add_options()("keep-alive", po::value(&keep_alive), "new idle limit in seconds")(
      "lifetime", po::value(&lifetime), "new lifetime in seconds (from creation)")(
      "json", po::bool_switch(&json), "print the sandbox as JSON");
  po::variables_map vm;
  if (auto exit = parseArgs("sandbox keepalive", args, opts, vm, positional)) return *exit;
  if (positional.size() != 1) return report("sandbox keepalive: expected one SB"), kExitFailed;
  Json body = Json::object();
  if (vm.count("keep-alive")) body["keep_alive_s"] = keep_alive;
  if (vm.count("lifetime")) body["lifetime_s"] = lifetime;
  auto c = connectClient();
  if (!c) return report(c.error().message()), kExitFailed;
  return orFail(c->call("POST", sandboxTarget(positional[0]) + "/keepalive", body),
                [&](const Json& sb) {
                  int64_t now = nowMs();
                  if (json)
                    std::cout << sb.dump(2) << "\n";
                  else
                    std::cout << positional[0] << ": idle expires "
                              << untilText(num(sb, "idle_expires_at"), now) << ", ends "
                              << untilText(num(sb, "ends_at"), now) << "\n";
                  return 0;
                });
}

// ---- airlock exec ----

// The supervisor gives a foreground command its stdin in the request (docs/api.md `stdin`), so
// `--stdin` reads ours first; past this, the JSON body (8 MiB by default) would be refused.
constexpr size_t kMaxStdinBytes = 6 << 20;

Result<std::string> readStdinForCommand() {
  std::string data;
  auto buf = std::make_unique<char[]>(64 * 1024);
  for (;;) {
    ssize_t n = ::read(STDIN_FILENO, buf.get(), 64 * 1024);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sysError("read", "stdin");
    if (n == 0) return data;
    data.append(buf.get(), static_cast<size_t>(n));
    if (data.size() > kMaxStdinBytes)
      return fail("stdin is larger than " + std::to_string(kMaxStdinBytes >> 20) +
                  " MiB; copy it in with `airlock files put` and redirect from the file");
  }
}

int execMain(const std::vector<std::string>& raw_args) {
  // Everything after "--" is the command, even words that look like our flags.
  std::vector<std::string> args, argv;
  bool after_dashes = false;
  for (const auto& a : raw_args) {
    if (!after_dashes && a == "--") {
      after_dashes = true;
      continue;
    }
    (after_dashes ? argv : args).push_back(a);
  }
  std::vector<std::string> env, positional;
  std::string cwd, cmd;
  double timeout = 0;
  bool background = false, forward_stdin = false;
  po::options_description opts(kExecUsage);
  opts.add_options()("env,e", po::value(&env)->composing(),
                     "K=V added to the command's environment (repeatable)")(
      "cwd", po::value(&cwd), "working directory (default /home/user)")(
      "timeout,t", po::value(&timeout), "wall-clock limit in seconds (capped by the profile)")(
      "cmd", po::value(&cmd), "a /bin/sh -c string instead of ARGV")(
      "background", po::bool_switch(&background),
      "start it and print its command id; it keeps running")(
      "stdin", po::bool_switch(&forward_stdin), "pass our stdin (up to 6 MiB) to the command");
  po::variables_map vm;
  if (auto exit = parseArgs("exec", args, opts, vm, positional)) return *exit;
  if (positional.empty())
    return report("exec: expected SB (see `airlock exec --help`)"), kExitFailed;
  std::string sb = positional[0];
  // Without "--", words after SB are the command (`airlock exec sb ls`).
  if (!after_dashes)
    argv.assign(positional.begin() + 1, positional.end());
  else if (positional.size() > 1)
    return report("exec: unexpected argument '" + positional[1] + "' before --"), kExitFailed;
  if (argv.empty() == cmd.empty())
    return report("exec: give either -- ARGV... or --cmd 'shell string'"), kExitFailed;
  if (background && forward_stdin)
    return report("exec: --stdin needs a foreground command"), kExitFailed;
  auto env_map = parseKeyValues(env, "--env");
  if (!env_map) return report("exec: " + env_map.error().message()), kExitFailed;

  Json body = Json::object();
  if (!argv.empty())
    body["argv"] = argv;
  else
    body["cmd"] = cmd;
  if (!env_map->empty()) body["env"] = *env_map;
  if (!cwd.empty()) body["cwd"] = cwd;
  if (vm.count("timeout")) body["timeout_s"] = timeout;
  auto c = connectClient();
  if (!c) return report(c.error().message()), kExitFailed;
  const std::string commands = sandboxTarget(sb) + "/commands";

  if (background) {
    body["background"] = true;
    return orFail(c->call("POST", commands, body), [&](const Json& started) {
      std::cout << str(started, "command_id") << "\n";
      return 0;
    });
  }

  if (forward_stdin) {
    auto input = readStdinForCommand();
    if (!input) return report("exec: " + input.error().message()), kExitFailed;
    body["stdin_base64"] = encoding::base64Encode(*input);
  }
  body["stream"] = true;
  std::optional<Json> exit_event;
  auto r = c->stream("POST", commands, body, [&](const Json& ev) {
    std::string type = str(ev, "type");
    if (type == "stdout" || type == "stderr") {
      (void)writeAll(type == "stdout" ? STDOUT_FILENO : STDERR_FILENO, eventBytes(ev));
    } else if (type == "exit") {
      exit_event = ev;
    }
  });
  if (!r) return report(r.error().message()), kExitFailed;
  if (!exit_event) {
    report("exec: the supervisor ended the event stream before the command exited");
    return kExitFailed;
  }
  const Json& ex = *exit_event;
  for (const char* s : {"stdout", "stderr"})
    if (flag(ex, (std::string(s) + "_truncated").c_str()))
      report(std::string(s) + " truncated after " +
             std::to_string(num(ex, (std::string(s) + "_bytes").c_str())) +
             " bytes (the profile's output limit)");
  if (flag(ex, "timed_out")) {
    report("exec: the command hit its timeout and was killed");
    return kExitTimeout;
  }
  if (int sig = static_cast<int>(num(ex, "signal")); sig > 0) {
    const char* abbrev = sigabbrev_np(sig);
    report("exec: the command was killed by " +
           (abbrev != nullptr ? "SIG" + std::string(abbrev) : "signal " + std::to_string(sig)));
    return 128 + sig;
  }
  return static_cast<int>(num(ex, "exit_code"));
}

// ---- airlock code ----

Result<std::string> readCodeFrom(const std::string& path) {
  std::ostringstream ss;
  if (path == "-") {
    ss << std::cin.rdbuf();
    if (std::cin.bad()) return fail("cannot read the code from standard input");
    return ss.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return sysError("open", path);
  ss << in.rdbuf();
  if (in.bad()) return sysError("read", path);
  return ss.str();
}

class DisplaySaver {
 public:
  explicit DisplaySaver(std::string dir) : dir_(std::move(dir)) {}
  bool failed() const { return failed_; }

  // Writes data["image/png"] to <dir>/airlock-display-<n>.png. False when there is no PNG.
  bool save(const Json& data) {
    if (!data.is_object() || !data.contains("image/png") || !data["image/png"].is_string())
      return false;
    ++count_;
    std::string path =
        (std::filesystem::path(dir_) / ("airlock-display-" + std::to_string(count_) + ".png"))
            .string();
    std::string b64 = data["image/png"].get<std::string>();
    std::erase_if(b64, [](char ch) { return ch == '\n' || ch == '\r'; });
    auto png = encoding::base64Decode(b64);
    if (!png) {
      report("code: display " + std::to_string(count_) + ": image/png is not valid base64");
      failed_ = true;
      return true;
    }
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(png->data(), static_cast<std::streamsize>(png->size()));
    out.close();
    if (!out) {
      report("code: cannot write display " + std::to_string(count_) + " to '" + path +
             "': " + std::strerror(errno));
      failed_ = true;
      return true;
    }
    report("display " + std::to_string(count_) + " saved to " + path);
    return true;
  }

 private:
  std::string dir_;
  int count_ = 0;
  bool failed_ = false;
};

void printCodeError(const Json& ev) {
  std::string name = str(ev, "name"), value = str(ev, "value");
  std::string summary = value.empty() ? name : name + ": " + value;
  std::string text;
  std::string last;
  if (ev.contains("traceback") && ev["traceback"].is_array())
    for (const auto& line : ev["traceback"]) {
      if (!line.is_string()) continue;
      last = line.get<std::string>();
      text += last;
      if (!last.ends_with('\n')) text += '\n';
    }
  while (!last.empty() && (last.back() == '\n' || last.back() == ' ')) last.pop_back();
  // Python's own traceback already ends with "Name: value".
  if (last != summary) text += summary + "\n";
  std::cerr << text << std::flush;
}

int codeMain(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  std::string language, context, code, save_dir = ".";
  double timeout = 0;
  po::options_description opts(kCodeUsage);
  opts.add_options()("code,c", po::value(&code), "the code text")(
      "language,l", po::value(&language),
      "python or node (default: the sandbox's language; FILE's extension)")(
      "context", po::value(&context), "context id (default: the language's default context)")(
      "timeout,t", po::value(&timeout), "wall-clock limit in seconds (capped by the profile)")(
      "save-dir", po::value(&save_dir), "where display images are written (default: .)");
  po::variables_map vm;
  if (auto exit = parseArgs("code", args, opts, vm, positional)) return *exit;
  if (positional.empty())
    return report("code: expected SB (see `airlock code --help`)"), kExitFailed;
  std::string sb = positional[0];
  if (vm.count("code") == (positional.size() == 2) || positional.size() > 2)
    return report("code: give exactly one of -c CODE, FILE or - (stdin)"), kExitFailed;
  if (!vm.count("code")) {
    auto text = readCodeFrom(positional[1]);
    if (!text) return report("code: " + text.error().message()), kExitFailed;
    code = std::move(*text);
    if (language.empty()) {
      auto ext = std::filesystem::path(positional[1]).extension().string();
      if (ext == ".py") language = "python";
      if (ext == ".js" || ext == ".mjs" || ext == ".cjs") language = "node";
    }
  }
  Json body = {{"code", code}, {"stream", true}};
  if (!language.empty()) body["language"] = language;
  if (!context.empty()) body["context_id"] = context;
  if (vm.count("timeout")) body["timeout_s"] = timeout;
  auto c = connectClient();
  if (!c) return report(c.error().message()), kExitFailed;

  DisplaySaver displays(save_dir);
  std::optional<Json> end;
  auto r = c->stream("POST", sandboxTarget(sb) + "/code", body, [&](const Json& ev) {
    std::string type = str(ev, "type");
    if (type == "stdout" || type == "stderr") {
      (void)writeAll(type == "stdout" ? STDOUT_FILENO : STDERR_FILENO, eventBytes(ev));
    } else if (type == "result" || type == "display") {
      const Json& data = ev.contains("data") ? ev["data"] : Json();
      bool saved = displays.save(data);
      // A result's value is always shown; a display's text only stands in for a missing image.
      if ((type == "result" || !saved) && data.is_object() && data.contains("text/plain")) {
        std::string text = str(data, "text/plain");
        if (!text.ends_with('\n')) text += '\n';
        (void)writeAll(STDOUT_FILENO, text);
      }
    } else if (type == "error") {
      printCodeError(ev);
    } else if (type == "end") {
      end = ev;
    }
  });
  if (!r) return report(r.error().message()), kExitFailed;
  if (!end) {
    report("code: the supervisor ended the event stream before the run ended");
    return kExitFailed;
  }
  std::string status = str(*end, "status");
  if (flag(*end, "context_restarted"))
    report("code: context '" + str(*end, "context_id") +
           "' was restarted: its variables and imports are gone");
  if (status == "timeout") {
    report("code: the run hit its timeout and was interrupted");
    return kExitTimeout;
  }
  if (status == "context_lost") {
    report("code: context '" + str(*end, "context_id") +
           "' was lost (its interpreter died); the next run starts a fresh one");
    return 1;
  }
  if (status == "error") return 1;
  if (status != "ok") {
    report("code: unknown end status '" + status + "'");
    return kExitFailed;
  }
  return displays.failed() ? kExitFailed : 0;
}

// ---- airlock files ----

// Progress of one transfer on stderr: a live line once it has taken over half a second, and
// the size and rate at the end.
class TransferProgress {
 public:
  TransferProgress(bool enabled, std::string verb) : enabled_(enabled), verb_(std::move(verb)) {}

  void update(uint64_t done, std::optional<uint64_t> total) {
    if (!enabled_) return;
    auto now = Clock::now();
    if (now - start_ < std::chrono::milliseconds(500) ||
        now - last_ < std::chrono::milliseconds(100))
      return;
    last_ = now;
    std::string line = "\r" + verb_ + " " + humanBytes(static_cast<double>(done));
    if (total && *total > 0)
      line += " / " + humanBytes(static_cast<double>(*total)) + " (" +
              std::to_string(done * 100 / *total) + "%)";
    line += "  " + humanBytes(rate(done)) + "/s   ";
    std::cerr << line << std::flush;
    shown_ = true;
  }

  void finish(uint64_t bytes) {
    if (!enabled_) return;
    double secs = std::chrono::duration<double>(Clock::now() - start_).count();
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s %s (%llu bytes) in %.2f s, %s/s", verb_.c_str(),
                  humanBytes(static_cast<double>(bytes)).c_str(),
                  static_cast<unsigned long long>(bytes), secs, humanBytes(rate(bytes)).c_str());
    std::cerr << (shown_ ? "\r\033[K" : "") << buf << "\n";
  }

 private:
  double rate(uint64_t bytes) const {
    double secs = std::chrono::duration<double>(Clock::now() - start_).count();
    return secs > 0 ? static_cast<double>(bytes) / secs : 0;
  }

  bool enabled_;
  std::string verb_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_{};
  bool shown_ = false;
};

std::string filesTarget(const std::string& sb, const std::string& route, const std::string& path) {
  return sandboxTarget(sb) + "/files" + route + "?path=" + percentEncode(path);
}

int filesPut(const Client& c, const std::vector<std::string>& positional, uint32_t mode,
             bool has_mode, bool progress) {
  if (positional.size() != 3)
    return report("files put: expected SB LOCAL SANDBOX_PATH"), kExitFailed;
  const std::string& local = positional[1];
  std::string dest = sandboxPath(positional[2]);
  if (dest.ends_with('/')) dest += std::filesystem::path(local).filename().string();
  UniqueFd fd(::open(local.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return report("files put: " + sysError("open", local).error().message()), kExitFailed;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return report("files put: " + sysError("fstat", local).error().message()), kExitFailed;
  if (!S_ISREG(st.st_mode))
    return report("files put: '" + local + "' is not a regular file"), kExitFailed;
  char mode_text[16];
  std::snprintf(mode_text, sizeof mode_text, "%04o", has_mode ? mode : (st.st_mode & 07777));
  std::string target = filesTarget(positional[0], "", dest) + "&mode=" + mode_text;
  TransferProgress p(progress, "sent");
  auto r = c.upload(target, fd.get(), static_cast<uint64_t>(st.st_size),
                    [&](uint64_t done, std::optional<uint64_t> total) { p.update(done, total); });
  if (!r) return report(r.error().message()), kExitFailed;
  p.finish(static_cast<uint64_t>(st.st_size));
  return 0;
}

int filesGet(const Client& c, const std::vector<std::string>& positional, bool progress) {
  if (positional.size() != 3)
    return report("files get: expected SB SANDBOX_PATH LOCAL"), kExitFailed;
  std::string src = sandboxPath(positional[1]);
  std::string local = positional[2];
  std::string target = filesTarget(positional[0], "", src);
  TransferProgress p(progress, "received");
  auto on_progress = [&](uint64_t done, std::optional<uint64_t> total) { p.update(done, total); };
  if (local == "-") {
    auto r = c.download(target, STDOUT_FILENO, on_progress);
    if (!r) return report(r.error().message()), kExitFailed;
    p.finish(*r);
    return 0;
  }
  std::error_code ec;
  if (std::filesystem::is_directory(local, ec))
    local = (std::filesystem::path(local) / std::filesystem::path(src).filename()).string();
  // Written beside the destination and renamed at the end, so a failed transfer leaves no
  // half file under the final name.
  std::string partial = local + ".airlock-partial-" + std::to_string(::getpid());
  UniqueFd fd(::open(partial.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
  if (!fd) return report("files get: " + sysError("open", partial).error().message()), kExitFailed;
  auto r = c.download(target, fd.get(), on_progress);
  if (r && ::fsync(fd.get()) != 0) r = sysError("fsync", partial);
  fd.reset();
  if (r && ::rename(partial.c_str(), local.c_str()) != 0) r = sysError("rename", local);
  if (!r) {
    ::unlink(partial.c_str());
    std::string m = r.error().message();
    report(m.starts_with("write") || m.starts_with("fsync") || m.starts_with("rename")
               ? "files get: " + m
               : m);
    return kExitFailed;
  }
  p.finish(*r);
  return 0;
}

std::string modeText(const std::string& type, uint32_t mode) {
  std::string s = type == "dir" ? "d" : type == "symlink" ? "l" : type == "file" ? "-" : "?";
  const char* rwx = "rwxrwxrwx";
  for (int i = 0; i < 9; ++i) s += (mode & (0400u >> i)) ? rwx[i] : '-';
  return s;
}

std::string timeText(int64_t ms) {
  if (ms <= 0) return "-";
  time_t t = static_cast<time_t>(ms / 1000);
  struct tm tm {};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

int filesList(const Client& c, const std::vector<std::string>& positional, bool json) {
  if (positional.empty() || positional.size() > 2)
    return report("files ls: expected SB [SANDBOX_PATH]"), kExitFailed;
  std::string path = sandboxPath(positional.size() == 2 ? positional[1] : "/home/user");
  return orFail(c.call("GET", filesTarget(positional[0], "/list", path)), [&](const Json& answer) {
    if (json) {
      std::cout << answer.dump(2) << "\n";
      return 0;
    }
    std::vector<std::vector<std::string>> rows;
    if (answer.contains("entries") && answer["entries"].is_array())
      for (const auto& e : answer["entries"]) {
        std::string type = str(e, "type");
        std::string suffix = type == "dir" ? "/" : type == "symlink" ? "@" : "";
        rows.push_back({modeText(type, static_cast<uint32_t>(num(e, "mode"))),
                        std::to_string(num(e, "size")), timeText(num(e, "mtime_ms")),
                        str(e, "name") + suffix});
      }
    printTable(rows);
    return 0;
  });
}

// ---- airlock review ls|approve|reject ----

constexpr const char* kReviewQueueUsage = R"(Usage:
  airlock review ls [--json]
  airlock review approve RID [--reason TEXT]
  airlock review reject RID [--reason TEXT]

Executions that a review rule held for approval wait in a running `airlock serve` until an
operator decides or their deadline passes (then they are denied). `ls` lists the pending ones
with the rule that held them and a preview of the code; `approve` lets one run, `reject` denies
it with the reason, which its caller sees. Only over the Unix socket (not TCP tokens).

Exit code: 0 on success; 125 when the request failed (e.g. the review already ended: 404).
)";

int reviewList(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  bool json = false;
  po::options_description opts("Usage: airlock review ls [--json]\n\nOptions");
  opts.add_options()("json", po::bool_switch(&json), "print the answer as JSON");
  po::variables_map vm;
  if (auto exit = parseArgs("review ls", args, opts, vm, positional)) return *exit;
  if (!positional.empty())
    return report("review ls: unexpected '" + positional[0] + "'"), kExitFailed;
  auto c = connectClient();
  if (!c) return report(c.error().message()), kExitFailed;
  return orFail(c->call("GET", "/v1/reviews"), [&](const Json& answer) {
    if (json) {
      std::cout << answer.dump(2) << "\n";
      return 0;
    }
    int64_t now = nowMs();
    std::vector<std::vector<std::string>> rows = {
        {"REVIEW", "SANDBOX", "TENANT", "KIND", "RULE", "WAITING", "DEADLINE", "PREVIEW"}};
    if (answer.contains("reviews") && answer["reviews"].is_array())
      for (const auto& r : answer["reviews"]) {
        std::string preview = str(r, "preview");
        for (char& ch : preview)
          if (ch == '\n' || ch == '\t') ch = ' ';
        if (preview.size() > 40) preview = preview.substr(0, 39) + "~";
        rows.push_back({str(r, "review_id"), str(r, "sandbox_id"), str(r, "tenant"),
                        str(r, "kind") + "/" + str(r, "language"),
                        str(r, "reviewer") + ":" + str(r, "rule"),
                        humanDuration(std::max<int64_t>(0, now - num(r, "requested_at"))),
                        untilText(num(r, "deadline_at"), now), preview});
      }
    printTable(rows);
    return 0;
  });
}

int reviewDecide(const std::string& verb, const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  std::string reason;
  po::options_description opts("Usage: airlock review " + verb + " RID [--reason TEXT]\n\nOptions");
  opts.add_options()("reason", po::value(&reason), "why, recorded and shown to the caller");
  po::variables_map vm;
  if (auto exit = parseArgs("review " + verb, args, opts, vm, positional)) return *exit;
  if (positional.size() != 1)
    return report("review " + verb + ": expected one review id (see `airlock review ls`)"),
           kExitFailed;
  auto c = connectClient();
  if (!c) return report(c.error().message()), kExitFailed;
  Json body = Json::object();
  if (!reason.empty()) body["reason"] = reason;
  return orFail(c->call("POST", "/v1/reviews/" + percentEncode(positional[0]) + "/" + verb, body),
                [&](const Json&) {
                  std::cout << (verb == "approve" ? "approved " : "rejected ") << positional[0]
                            << "\n";
                  return 0;
                });
}

}  // namespace

int reviewQueueCommand(const std::vector<std::string>& args) {
  if (args.empty()) return std::cout << kReviewQueueUsage, kExitFailed;
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "ls" || args[0] == "list") return reviewList(rest);
  if (args[0] == "approve" || args[0] == "reject") return reviewDecide(args[0], rest);
  report("review: unknown subcommand '" + args[0] + "'\n" + kReviewQueueUsage);
  return kExitFailed;
}

int execCommand(const std::vector<std::string>& args) { return execMain(args); }

int codeCommand(const std::vector<std::string>& args) { return codeMain(args); }

int sandboxCommand(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << kSandboxUsage;
    return args.empty() ? kExitFailed : 0;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  const std::string& verb = args[0];
  if (verb == "create") return sandboxCreate(rest);
  if (verb == "ls" || verb == "list") return sandboxList(rest);
  if (verb == "get") return sandboxGet(rest);
  if (verb == "rm" || verb == "delete") return sandboxRemove(rest);
  if (verb == "keepalive") return sandboxKeepAlive(rest);
  report("sandbox: unknown subcommand '" + verb + "'\n" + kSandboxUsage);
  return kExitFailed;
}

int filesCommand(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::cout << kFilesUsage;
    return args.empty() ? kExitFailed : 0;
  }
  const std::string verb = args[0];
  if (verb != "put" && verb != "get" && verb != "ls") {
    report("files: unknown subcommand '" + verb + "'\n" + kFilesUsage);
    return kExitFailed;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end()), positional;
  std::string mode_text;
  bool progress = false, json = false;
  po::options_description opts(std::string(kFilesUsage) + "\nOptions");
  opts.add_options()("mode", po::value(&mode_text),
                     "put: permission bits, octal (default: LOCAL's)")(
      "progress", po::bool_switch(&progress), "show progress even when stderr is not a terminal")(
      "json", po::bool_switch(&json), "ls: print the answer as JSON");
  po::variables_map vm;
  if (auto exit = parseArgs("files " + verb, rest, opts, vm, positional)) return *exit;
  uint32_t mode = 0;
  if (vm.count("mode")) {
    char* end = nullptr;
    unsigned long m = std::strtoul(mode_text.c_str(), &end, 8);
    if (mode_text.empty() || *end != '\0' || m > 07777)
      return report("files put: --mode '" + mode_text + "': expected octal bits like 0644"),
             kExitFailed;
    mode = static_cast<uint32_t>(m);
  }
  progress = progress || isatty(STDERR_FILENO);
  auto c = connectClient();
  if (!c) return report(c.error().message()), kExitFailed;
  if (verb == "put") return filesPut(*c, positional, mode, vm.count("mode") > 0, progress);
  if (verb == "get") return filesGet(*c, positional, progress);
  return filesList(*c, positional, json);
}

}  // namespace airlock::cli
