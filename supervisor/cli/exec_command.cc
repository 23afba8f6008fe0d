// airlock exec: a command in a sandbox of a running `airlock serve`, its output streamed live
// and its exit status turned into ours.
#include <unistd.h>

#include <boost/program_options.hpp>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <memory>

#include "supervisor/cli/cli.h"
#include "supervisor/cli/client_support.h"
#include "supervisor/encoding/base64.h"

namespace po = boost::program_options;

namespace airlock::cli {

namespace {

constexpr const char* kExecUsage = R"(Usage:
  airlock exec [options] SB CMD [ARGS...]
  airlock exec [options] SB -- CMD [ARGS...]
  airlock exec [options] SB --cmd 'shell string'

Runs a command in sandbox SB and streams its stdout and stderr live. CMD is looked up on the
sandbox's PATH; --cmd runs the string with /bin/sh -c. airlock's options come before CMD:
every word from CMD on is the command's own (`airlock exec sb ls -la`), so `exec sb ls
--timeout 5` passes --timeout to ls. "--" also ends airlock's options.

Exit code: the command's own; 128+N when it was killed by signal N; 124 when it hit its
timeout; 125 when airlock failed (bad flags, supervisor not reachable, error answer).

Options)";

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

// Where the command begins in `args`: at the first "--" (skipped), or at the second word that is
// not one of our options or their values (the first is SB). args.size() when there is none.
struct CommandStart {
  size_t index;
  bool after_dashes;
};
CommandStart findCommandStart(const std::vector<std::string>& args,
                              const po::options_description& opts) {
  size_t positionals = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") return {i + 1, true};
    if (a.size() < 2 || a[0] != '-') {
      if (++positionals == 2) return {i, false};
      continue;
    }
    // One of ours (or a mistake po reports): skip its value when it takes one and it is not
    // attached ("--timeout=5", "-t5"). Boost knows short options by their dashed name ("-t").
    const bool is_long = a.starts_with("--");
    const std::string name = is_long ? a.substr(2, a.find('=') - 2) : a.substr(0, 2);
    const bool attached = is_long ? a.find('=') != std::string::npos : a.size() > 2;
    const po::option_description* o = nullptr;
    try {
      o = opts.find_nothrow(name, /*approx=*/is_long);
    } catch (const po::error&) {
      // An ambiguous abbreviation ("--c": --cwd or --cmd): po says so when it parses.
    }
    if (o != nullptr && !attached && o->semantic()->max_tokens() > 0) ++i;
  }
  return {args.size(), false};
}

}  // namespace

int execCommand(const std::vector<std::string>& raw_args) {
  std::vector<std::string> env, positional;
  std::string cwd, cmd;
  double timeout = 0;
  bool background = false, forward_stdin = false;
  po::options_description opts(kExecUsage);
  opts.add_options()("env,e", po::value(&env)->composing(),
                     "K=V added to the command's environment (repeatable)")(
      "cwd", po::value(&cwd), "working directory (default /home/user)")(
      "timeout,t", po::value(&timeout), "wall-clock limit in seconds (capped by the profile)")(
      "cmd", po::value(&cmd), "a /bin/sh -c string instead of CMD ARGS...")(
      "background", po::bool_switch(&background),
      "start it and print its command id; it keeps running (see `airlock cmd`)")(
      "stdin", po::bool_switch(&forward_stdin), "pass our stdin (up to 6 MiB) to the command");
  // Our flags end where the command begins, so the command's own flags (`ls -la`) are its own.
  const auto start = findCommandStart(raw_args, opts);
  const auto first = raw_args.begin();
  const std::vector<std::string> args(
      first, first + static_cast<std::ptrdiff_t>(start.index - (start.after_dashes ? 1 : 0)));
  const std::vector<std::string> argv(first + static_cast<std::ptrdiff_t>(start.index),
                                      raw_args.end());
  po::variables_map vm;
  if (auto exit = parseArgs("exec", args, opts, vm, positional)) return *exit;
  if (positional.empty())
    return report("exec: expected SB (see `airlock exec --help`)"), kExitFailed;
  std::string sb = positional[0];
  if (positional.size() > 1)
    return report("exec: unexpected argument '" + positional[1] + "' before --"), kExitFailed;
  if (argv.empty() == cmd.empty())
    return report(cmd.empty()
                      ? "exec: which command? `airlock exec SB CMD [ARGS...]` or --cmd "
                        "'shell string'"
                      : "exec: give either CMD [ARGS...] or --cmd 'shell string', not both"),
           kExitFailed;
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

}  // namespace airlock::cli
