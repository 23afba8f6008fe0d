#include "airlock/client/sandbox.h"

#include "airlock/client/http.h"
#include "api_error.h"
#include "audit_json.h"
#include "json_fields.h"

namespace airlock::sdk {

namespace {

using Unexpected = std::unexpected<Error>;

std::string sandboxTarget(const std::string& id_or_name) {
  return "/v1/sandboxes/" + percentEncode(id_or_name);
}

Result<std::shared_ptr<const Http>> open(const ConnectionOptions& c) {
  auto http = Http::connect(c.url, c.token);
  if (!http) return Unexpected(http.error());
  return std::make_shared<const Http>(std::move(*http));
}

Result<SandboxInfo> infoFrom(const Json& doc) {
  if (!doc.is_object() || fields::str(doc, "id").empty())
    return failWith(ErrorKind::kProtocol,
                    "the supervisor's sandbox has no id: " + doc.dump().substr(0, 200));
  SandboxInfo i;
  i.id = fields::str(doc, "id");
  i.node = fields::str(doc, "node");
  i.name = fields::str(doc, "name");
  i.tenant = fields::str(doc, "tenant");
  i.profile = fields::str(doc, "profile");
  i.language = fields::str(doc, "language");
  i.isolation = fields::str(doc, "isolation");
  i.state = fields::str(doc, "state");
  if (auto it = doc.find("metadata"); it != doc.end() && it->is_object())
    for (const auto& [k, v] : it->items())
      i.metadata[k] = v.is_string() ? v.get<std::string>() : v.dump();
  i.persistent = fields::boolean(doc, "persistent");
  if (auto it = doc.find("mounts"); it != doc.end() && it->is_array())
    for (const auto& m : *it)
      if (m.is_object())
        i.mounts.push_back(
            {fields::str(m, "source"), fields::str(m, "path"), fields::boolean(m, "writable")});
  i.created_at = fields::integer(doc, "created_at");
  i.last_active_at = fields::integer(doc, "last_active_at");
  i.keep_alive_s = static_cast<int>(fields::integer(doc, "keep_alive_s"));
  i.idle_expires_at = fields::integer(doc, "idle_expires_at");
  i.lifetime_s = static_cast<int>(fields::integer(doc, "lifetime_s"));
  i.ends_at = fields::integer(doc, "ends_at");
  i.commands_running = static_cast<int>(fields::integer(doc, "commands_running"));
  i.contexts = static_cast<int>(fields::integer(doc, "contexts"));
  if (auto it = doc.find("current_execution"); it != doc.end() && it->is_object())
    i.current_execution = SandboxInfo::Execution{fields::str(*it, "kind"), fields::str(*it, "id"),
                                                 fields::integer(*it, "started_at")};
  if (auto it = doc.find("recent_denials"); it != doc.end() && it->is_object())
    for (const auto& [cause, count] : it->items())
      if (count.is_number_integer()) i.recent_denials[cause] = count.get<int64_t>();
  return i;
}

// Folds one code event (docs/api.md, Code) into the Execution and the live callbacks.
void onCodeEvent(const Json& ev, Execution& ex, const RunCodeOptions& o) {
  std::string type = fields::str(ev, "type");
  if (type == "stdout" || type == "stderr") {
    std::string text = fields::bytes(ev, "data");
    (type == "stdout" ? ex.stdout_text : ex.stderr_text) += text;
    const auto& cb = type == "stdout" ? o.on_stdout : o.on_stderr;
    if (cb) cb(text);
  } else if (type == "result" || type == "display") {
    DisplayData d;
    d.is_main_result = type == "result";
    if (auto it = ev.find("data"); it != ev.end() && it->is_object())
      for (const auto& [mime, v] : it->items())
        d.data[mime] = v.is_string() ? v.get<std::string>() : v.dump();
    ex.results.push_back(d);
    if (o.on_result) o.on_result(d);
  } else if (type == "error") {
    ExecutionError e{fields::str(ev, "name"), fields::str(ev, "value"), {}};
    if (auto it = ev.find("traceback"); it != ev.end() && it->is_array())
      for (const auto& line : *it)
        if (line.is_string()) e.traceback.push_back(line.get<std::string>());
    ex.error = e;
    if (o.on_error) o.on_error(e);
  } else if (type == "supervisor_restart") {
    ex.restart = RunRestart{fields::str(ev, "run_id"),
                            static_cast<uint64_t>(fields::integer(ev, "held_bytes")),
                            static_cast<uint64_t>(fields::integer(ev, "dropped_bytes"))};
  } else if (type == "end") {
    std::string status = fields::str(ev, "status");
    ex.status = status == "error"          ? RunStatus::kError
                : status == "timeout"      ? RunStatus::kTimeout
                : status == "context_lost" ? RunStatus::kContextLost
                                           : RunStatus::kOk;
    ex.duration_ms = fields::number(ev, "duration_ms");
    ex.context_id = fields::str(ev, "context_id");
    ex.context_restarted = fields::boolean(ev, "context_restarted");
    if (auto it = ev.find("review"); it != ev.end() && it->is_object())
      ex.review = reviewFromJson(*it);
    if (auto it = ev.find("audit"); it != ev.end() && it->is_object())
      ex.audit = auditFromJson(*it);
  }
}

// A code run's events (POST .../code, or a recovered run's GET) folded into an Execution;
// `what` names the run in the error when the stream ends before its "end" event.
Result<Execution> foldCodeRun(const Http& http, std::string_view method, const std::string& target,
                              const Json& body, const RunCodeOptions& o, const std::string& what) {
  Execution ex;
  bool ended = false;
  auto r = http.stream(method, target, body, [&](const Json& ev) {
    if (fields::str(ev, "type") == "end") ended = true;
    onCodeEvent(ev, ex, o);
  });
  if (!r) return Unexpected(r.error());
  if (!ended)
    return failWith(ErrorKind::kProtocol, what + ": the stream ended without an 'end' event");
  return ex;
}

}  // namespace

Sandbox::Sandbox(std::shared_ptr<const Http> http, SandboxInfo info, bool owned)
    : http_(std::move(http)),
      info_(std::move(info)),
      owned_(owned),
      commands_(http_, sandboxTarget(info_.id)),
      files_(http_, sandboxTarget(info_.id)) {}

Sandbox::Sandbox(Sandbox&& other) noexcept
    : http_(std::move(other.http_)),
      info_(std::move(other.info_)),
      owned_(std::exchange(other.owned_, false)),
      commands_(std::move(other.commands_)),
      files_(std::move(other.files_)) {}

Sandbox& Sandbox::operator=(Sandbox&& other) noexcept {
  if (this != &other) {
    if (owned_) (void)kill();
    http_ = std::move(other.http_);
    info_ = std::move(other.info_);
    owned_ = std::exchange(other.owned_, false);
    commands_ = std::move(other.commands_);
    files_ = std::move(other.files_);
  }
  return *this;
}

Sandbox::~Sandbox() {
  if (owned_) (void)kill();  // best effort: the sandbox idles out anyway if this fails
}

std::string Sandbox::target() const { return sandboxTarget(info_.id); }

Result<Sandbox> Sandbox::create(const SandboxOptions& o) {
  auto http = open(o.connection);
  if (!http) return Unexpected(http.error());
  Json body = Json::object();
  if (!o.profile.empty()) body["profile"] = o.profile;
  if (!o.language.empty()) body["language"] = o.language;
  if (!o.name.empty()) body["name"] = o.name;
  if (!o.env.empty()) body["env"] = o.env;
  if (!o.metadata.empty()) body["metadata"] = o.metadata;
  if (o.keep_alive_s) body["keep_alive_s"] = *o.keep_alive_s;
  if (o.lifetime_s) body["lifetime_s"] = *o.lifetime_s;
  if (o.persistent) body["persistent"] = true;
  if (!o.mounts.empty()) {
    Json mounts = Json::array();
    for (const auto& m : o.mounts) {
      Json mount = {{"source", m.source}};
      if (!m.path.empty()) mount["path"] = m.path;
      if (m.writable) mount["writable"] = true;
      mounts.push_back(std::move(mount));
    }
    body["mounts"] = std::move(mounts);
  }
  if (!o.isolation.empty()) body["isolation"] = o.isolation;
  auto doc = (*http)->call("POST", "/v1/sandboxes", body);
  if (!doc) return Unexpected(std::move(doc.error()).wrap("create sandbox"));
  auto info = infoFrom(*doc);
  if (!info) return Unexpected(info.error());
  return Sandbox(std::move(*http), std::move(*info), true);
}

Result<Sandbox> Sandbox::connect(const std::string& id_or_name, const ConnectionOptions& c) {
  if (id_or_name.empty())
    return failWith(ErrorKind::kInvalidArgument, "sandbox id or name is empty");
  auto http = open(c);
  if (!http) return Unexpected(http.error());
  auto doc = (*http)->call("GET", sandboxTarget(id_or_name));
  if (!doc) return Unexpected(doc.error());
  auto info = infoFrom(*doc);
  if (!info) return Unexpected(info.error());
  return Sandbox(std::move(*http), std::move(*info), false);
}

Result<std::vector<SandboxInfo>> Sandbox::list(const std::map<std::string, std::string>& metadata,
                                               const ConnectionOptions& c,
                                               const std::string& node) {
  auto http = open(c);
  if (!http) return Unexpected(http.error());
  std::vector<SandboxInfo> out;
  auto listNode = [&](const std::string& n) -> Result<void> {
    std::string target = "/v1/sandboxes";
    char sep = '?';
    for (const auto& [k, v] : metadata) {
      target += sep + ("metadata." + percentEncode(k)) + "=" + percentEncode(v);
      sep = '&';
    }
    if (!n.empty()) target += sep + ("node=" + percentEncode(n));
    auto doc = (*http)->call("GET", target);
    if (!doc) return Unexpected(doc.error());
    auto it = doc->find("sandboxes");
    if (it == doc->end() || !it->is_array())
      return failWith(ErrorKind::kProtocol, "GET /v1/sandboxes: answer has no 'sandboxes' array");
    for (const auto& sb : *it) {
      auto info = infoFrom(sb);
      if (!info) return Unexpected(info.error());
      out.push_back(std::move(*info));
    }
    return {};
  };
  auto listed = listNode(node);
  if (listed) return out;
  // A fleet's proxy cannot merge the nodes' lists and says so: ask each node it names.
  if (!node.empty() || listed.error().kind() != ErrorKind::kBadRequest ||
      listed.error().message().find("this fleet lists per node") == std::string::npos)
    return Unexpected(listed.error());
  auto fleet = (*http)->call("GET", "/v1/fleet");
  if (!fleet) return Unexpected(fleet.error());
  auto nodes = fleet->find("nodes");
  if (nodes == fleet->end() || !nodes->is_array())
    return failWith(ErrorKind::kProtocol, "GET /v1/fleet: answer has no 'nodes' array");
  for (const auto& n : *nodes) {
    if (!n.is_string()) continue;
    if (auto r = listNode(n.get<std::string>()); !r) return Unexpected(r.error());
  }
  return out;
}

Result<SandboxInfo> Sandbox::refresh() {
  auto doc = http_->call("GET", target());
  if (!doc) return Unexpected(doc.error());
  auto info = infoFrom(*doc);
  if (!info) return Unexpected(info.error());
  info_ = *info;
  return info_;
}

Result<Execution> Sandbox::runCode(const std::string& code, const RunCodeOptions& o) const {
  Json body = {{"code", code}, {"stream", true}};
  if (!o.language.empty()) body["language"] = o.language;
  if (!o.context_id.empty()) body["context_id"] = o.context_id;
  if (o.timeout_s) body["timeout_s"] = *o.timeout_s;
  auto run = foldCodeRun(*http_, "POST", target() + "/code", body, o,
                         "code run in sandbox '" + info_.id + "'");
  if (!run) return run;
  const Execution& ex = *run;
  if (ex.status == RunStatus::kTimeout)
    return failWith(ErrorKind::kTimeout,
                    "code run in sandbox '" + info_.id + "' timed out" +
                        (ex.context_restarted ? "; the interpreter was restarted and its state lost"
                                              : "; the context keeps its state"));
  return run;
}

Result<Execution> Sandbox::recoveredRun(const std::string& context_id, const std::string& run_id,
                                        const RunCodeOptions& o) const {
  return foldCodeRun(*http_, "GET",
                     target() + "/contexts/" + percentEncode(context_id) + "/runs/" +
                         percentEncode(run_id) + "/events",
                     Json(), o, "recovered run in sandbox '" + info_.id + "'");
}

Result<SandboxMetrics> Sandbox::metrics() const {
  auto doc = http_->call("GET", target() + "/metrics");
  if (!doc) return Unexpected(doc.error());
  auto count = [&](const char* key) { return static_cast<uint64_t>(fields::integer(*doc, key)); };
  auto limit = [&](const char* key) -> std::optional<uint64_t> {
    if (fields::integer(*doc, key, -1) < 0) return std::nullopt;  // null: unlimited
    return count(key);
  };
  SandboxMetrics m;
  m.sandbox_id = fields::str(*doc, "sandbox_id");
  m.cpu_seconds = fields::number(*doc, "cpu_seconds");
  m.memory_bytes = count("memory_bytes");
  m.memory_peak_bytes = count("memory_peak_bytes");
  m.memory_limit_bytes = limit("memory_limit_bytes");
  m.pids = count("pids");
  m.pids_limit = limit("pids_limit");
  m.disk_bytes = count("disk_bytes");
  m.disk_limit_bytes = limit("disk_limit_bytes");
  m.oom_kills = count("oom_kills");
  m.executions = count("executions");
  m.uptime_s = fields::number(*doc, "uptime_s");
  m.sampled_at = fields::str(*doc, "sampled_at");
  return m;
}

Result<> Sandbox::setTimeout(int keep_alive_s) {
  auto doc = http_->call("POST", target() + "/keepalive", Json{{"keep_alive_s", keep_alive_s}});
  if (!doc) return Unexpected(doc.error());
  if (auto info = infoFrom(*doc)) info_ = *info;
  return {};
}

Result<> Sandbox::kill() {
  if (!http_) return {};
  auto r = http_->call("DELETE", target());
  if (!r && r.error().kind() != ErrorKind::kNotFound) return Unexpected(r.error());
  owned_ = false;
  return {};
}

}  // namespace airlock::sdk
