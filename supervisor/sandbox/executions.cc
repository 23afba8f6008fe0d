// Executions in served sandboxes: commands (foreground and background) and code contexts.
#include "supervisor/sandbox/manager.h"

#include <algorithm>

#include "supervisor/sandbox/agent/file_ops.h"
#include "supervisor/sandbox/environment.h"
#include "supervisor/sandbox/execution_audit.h"
#include "supervisor/sandbox/live_sandbox.h"

namespace airlock::sandbox {

namespace proto = airlock::protocol;

namespace {

// Keeps a sandbox from idling out while a stream of it is open, and counts the activity. Closes
// the execution's audit at its last event ("exit" or "end"), which then carries the review
// verdict and the audit summary; an audit that failed closed fails the execution.
class TouchingStream : public EventStream {
 public:
  // `review`, when not null, is added to the final event. `audit` may be null (not audited).
  TouchingStream(std::unique_ptr<EventStream> inner, std::shared_ptr<LiveSandbox> sb,
                 Json review = nullptr, std::unique_ptr<ExecutionAudit> audit = nullptr,
                 Metrics* metrics = nullptr, bool code_run = false)
      : inner_(std::move(inner)),
        sb_(std::move(sb)),
        review_(std::move(review)),
        audit_(std::move(audit)),
        metrics_(metrics),
        code_run_(code_run) {
    ++sb_->busy;
    // The live view shows since when code runs: from the first of overlapping runs.
    if (code_run_ && sb_->code_runs++ == 0) sb_->code_started_at = nowMs();
  }
  ~TouchingStream() override {
    inner_.reset();  // first: an abandoned run is stopped while the sandbox is still busy
    audit_.reset();  // then its audit is closed (and logged) with everything it did
    sb_->last_active_at = nowMs();
    if (code_run_ && --sb_->code_runs == 0) sb_->code_started_at = 0;
    --sb_->busy;
  }
  std::optional<Json> next(Clock::time_point deadline) override {
    if (held_) {
      auto event = std::move(held_);
      held_.reset();
      return event;
    }
    auto event = inner_->next(deadline);
    if (!event) return event;
    auto type = event->value("type", "");
    if (type != "exit" && type != "end") return event;
    if (!review_.is_null()) (*event)["review"] = review_;
    if (audit_ == nullptr) return event;
    auto outcome = audit_->end();
    (*event)["audit"] = outcome.audit;
    if (metrics_ != nullptr) metrics_->audit_drops += outcome.dropped;
    if (outcome.failure.empty()) return event;
    if (type == "exit") {
      (*event)["error"] = outcome.failure;
      return event;
    }
    // A code run fails the way code runs fail: an error event, then "end" with status error.
    (*event)["status"] = "error";
    held_ = std::move(event);
    return Json{{"type", "error"},
                {"name", "AuditIncomplete"},
                {"value", outcome.failure},
                {"traceback", Json::array()}};
  }
  bool done() const override { return !held_ && inner_->done(); }

 private:
  std::unique_ptr<EventStream> inner_;
  std::shared_ptr<LiveSandbox> sb_;
  Json review_;
  std::unique_ptr<ExecutionAudit> audit_;
  Metrics* metrics_;
  bool code_run_;             // a code run (runCode), not a command
  std::optional<Json> held_;  // the final event, after an error event we put before it
};

// A stream that has already ended with the given events (background command starts).
class FixedStream : public EventStream {
 public:
  explicit FixedStream(std::vector<Json> events) : events_(std::move(events)) {}
  std::optional<Json> next(Clock::time_point) override {
    if (pos_ >= events_.size()) return std::nullopt;
    return events_[pos_++];
  }
  bool done() const override { return pos_ >= events_.size(); }

