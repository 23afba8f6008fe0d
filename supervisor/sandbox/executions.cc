// Executions in served sandboxes: commands (foreground and background) and code contexts.
#include "supervisor/sandbox/manager.h"

#include <algorithm>

#include "supervisor/audit/lifecycle_records.h"
#include "supervisor/sandbox/agent/file_ops.h"
#include "supervisor/sandbox/environment.h"
#include "supervisor/sandbox/execution_audit.h"
#include "supervisor/sandbox/live_sandbox.h"
#include "supervisor/sandbox/sandbox_usage.h"

namespace airlock::sandbox {

namespace proto = airlock::protocol;

namespace {

// Keeps a sandbox from idling out while a stream of it is open, and counts the activity. Closes
// the execution's audit at its last event ("exit" or "end"), which then carries the review
// verdict and the audit summary; an audit that failed closed fails the execution.
class TouchingStream : public EventStream {
 public:
  // `review`, when not null, is added to the final event. `audit` may be null (not audited).
  // `kind` ("command", "code") labels the execution's metrics. `record` gets the final event as
  // it passes (or null when the client left before it) and writes the execution's audit record.
  using Record = std::function<void(const Json* final_event)>;
  TouchingStream(std::unique_ptr<EventStream> inner, std::shared_ptr<LiveSandbox> sb,
                 Json review = nullptr, std::unique_ptr<ExecutionAudit> audit = nullptr,
                 Metrics* metrics = nullptr, const char* kind = "command", Record record = nullptr)
      : inner_(std::move(inner)),
        sb_(std::move(sb)),
        review_(std::move(review)),
        audit_(std::move(audit)),
        metrics_(metrics),
        kind_(kind),
        code_run_(std::string_view(kind) == "code"),
        oom_kills_at_start_(metrics != nullptr ? sandboxOomKills(sb_->id) : 0),
        record_(std::move(record)) {
    ++sb_->busy;
    ++sb_->executions;
    // The live view shows since when code runs: from the first of overlapping runs.
    if (code_run_ && sb_->code_runs++ == 0) sb_->code_started_at = nowMs();
  }
  ~TouchingStream() override {
    inner_.reset();  // first: an abandoned run is stopped while the sandbox is still busy
    if (record_) record_(nullptr);
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
    if (audit_ == nullptr) {
      countEnded(*event, 0);
      return recorded(std::move(event));
    }
    auto outcome = audit_->end();
    (*event)["audit"] = outcome.audit;
    if (metrics_ != nullptr) metrics_->audit_drops += outcome.dropped;
    auto denied = outcome.audit.find("connections_denied");
    countEnded(*event, denied != outcome.audit.end() && denied->is_number_unsigned()
                           ? denied->get<uint64_t>()
                           : 0);
    if (outcome.failure.empty()) return recorded(std::move(event));
    if (type == "exit") {
      (*event)["error"] = outcome.failure;
      return recorded(std::move(event));
    }
    // A code run fails the way code runs fail: an error event, then "end" with status error.
    (*event)["status"] = "error";
    held_ = recorded(std::move(event));
    return Json{{"type", "error"},
                {"name", "AuditIncomplete"},
                {"value", outcome.failure},
                {"traceback", Json::array()}};
  }
  bool done() const override { return !held_ && inner_->done(); }

 private:
  // The execution's time, timeout, OOM kills and refused connections, from its final event.
  void countEnded(const Json& event, uint64_t network_denied) {
    if (metrics_ == nullptr) return;
    // A command's exit says "timed_out": true, a code run's end "status": "timeout".
    auto flag = event.find("timed_out");
    auto status = event.find("status");
    const bool timed_out = (flag != event.end() && flag->is_boolean() && flag->get<bool>()) ||
                           (status != event.end() && *status == "timeout");
    const uint64_t oom = sandboxOomKills(sb_->id);
    metrics_->executionEnded(kind_, sb_->profile_name, secondsSince(started_), timed_out,
                             oom > oom_kills_at_start_ ? oom - oom_kills_at_start_ : 0,
                             network_denied);
  }

  std::optional<Json> recorded(std::optional<Json> final_event) {
    if (record_) std::exchange(record_, nullptr)(&*final_event);
    return final_event;
  }

