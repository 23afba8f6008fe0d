#include "airlock/client/commands.h"

#include "airlock/client/http.h"
#include "api_error.h"
#include "audit_json.h"
#include "json_fields.h"

namespace airlock::sdk {

namespace {

using Unexpected = std::unexpected<Error>;
using OutputCallback = std::function<void(std::string_view)>;

Json commandBody(const CommandOptions& o, bool background) {
  Json body = Json::object();
  if (!o.env.empty()) body["env"] = o.env;
  if (!o.cwd.empty()) body["cwd"] = o.cwd;
  if (o.stdin_data) body["stdin"] = *o.stdin_data;
  if (o.timeout_s) body["timeout_s"] = *o.timeout_s;
  if (background) body["background"] = true;
  return body;
}

// Reads a command's NDJSON events (docs/api.md, Commands) until `exit`.
Result<CommandResult> collect(const Http& http, std::string_view method, const std::string& target,
                              const Json& body, const OutputCallback& on_stdout,
                              const OutputCallback& on_stderr) {
  CommandResult result;
  bool exited = false, timed_out = false;
  auto r = http.stream(method, target, body, [&](const Json& ev) {
    std::string type = fields::str(ev, "type");
    if (type == "start") {
      result.command_id = fields::str(ev, "command_id");
    } else if (type == "stdout" || type == "stderr") {
      std::string text = fields::bytes(ev, "data");
      (type == "stdout" ? result.stdout_text : result.stderr_text) += text;
      const auto& cb = type == "stdout" ? on_stdout : on_stderr;
      if (cb) cb(text);
    } else if (type == "exit") {
      exited = true;
      result.exit_code = static_cast<int>(fields::integer(ev, "exit_code"));
      result.signal = static_cast<int>(fields::integer(ev, "signal"));
      result.stdout_truncated = fields::boolean(ev, "stdout_truncated");
      result.stderr_truncated = fields::boolean(ev, "stderr_truncated");
      result.duration_ms = fields::number(ev, "duration_ms");
      timed_out = fields::boolean(ev, "timed_out");
      if (auto it = ev.find("review"); it != ev.end() && it->is_object())
        result.review = reviewFromJson(*it);
      if (auto it = ev.find("audit"); it != ev.end() && it->is_object())
        result.audit = auditFromJson(*it);
      result.error = fields::str(ev, "error");
    }
  });
  if (!r) return Unexpected(r.error());
  if (!exited)
    return failWith(ErrorKind::kProtocol,
                    std::string(method) + " " + target + ": the stream ended without 'exit'");
  if (timed_out)
    return failWith(ErrorKind::kTimeout,
                    "command " + result.command_id + " timed out after " +
                        std::to_string(static_cast<int64_t>(result.duration_ms / 1000)) +
                        " s and was killed");
  return result;
}

}  // namespace

CommandHandle::CommandHandle(std::shared_ptr<const Http> http, std::string sandbox_target,
                             std::string id, int64_t pid)
    : http_(std::move(http)),
      sandbox_target_(std::move(sandbox_target)),
      id_(std::move(id)),
      pid_(pid) {}

std::string CommandHandle::target() const {
  return sandbox_target_ + "/commands/" + percentEncode(id_);
}

Result<CommandResult> CommandHandle::wait(const OutputCallback& on_stdout,
                                          const OutputCallback& on_stderr) const {
  auto r = collect(*http_, "GET", target() + "/events", Json(), on_stdout, on_stderr);
  if (r && r->command_id.empty()) r->command_id = id_;
  return r;
}

Result<> CommandHandle::sendStdin(std::string_view data, bool eof) const {
  auto r =
      http_->call("POST", target() + "/stdin", Json{{"data", std::string(data)}, {"eof", eof}});
  if (!r) return Unexpected(r.error());
  return {};
}

Result<> CommandHandle::signal(const std::string& name) const {
  auto r = http_->call("POST", target() + "/signal", Json{{"signal", name}});
  if (!r) return Unexpected(r.error());
  return {};
}

Result<> CommandHandle::kill() const {
  auto r = http_->call("DELETE", target());
  if (!r) return Unexpected(r.error());
  return {};
}

Commands::Commands(std::shared_ptr<const Http> http, std::string sandbox_target)
    : http_(std::move(http)), sandbox_target_(std::move(sandbox_target)) {}

Result<CommandResult> Commands::run(const std::string& cmd, const CommandOptions& o) const {
  Json body = commandBody(o, false);
  body["cmd"] = cmd;
  return collect(*http_, "POST", sandbox_target_ + "/commands", body, o.on_stdout, o.on_stderr);
}

Result<CommandResult> Commands::run(const std::vector<std::string>& argv,
                                    const CommandOptions& o) const {
  if (argv.empty()) return failWith(ErrorKind::kInvalidArgument, "command argv is empty");
  Json body = commandBody(o, false);
  body["argv"] = argv;
  return collect(*http_, "POST", sandbox_target_ + "/commands", body, o.on_stdout, o.on_stderr);
}

Result<CommandHandle> Commands::start(const std::string& cmd, const CommandOptions& o) const {
  Json body = commandBody(o, true);
  body["cmd"] = cmd;
  auto r = http_->call("POST", sandbox_target_ + "/commands", body);
  if (!r) return Unexpected(r.error());
  return CommandHandle(http_, sandbox_target_, fields::str(*r, "command_id"),
                       fields::integer(*r, "pid"));
}

Result<CommandHandle> Commands::start(const std::vector<std::string>& argv,
                                      const CommandOptions& o) const {
  if (argv.empty()) return failWith(ErrorKind::kInvalidArgument, "command argv is empty");
  Json body = commandBody(o, true);
  body["argv"] = argv;
  auto r = http_->call("POST", sandbox_target_ + "/commands", body);
  if (!r) return Unexpected(r.error());
  return CommandHandle(http_, sandbox_target_, fields::str(*r, "command_id"),
                       fields::integer(*r, "pid"));
}

Result<std::vector<CommandInfo>> Commands::list() const {
  auto r = http_->call("GET", sandbox_target_ + "/commands");
  if (!r) return Unexpected(r.error());
  std::vector<CommandInfo> out;
  auto it = r->find("commands");
  if (it == r->end() || !it->is_array())
    return failWith(ErrorKind::kProtocol, "list commands: answer has no 'commands' array");
  for (const auto& c : *it) {
    CommandInfo info;
    info.command_id = fields::str(c, "command_id");
    if (auto a = c.find("argv"); a != c.end() && a->is_array())
      for (const auto& arg : *a)
        if (arg.is_string()) info.argv.push_back(arg.get<std::string>());
    info.pid = fields::integer(c, "pid");
    info.state = fields::str(c, "state");
    info.running = info.state == "running";
    info.background = fields::boolean(c, "background");
    info.started_at = fields::integer(c, "started_at");
    if (auto e = c.find("exit_code"); e != c.end() && e->is_number())
      info.exit_code = e->get<int>();
    if (auto s = c.find("signal"); s != c.end() && s->is_number() && s->get<int>() != 0)
      info.signal = s->get<int>();
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace airlock::sdk