 private:
  std::vector<Json> events_;
  size_t pos_ = 0;
};

}  // namespace

SResult<std::unique_ptr<EventStream>> Manager::runCommand(const Caller& caller,
                                                          const std::string& sb,
                                                          const CommandSpec& spec) {
  auto s = findRunning(caller, sb);
  if (!s) return std::unexpected(s.error());
  LiveSandbox& box = **s;
  if (spec.argv.empty() == spec.cmd.empty())
    return serviceError(ErrorCode::kBadRequest, "give exactly one of 'argv' and 'cmd'");
  proto::Exec exec;
  if (!spec.cmd.empty()) {
    exec.argv = {"/bin/sh", "-c", spec.cmd};
  } else if (spec.argv[0].starts_with("/")) {
    exec.argv = spec.argv;
  } else {
    // The agent runs absolute paths only; env looks the name up on the sandbox's PATH.
    exec.argv = {"/usr/bin/env", "--"};
    exec.argv.insert(exec.argv.end(), spec.argv.begin(), spec.argv.end());
  }
  auto env = box.env;
  for (const auto& [k, v] : spec.env) env[k] = v;
  exec.env = sandbox::executionEnvironment({}, box.profile.env, env);
  if (!spec.cwd.empty()) {
    auto cwd = files::checkPath(spec.cwd, "cwd");
    if (!cwd) return std::unexpected(cwd.error());
    exec.cwd = *cwd;
  }
  double limit = static_cast<double>(box.profile.limits.timeout_s);
  if (spec.timeout_s && (*spec.timeout_s <= 0 || *spec.timeout_s > 86400))
    return serviceError(ErrorCode::kBadRequest, "timeout_s must be in (0, 86400]");
  double timeout = spec.timeout_s ? std::min(*spec.timeout_s, spec.background ? 86400.0 : limit)
                                  : (spec.background ? 0.0 : limit);
  exec.timeout_ms = static_cast<uint64_t>(timeout * 1000);
  exec.stdout_cap = exec.stderr_cap = box.profile.limits.output_bytes;
  exec.stdin_pipe = spec.background || !spec.stdin_data.empty();
  exec.kill_scope = proto::ExecKillScope::kSession;

  // Reviewed before anything reaches the sandbox.
  const std::string execution_id = sandbox::newSandboxId();
  auto review = reviewGate(caller, box,
                           spec.cmd.empty() ? review::Subject::commandArgv(spec.argv)
                                            : review::Subject::commandLine(spec.cmd),
                           execution_id);
  if (!review) return std::unexpected(review.error());
  // A foreground command is one audited execution, begun before the agent hears of it. A
  // background one outlives this request: its events are logged, in no execution's summary.
  auto audit = spec.background ? nullptr : ExecutionAudit::begin(*s, execution_id);

  CommandInfo info;
  info.argv = spec.cmd.empty() ? spec.argv : std::vector<std::string>{"/bin/sh", "-c", spec.cmd};
  info.background = spec.background;
  auto cmd = Command::start(box.conn, std::move(exec), std::move(info), spec.stdin_data);
  if (!cmd) return std::unexpected(cmd.error());
  metrics_.commands++;
  auto ci = (*cmd)->info();
  {
    std::lock_guard lock(box.mu);
    // Exited commands are forgotten once the list grows, newest kept.
    if (box.commands.size() >= 256) {
      for (auto it = box.commands.begin(); it != box.commands.end();) {
        if (!it->second->running())
          it = box.commands.erase(it);
        else
          ++it;
      }
    }
    box.commands[ci.command_id] = *cmd;
  }
  if (spec.background) {
    return std::unique_ptr<EventStream>(std::make_unique<FixedStream>(std::vector<Json>{
        Json{{"type", "start"}, {"command_id", ci.command_id}, {"pid", ci.pid}}}));
  }
  return std::unique_ptr<EventStream>(std::make_unique<TouchingStream>(
      (*cmd)->foregroundStream(), *s, std::move(*review), std::move(audit), &metrics_));
}

SResult<std::vector<CommandInfo>> Manager::listCommands(const Caller& caller,
                                                        const std::string& sb) {
  auto s = find(caller, sb);
  if (!s) return std::unexpected(s.error());
  std::vector<CommandInfo> out;
  std::lock_guard lock((*s)->mu);
  for (const auto& [id, c] : (*s)->commands) out.push_back(c->info());
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.started_at < b.started_at; });
  return out;
}