  std::unique_ptr<EventStream> inner_;
  std::shared_ptr<LiveSandbox> sb_;
  Json review_;
  std::unique_ptr<ExecutionAudit> audit_;
  Metrics* metrics_;
  const char* kind_;
  bool code_run_;  // a code run (runCode), not a command
  uint64_t oom_kills_at_start_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  Record record_;             // once, then null
  std::optional<Json> held_;  // the final event, after an error event we put before it
};

// The sandbox's OOM kills so far (its cgroup's memory.events); nullopt when unreadable (a
// sandbox being torn down).
std::optional<uint64_t> oomKills(const LiveSandbox& s) {
  if (!s.box) return std::nullopt;
  auto st = s.box->cgroupStats();
  if (!st) return std::nullopt;
  return st->oom_kills;
}

// The agent's final events do not say whether the kernel's OOM killer struck: the record is told
// so ("oom": true in the event it reads) when the sandbox's count grew during the execution.
TouchingStream::Record withOom(TouchingStream::Record record, std::shared_ptr<LiveSandbox> s) {
  const auto before = oomKills(*s);
  return [record = std::move(record), s = std::move(s), before](const Json* end) {
    const auto after = oomKills(*s);
    if (!before || !after || *after <= *before) return record(end);
    Json e = end != nullptr ? *end : Json{{"type", "end"}, {"status", "abandoned"}};
    e["oom"] = true;
    record(&e);
  };
}

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
  const audit::RecordIds ids{box.id, caller.tenant, execution_id};
  auto fields =
      audit::executionFields({.kind = "command",
                              .text = spec.cmd,
                              .argv = spec.cmd.empty() ? spec.argv : std::vector<std::string>{}},
                             options_.policy.audit.record_code);
  if (!review) return std::unexpected(refusedExecution(ids, std::move(fields), review.error()));
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
    ++(*s)->executions;
    fields["background"] = true;
    fields["status"] = "started";
    recordExecution(ids, std::move(fields));
    return std::unique_ptr<EventStream>(std::make_unique<FixedStream>(std::vector<Json>{
        Json{{"type", "start"}, {"command_id", ci.command_id}, {"pid", ci.pid}}}));
  }
  return std::unique_ptr<EventStream>(std::make_unique<TouchingStream>(
      (*cmd)->foregroundStream(), *s, std::move(*review), std::move(audit), &metrics_, "command",
      withOom(executionRecorder(ids, std::move(fields)), *s)));
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
  std::string short_name;
  auto launch = driverLaunch(box, language, cwd, short_name);
  if (!launch) return std::unexpected(launch.error());
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
  auto ctx = std::make_shared<CodeContext>(box.conn, id, std::move(*launch));
  if (auto r = ctx->start(); !r) return std::unexpected(r.error());
  std::lock_guard lock(box.mu);
  if (box.contexts.count(id) != 0)
    return serviceError(ErrorCode::kConflict, "context '" + id + "' was created concurrently");
  if (as_default && box.contexts_lost > 0) {
    --box.contexts_lost;
    ctx->replacesALostContext();
  }
  box.contexts[id] = ctx;
  return ctx->info();
}

SResult<DriverLaunch> Manager::driverLaunch(const LiveSandbox& box, const std::string& language,
                                            const std::string& cwd, std::string& short_name) {
  std::string lang_name = language.empty() ? box.language : language;
  auto lang = this->language(lang_name);
  if (!lang) return std::unexpected(lang.error());
  short_name = (*lang)->name();
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
  return launch;
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
  const audit::RecordIds ids{box.id, caller.tenant, execution_id};
  auto fields =
      audit::executionFields({.kind = "code", .language = ctx->info().language, .text = spec.code},
                             options_.policy.audit.record_code);
  if (!review) return std::unexpected(refusedExecution(ids, std::move(fields), review.error()));
  auto audit = ExecutionAudit::begin(*s, execution_id);
  auto stream = ctx->run(spec.code, spec.env,
                         std::chrono::milliseconds(static_cast<int64_t>(timeout * 1000)));
  if (!stream) return std::unexpected(stream.error());
  metrics_.code_runs++;
  return std::unique_ptr<EventStream>(std::make_unique<TouchingStream>(
      std::move(*stream), *s, std::move(*review), std::move(audit), &metrics_, "code",
      withOom(executionRecorder(ids, std::move(fields)), *s)));
}

SResult<std::unique_ptr<EventStream>> Manager::attachRun(const Caller& caller,
                                                         const std::string& sb,
                                                         const std::string& context_id,
                                                         const std::string& run_id) {
  auto s = findRunning(caller, sb);
  if (!s) return std::unexpected(s.error());
  auto c = contextOf(**s, context_id);
  if (!c) return std::unexpected(c.error());
  return (*c)->attachRun(run_id);
}

ServiceError Manager::refusedExecution(const audit::RecordIds& ids, Json fields,
                                       const ServiceError& why) {
  audit::addExecutionRefusal(fields, why.code == ErrorCode::kDeniedByReview, why.message);
  recordExecution(ids, std::move(fields));
  return why;
}

std::function<void(const Json*)> Manager::executionRecorder(const audit::RecordIds& ids,
                                                            Json fields) {
  return [this, ids, fields = std::move(fields), t0 = Clock::now()](const Json* end) mutable {
    audit::addExecutionOutcome(fields, end, secondsSince(t0) * 1000);
    recordExecution(ids, std::move(fields));
  };
}

}  // namespace airlock::sandbox
