// airlock cmd ls|attach|kill: the commands of a sandbox, foremost the background ones that
// `airlock exec --background` started (docs/api.md "Commands").
#include <unistd.h>

#include <iostream>

#include "supervisor/cli/cli.h"
#include "supervisor/cli/client_support.h"

namespace po = boost::program_options;

namespace airlock::cli {

namespace {

constexpr const char* kCmdUsage = R"(Usage:
  airlock cmd ls SB [--json]     the sandbox's commands: id, state, pid, age, exit, argv
  airlock cmd attach SB ID       the command's output so far, then live until it exits
  airlock cmd kill SB ID         kill the command (SIGKILL to all its processes)

SB is a sandbox id or name; ID a command id as `airlock exec --background` printed it.

Exit code: `attach` exits with the command's own code (128+N when it was killed by signal N);
125 when airlock failed (bad flags, supervisor not reachable, an unknown sandbox or command).
)";

std::string commandTarget(const std::string& sb, const std::string& id) {
  return sandboxTarget(sb) + "/commands/" + client::percentEncode(id);
}

std::string exitText(const Json& c) {
  if (str(c, "state") == "running") return "-";
  if (int64_t sig = num(c, "signal"); sig > 0) return "signal " + std::to_string(sig);
  return std::to_string(num(c, "exit_code"));
}

std::string argvText(const Json& c) {
  std::string out;
  if (c.contains("argv") && c["argv"].is_array())
    for (const auto& a : c["argv"])
      out += (out.empty() ? "" : " ") + (a.is_string() ? a.get<std::string>() : a.dump());
  return out;
}

int cmdList(const Client& c, const std::string& sb, bool json) {
  return orFail(c.call("GET", sandboxTarget(sb) + "/commands"), [&](const Json& answer) {
    if (json) {
      std::cout << answer.dump(2) << "\n";
      return 0;
    }
    const int64_t now = nowMs();
    std::vector<std::vector<std::string>> rows = {
        {"ID", "STATE", "PID", "BACKGROUND", "AGE", "EXIT", "ARGV"}};
    if (answer.contains("commands") && answer["commands"].is_array())
      for (const auto& cmd : answer["commands"]) {
        const int64_t started = num(cmd, "started_at");
        rows.push_back({str(cmd, "command_id"), str(cmd, "state"),
                        num(cmd, "pid") > 0 ? std::to_string(num(cmd, "pid")) : "-",
                        flag(cmd, "background") ? "yes" : "no",
                        started > 0 ? humanDuration(std::max<int64_t>(0, now - started)) : "-",
                        exitText(cmd), argvText(cmd)});
      }
    printTable(rows);
    return 0;
  });
}

int cmdAttach(const Client& c, const std::string& sb, const std::string& id) {
  std::optional<Json> exit_event;
  auto r = c.stream("GET", commandTarget(sb, id) + "/events", Json(), [&](const Json& ev) {
    const std::string type = str(ev, "type");
    if (type == "stdout" || type == "stderr")
      (void)writeAll(type == "stdout" ? STDOUT_FILENO : STDERR_FILENO, eventBytes(ev));
    else if (type == "exit")
      exit_event = ev;
  });
  if (!r) return report("cmd attach: " + r.error().message()), kExitFailed;
  if (!exit_event) {
    report("cmd attach: the supervisor ended the event stream before the command exited");
    return kExitFailed;
  }
  if (int sig = static_cast<int>(num(*exit_event, "signal")); sig > 0) return 128 + sig;
  if (flag(*exit_event, "timed_out")) return kExitTimeout;
  return static_cast<int>(num(*exit_event, "exit_code"));
}

}  // namespace

int cmdCommand(const std::vector<std::string>& args) {
  const std::string sub = args.empty() ? "" : args[0];
  if (sub == "--help" || sub == "-h") {
    std::cout << kCmdUsage;
    return 0;
  }
  if (sub != "ls" && sub != "attach" && sub != "kill") {
    report(std::string("cmd: ") +
           (sub.empty() ? "expected ls, attach or kill" : "unknown subcommand '" + sub + "'") +
           "\n" + kCmdUsage);
    return kExitFailed;
  }
  std::vector<std::string> positional;
  bool json = false;
  po::options_description opts(kCmdUsage + std::string("\nOptions"));
  if (sub == "ls") opts.add_options()("json", po::bool_switch(&json), "print the list as JSON");
  po::variables_map vm;
  if (auto exit = parseArgs("cmd " + sub, {args.begin() + 1, args.end()}, opts, vm, positional))
    return *exit;
  const size_t want = sub == "ls" ? 1 : 2;
  if (positional.size() != want)
    return report("cmd " + sub + ": expected " + (want == 1 ? "SB" : "SB ID") +
                  " (see `airlock cmd " + "--help`)"),
           kExitFailed;
  auto c = connectClient();
  if (!c) return report(c.error().message()), kExitFailed;
  if (sub == "ls") return cmdList(*c, positional[0], json);
  if (sub == "attach") return cmdAttach(*c, positional[0], positional[1]);
  return orFail(c->call("DELETE", commandTarget(positional[0], positional[1])), [&](const Json&) {
    std::cout << "killed " << positional[1] << "\n";
    return 0;
  });
}

}  // namespace airlock::cli