namespace {

// A command or context of the sandbox by id; "not found" names both.
template <typename T>
SResult<std::shared_ptr<T>> memberOf(LiveSandbox& s, std::map<std::string, std::shared_ptr<T>>& m,
                                     const std::string& id, const char* what) {
  std::lock_guard lock(s.mu);
  auto it = m.find(id);
  if (it == m.end())
    return serviceError(ErrorCode::kNotFound,
                        std::string(what) + " '" + id + "' not found in sandbox " + s.id);
  return it->second;
}

SResult<std::shared_ptr<Command>> commandOf(LiveSandbox& s, const std::string& id) {
  return memberOf(s, s.commands, id, "command");
}

SResult<std::shared_ptr<CodeContext>> contextOf(LiveSandbox& s, const std::string& id) {
  return memberOf(s, s.contexts, id, "context");
}

}  // namespace

SResult<std::unique_ptr<EventStream>> Manager::attachCommand(const Caller& caller,
                                                             const std::string& sb,
                                                             const std::string& id) {
  auto s = findRunning(caller, sb);
  if (!s) return std::unexpected(s.error());
  auto c = commandOf(**s, id);
  if (!c) return std::unexpected(c.error());
  if (!(*c)->info().background)
    return serviceError(ErrorCode::kConflict, "command '" + id +
                                                  "' streams to the client that started it; only "
                                                  "background commands can be attached");
  return (*c)->attach();
}

SResult<> Manager::sendStdin(const Caller& caller, const std::string& sb, const std::string& id,
                             std::string data, bool eof) {
  auto s = findRunning(caller, sb);
  if (!s) return std::unexpected(s.error());
  auto c = commandOf(**s, id);
  if (!c) return std::unexpected(c.error());
  if (!(*c)->info().background)
    return serviceError(ErrorCode::kConflict, "command '" + id + "' has no stdin pipe");
  return (*c)->sendStdin(std::move(data), eof);
}

SResult<> Manager::signalCommand(const Caller& caller, const std::string& sb, const std::string& id,
                                 int signo) {
  auto s = findRunning(caller, sb);
  if (!s) return std::unexpected(s.error());
  if (signo < 1 || signo > 64)
    return serviceError(ErrorCode::kBadRequest,
                        "signal " + std::to_string(signo) + " is not 1..64");
  auto c = commandOf(**s, id);
  if (!c) return std::unexpected(c.error());
  return (*c)->signal(signo);
}

SResult<ContextInfo> Manager::createContext(const Caller& caller, const std::string& sb,
                                            const std::string& language, const std::string& cwd) {
  return startContext(caller, sb, language, false, cwd);
}

SResult<ContextInfo> Manager::startContext(const Caller& caller, const std::string& sb,
                                           const std::string& language, bool as_default,
                                           const std::string& cwd) {
  auto s = findRunning(caller, sb);
  if (!s) return std::unexpected(s.error());
  LiveSandbox& box = **s;
  std::string lang_name = language.empty() ? box.language : language;
  auto lang = this->language(lang_name);
  if (!lang) return std::unexpected(lang.error());
  std::string short_name = (*lang)->name();
  if (std::find(box.profile.languages.begin(), box.profile.languages.end(), short_name) ==
      box.profile.languages.end())
    return serviceError(
        ErrorCode::kBadRequest,
        "profile '" + box.profile.name + "' does not allow language '" + short_name + "'");
  auto cmd = (*lang)->buildSession();
  if (!cmd) return serviceError(ErrorCode::kBadRequest, cmd.error().message());
  DriverLaunch launch;
  launch.language = short_name;
  launch.exec.argv = cmd->argv;
  launch.exec.env = sandbox::executionEnvironment(cmd->env, box.profile.env, box.env);
  launch.output_cap = box.profile.limits.output_bytes;
  if (!cwd.empty()) {
    auto checked = files::checkPath(cwd, "cwd");
    if (!checked) return std::unexpected(checked.error());
    launch.exec.cwd = *checked;
  }
  launch.cwd = launch.exec.cwd;  // the agent's default (the home directory) when none was given
  std::string id;
  {
    std::lock_guard lock(box.mu);
    if (box.contexts.size() >= 32)
      return serviceError(ErrorCode::kTooManyRequests,
                          "sandbox " + box.id + " already has 32 contexts");
    // A language's default context (the one code runs use when they name none) is named after
    // it; every context created explicitly is a new one.
    id = as_default ? short_name : short_name + "-" + std::to_string(++box.next_context);
  }
  auto ctx = std::make_shared<CodeContext>(box.conn, id, std::move(launch));
  if (auto r = ctx->start(); !r) return std::unexpected(r.error());
  std::lock_guard lock(box.mu);
  if (box.contexts.count(id) != 0)
    return serviceError(ErrorCode::kConflict, "context '" + id + "' was created concurrently");
  box.contexts[id] = ctx;
  return ctx->info();
}

