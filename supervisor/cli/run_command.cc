// airlock run: flags → RunRequest → the sandbox manager → output and exit code. The manager is
// the running `airlock serve`'s when one accepts connections (run_remote.cc), else one started
// in this process.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "airlock/unique_fd.h"
#include "supervisor/cli/cli.h"
#include "supervisor/cli/installed_plugins.h"
#include "supervisor/cli/run_remote.h"
#include "supervisor/plugin/registry.h"
#include "supervisor/sandbox/manager.h"

namespace po = boost::program_options;

namespace airlock::cli {

namespace {

// Signals that end `airlock run` go through a self-pipe, so the run loop sees them and tears
// the sandbox down (cgroup, mounts, uid range) before exiting with 128+signal.
int g_signal_pipe[2] = {-1, -1};

void onTerminatingSignal(int signo) {
  unsigned char b = static_cast<unsigned char>(signo);
  int saved = errno;
  (void)!write(g_signal_pipe[1], &b, 1);
  errno = saved;
}

Result<> installSignalPipe() {
  if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return sysError("pipe2", "signal pipe");
  struct sigaction sa {};
  sa.sa_handler = &onTerminatingSignal;
  sigemptyset(&sa.sa_mask);
  for (int s : {SIGINT, SIGTERM, SIGHUP})
    if (sigaction(s, &sa, nullptr) != 0) return sysError("sigaction", sigabbrev_np(s));
  signal(SIGPIPE, SIG_IGN);  // a closed stdout must not kill us before teardown
  return {};
}

int pendingSignal() {
  unsigned char b = 0;
  return read(g_signal_pipe[0], &b, 1) == 1 ? b : 0;
}

constexpr const char* kRunUsage = R"(Usage: airlock run [options] [FILE | -] [-- ARGS...]

Runs code once in a fresh sandbox and removes the sandbox afterwards. The code comes from -c,
from FILE (its extension picks the language), or from standard input (FILE = "-", or no FILE
when stdin is not a terminal). Otherwise stdin is passed to the program.

When `airlock serve` is running (AIRLOCK_URL, else the default socket
unix:///run/airlock/airlock.sock, and AIRLOCK_TOKEN), the run is sent to it and served under its
policy, tenants and quotas: the same output, exit codes and --json record, without root. Its
policy is the server's own: --timeout and --memory may only lower the profile's limits, and
--policy runs in this process. Through a supervisor, stdin is read to its end before the run
starts, and the program, --file and --out contents travel in the request and the answer
(within the server's server.max_json_body_kb). A supervisor that refuses the run (401, 403,
413, 429, 503) makes airlock exit 125 with its message; only when none is reachable does the
run happen in this process (as root).

Exit code: the program's own; 128+N when it was killed by signal N; 122 when the sandbox hit
its memory limit; 123 when the policy refused the request; 124 on timeout; 125 when airlock
itself failed (bad flags, bad policy, sandbox could not start, supervisor refused).

Options)";

Result<sandbox::FileCopy> parseCopy(const std::string& spec, bool local_first) {
  // The sandbox side is the one split off: local paths may contain ':', sandbox ones rarely do.
  sandbox::FileCopy c;
  if (local_first) {
    auto colon = spec.rfind(':');
    c.local = colon == std::string::npos ? spec : spec.substr(0, colon);
    c.sandbox = colon == std::string::npos ? std::filesystem::path(spec).filename().string()
                                           : spec.substr(colon + 1);
  } else {
    auto colon = spec.find(':');
    c.sandbox = colon == std::string::npos ? spec : spec.substr(0, colon);
    c.local = colon == std::string::npos ? std::filesystem::path(spec).filename().string()
                                         : spec.substr(colon + 1);
  }
  if (c.local.empty() || c.sandbox.empty())
    return fail("'" + spec + "': expected " +
                (local_first ? std::string("LOCAL:SANDBOX_PATH") : "SANDBOX_PATH:LOCAL"));
  return c;
}

Result<std::string> readAll(std::istream& in, const std::string& what) {
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return fail("cannot read " + what);
  return ss.str();
}

}  // namespace

int runCommand(const std::vector<std::string>& args) {
  sandbox::RunRequest req;
  std::vector<std::string> env, files, outs, ins, positional;
  std::string policy_file, isolation;
  bool json = false, no_stdin = false, local = false, verbose = false;
  uint32_t timeout = 0;
  uint64_t memory = 0;

  po::options_description opts(kRunUsage);
  opts.add_options()("help,h", "show this help")(
      "lang,language,l", po::value(&req.language),
      "language: python, node, shell (or an alias: py, js, sh, bash)")(
      "code,c", po::value(&req.code), "the program text")(
      "policy", po::value(&policy_file),
      "policy file (default: the built-in default policy); implies --local: a running "
      "supervisor has its own policy")("profile,p", po::value(&req.profile),
                                       "profile of the policy (default: its default_profile)")(
      "isolation", po::value(&isolation),
      "isolation backend: namespaces, gvisor or microvm (overrides the profile's isolation); "
      "implies --local: a running supervisor's profiles decide their backend")(
      "timeout,t", po::value(&timeout), "wall-clock limit in seconds (overrides limits.timeout_s)")(
      "memory,m", po::value(&memory),
      "memory limit in MiB (overrides limits.memory_mb; /home/user and /tmp shrink to fit)")(
      "env,e", po::value(&env)->composing(), "K=V added to the program's environment (repeatable)")(
      "file,f", po::value(&files)->composing(),
      "LOCAL[:SANDBOX_PATH] copied in before the run (repeatable; relative sandbox paths are under "
      "/home/user)")("out,o", po::value(&outs)->composing(),
                     "SANDBOX_PATH[:DEST] copied out after the run (repeatable); a directory "
                     "goes out packed when DEST is a local name ending in .tar, .tar.gz, .tgz, "
                     ".tar.zst or .zip, an https:// URL (uploaded) or hostdir:ROOT/name.tar.gz")(
      "in", po::value(&ins)->composing(),
      "SOURCE:SANDBOX_DIR: an archive unpacked inside the sandbox before the run, SOURCE a local "
      ".tar, .tar.gz, .tar.zst or .zip, an https:// URL or hostdir:ROOT/path (repeatable; "
      "URLs and hostdir: go through a running supervisor's plugins, local archives run here)")(
      "json", po::bool_switch(&json),
      "print one JSON result record instead of the program's output")(
      "no-stdin", po::bool_switch(&no_stdin), "give the program an empty stdin")(
      "local", po::bool_switch(&local),
      "run in this process (as root) even when `airlock serve` is reachable")(
      "verbose,v", po::bool_switch(&verbose),
      "say each policy relaxation of the profile in full (default: one summary line)");
  po::options_description hidden;
  hidden.add_options()("positional", po::value(&positional)->composing(), "");
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description pos;
  pos.add("positional", -1);

  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    printError(std::string("run: ") + e.what() + " (see `airlock run --help`)");
    return sandbox::kExitAirlockError;
  }
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  if (vm.count("timeout")) req.timeout_s = timeout;
  if (vm.count("memory")) req.memory_mb = memory;
  if (vm.count("isolation")) req.isolation = isolation;
  for (const auto& kv : env) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      printError("run: --env '" + kv + "': expected K=V");
      return sandbox::kExitAirlockError;
    }
    req.env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& f : files) {
    auto c = parseCopy(f, true);
    if (!c) return printError("run: --file " + c.error().message()), sandbox::kExitAirlockError;
    req.files_in.push_back(*c);
  }
  for (const auto& i : ins) {
    auto c = parseCopy(i, true);
    // The sandbox side is split off at the last ':', so a source with a scheme and no
    // SANDBOX_DIR ("https://x/a.tar", "hostdir:data") would split inside the source.
    if (c &&
        (i.rfind(':') == std::string::npos || c->sandbox.starts_with("//") ||
         c->local == "hostdir" || c->local == "http" || c->local == "https" || c->local == "file"))
      c = fail("'" + i + "': expected SOURCE:SANDBOX_DIR");
    if (!c) return printError("run: --in " + c.error().message()), sandbox::kExitAirlockError;
    req.transfers_in.push_back(*c);
  }
  for (const auto& o : outs) {
    auto c = parseCopy(o, false);
    if (!c) return printError("run: --out " + c.error().message()), sandbox::kExitAirlockError;
    req.files_out.push_back(*c);
  }

  bool code_from_stdin = false;
  if (vm.count("code")) {
    req.inline_code = true;
    req.args = positional;
  } else if (!positional.empty() && positional[0] != "-") {
    req.inline_code = false;
    req.script = positional[0];
    req.args.assign(positional.begin() + 1, positional.end());
    if (UniqueFd probe(::open(req.script.c_str(), O_RDONLY | O_CLOEXEC)); !probe) {
      printError("run: cannot read '" + req.script + "': " + std::strerror(errno));
      return sandbox::kExitAirlockError;
    }
  } else if (!positional.empty() || !isatty(STDIN_FILENO)) {
    code_from_stdin = true;
    if (!positional.empty()) req.args.assign(positional.begin() + 1, positional.end());
    auto code = readAll(std::cin, "the program from standard input");
    if (!code) return printError("run: " + code.error().message()), sandbox::kExitAirlockError;
    req.code = std::move(*code);
  } else {
    printError("run: nothing to run: give -c CODE, a FILE, or the program on standard input");
    return sandbox::kExitAirlockError;
  }
  const bool pass_stdin = !code_from_stdin && !no_stdin && !isatty(STDIN_FILENO);
  std::string unreachable;  // what was tried when no supervisor was reachable
  // A local archive in, or a local archive out (a directory packed, or a file of that name,
  // which only the sandbox can tell apart), is this host's file: only a run here reaches it.
  // URLs and hostdir: locations are the supervisor's plugins' either way.
  auto localPath = [](const std::string& location) {
    return !sandbox::namesTransfer(location) || location.starts_with("file:");
  };
  const bool local_transfers =
      std::any_of(req.transfers_in.begin(), req.transfers_in.end(),
                  [&](const auto& t) { return localPath(t.local); }) ||
      std::any_of(req.files_out.begin(), req.files_out.end(), [&](const auto& f) {
        return localPath(f.local) && !sandbox::archiveFormatOf(f.local).empty();
      });
  if (!local && policy_file.empty() && !req.isolation && !local_transfers) {
    auto supervisor = reachableSupervisor(unreachable);
    if (!supervisor) {
      printError("run: " + supervisor.error().message() + " (or pass --local)");
      return sandbox::kExitAirlockError;
    }
    if (*supervisor)
      return runRemote(**supervisor, req,
                       {.json = json, .pass_stdin = pass_stdin, .verbose = verbose});
  }
  if (pass_stdin) req.stdin_fd = STDIN_FILENO;
  if (!json) {
    req.live_stdout_fd = STDOUT_FILENO;
    req.live_stderr_fd = STDERR_FILENO;
    req.log_fd = STDERR_FILENO;
    req.summarize_relaxations = !verbose;
  }

  if (geteuid() != 0) {
    printError(
        "run: needs root: the supervisor maps each sandbox to its own range of host user ids "
        "and creates its cgroup (try sudo)" +
        (unreachable.empty() ? std::string() : "; or start `airlock serve`: " + unreachable));
    return sandbox::kExitAirlockError;
  }

  if (auto r = installSignalPipe(); !r) {
    printError("run: " + r.error().message());
    return sandbox::kExitAirlockError;
  }
  auto result = [&]() -> Result<sandbox::RunResult> {
    auto pol = policy_file.empty()
                   ? Result<policy::Policy>(policy::builtinDefault())
                   : policy::loadFileCheckingInstalled(policy_file, installedOnThisHost());
    if (!pol) return Unexpected(pol.error());
    sandbox::ManagerOptions options;
    options.policy = std::move(*pol);
    options.plugin_dir = plugin::defaultPluginDir();
    options.agent_path = plugin::defaultAgentPath();
    options.mode = sandbox::ManagerOptions::Mode::kOneShot;
    options.cancel_fd = g_signal_pipe[0];
    auto manager = sandbox::Manager::start(std::move(options));
    if (!manager) return Unexpected(manager.error());
    return (*manager)->runProgram(req);
  }();
  if (int sig = pendingSignal(); sig != 0) {
    printError(std::string("run: stopped by SIG") + sigabbrev_np(sig) +
               "; the sandbox was removed");
    return 128 + sig;
  }
  if (!result) {
    if (json) {
      std::cout << sandbox::errorRecord(result.error().message()).dump() << "\n";
    } else {
      printError(result.error().message());
    }
    return sandbox::kExitAirlockError;
  }
  if (json) {
    std::cout << result->toJson().dump() << "\n";
  } else {
    if (!result->message.empty()) printError(result->message);
    if (result->stdout_truncated)
      printError("stdout truncated: kept " + std::to_string(result->stdout_data.size()) + " of " +
                 std::to_string(result->stdout_bytes) + " bytes (limits.output_bytes)");
    if (result->stderr_truncated)
      printError("stderr truncated: kept " + std::to_string(result->stderr_data.size()) + " of " +
                 std::to_string(result->stderr_bytes) + " bytes (limits.output_bytes)");
    for (const auto& f : result->files_out)
      if (!f.error.empty()) printError("--out " + f.sandbox_path + ": " + f.error);
    for (const auto& t : result->transfers)
      if (t.direction == "out" && !t.error.empty())
        printError("--out " + t.sandbox_path + ":" + t.location + ": " + t.error);
  }
  // A program that succeeded but whose output could not be copied out did not do its job.
  return result->airlockExitCode();
}

}  // namespace airlock::cli