SResult<std::vector<ContextInfo>> Manager::listContexts(const Caller& caller,
                                                        const std::string& sb) {
  auto s = find(caller, sb);
  if (!s) return std::unexpected(s.error());
  std::vector<ContextInfo> out;
  std::lock_guard lock((*s)->mu);
  for (const auto& [id, c] : (*s)->contexts) out.push_back(c->info());
  return out;
}

SResult<ContextInfo> Manager::restartContext(const Caller& caller, const std::string& sb,
                                             const std::string& id) {
  auto s = findRunning(caller, sb);
  if (!s) return std::unexpected(s.error());
  auto c = contextOf(**s, id);
  if (!c) return std::unexpected(c.error());
  if (auto r = (*c)->restart(); !r) return std::unexpected(r.error());
  return (*c)->info();
}

SResult<> Manager::destroyContext(const Caller& caller, const std::string& sb,
                                  const std::string& id) {
  auto s = findRunning(caller, sb);
  if (!s) return std::unexpected(s.error());
  std::shared_ptr<CodeContext> c;
  {
    std::lock_guard lock((*s)->mu);
    auto it = (*s)->contexts.find(id);
    if (it == (*s)->contexts.end())
      return serviceError(ErrorCode::kNotFound,
                          "context '" + id + "' not found in sandbox " + (*s)->id);
    c = it->second;
    (*s)->contexts.erase(it);
  }
  c->stop();
  return {};
}

SResult<std::unique_ptr<EventStream>> Manager::runCode(const Caller& caller, const std::string& sb,
                                                       const CodeSpec& spec) {
  auto s = findRunning(caller, sb);
  if (!s) return std::unexpected(s.error());
  LiveSandbox& box = **s;
  std::shared_ptr<CodeContext> ctx;
  if (!spec.context_id.empty()) {
    auto c = contextOf(box, spec.context_id);
    if (!c) return std::unexpected(c.error());
    ctx = *c;
  } else {
    std::string lang_name = spec.language.empty() ? box.language : spec.language;
    auto lang = this->language(lang_name);
    if (!lang) return std::unexpected(lang.error());
    auto existing = contextOf(box, (*lang)->name());
    if (existing) {
      ctx = *existing;
    } else {
      auto created = startContext(caller, sb, (*lang)->name(), true);
      if (!created && created.error().code != ErrorCode::kConflict)
        return std::unexpected(created.error());
      auto c = contextOf(box, (*lang)->name());
      if (!c) return std::unexpected(c.error());
      ctx = *c;
    }
  }
  if (spec.timeout_s && (*spec.timeout_s <= 0 || *spec.timeout_s > 86400))
    return serviceError(ErrorCode::kBadRequest, "timeout_s must be in (0, 86400]");
  double limit = static_cast<double>(box.profile.limits.timeout_s);
  double timeout = spec.timeout_s ? std::min(*spec.timeout_s, limit) : limit;
  const std::string execution_id = sandbox::newSandboxId();
  auto review =
      reviewGate(caller, box, review::Subject::code(ctx->info().language, spec.code), execution_id);
  if (!review) return std::unexpected(review.error());
  auto audit = ExecutionAudit::begin(*s, execution_id);
  auto stream = ctx->run(spec.code, spec.env,
                         std::chrono::milliseconds(static_cast<int64_t>(timeout * 1000)));
  if (!stream) return std::unexpected(stream.error());
  metrics_.code_runs++;
  return std::unique_ptr<EventStream>(std::make_unique<TouchingStream>(
      std::move(*stream), *s, std::move(*review), std::move(audit), &metrics_, true));
}

}  // namespace airlock::sandbox
