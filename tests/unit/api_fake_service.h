// A Service for the API tests: sandboxes, commands, contexts and files in memory, and event
// streams played from scripts with delays, so the HTTP layer can be tested without sandboxes.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "supervisor/sandbox/service.h"

namespace airlock::testing {

using sandbox::Clock;
using sandbox::ErrorCode;
using sandbox::Json;
using sandbox::serviceError;
using sandbox::SResult;

struct ScriptedEvent {
  std::chrono::milliseconds delay{0};  // after the previous event
  Json event;
};

// Counters shared by every stream a FakeService hands out.
struct StreamRecord {
  std::atomic<int> created{0};
  std::atomic<int> destroyed{0};
  std::atomic<int> destroyed_early{0};  // destroyed before their last event was taken
};

// Plays `events` in order, each `delay` after the previous one; `endless` repeats the last
// event forever (a command that never ends).
class ScriptedStream : public sandbox::EventStream {
 public:
  ScriptedStream(std::vector<ScriptedEvent> events, StreamRecord& record, bool endless = false)
      : events_(std::move(events)), record_(record), endless_(endless), ready_(Clock::now()) {
    record_.created++;
    if (!events_.empty()) ready_ += events_[0].delay;
  }
  ~ScriptedStream() override {
    record_.destroyed++;
    if (!done()) record_.destroyed_early++;
  }

  std::optional<Json> next(Clock::time_point deadline) override {
    if (done()) return std::nullopt;
    if (ready_ > deadline) {
      std::this_thread::sleep_until(deadline);
      return std::nullopt;
    }
    std::this_thread::sleep_until(ready_);
    Json ev = events_[pos_].event;
    if (!(endless_ && pos_ + 1 == events_.size())) ++pos_;
    if (pos_ < events_.size()) ready_ = Clock::now() + events_[pos_].delay;
    return ev;
  }
  bool done() const override { return pos_ >= events_.size(); }

 private:
  std::vector<ScriptedEvent> events_;
  StreamRecord& record_;
  bool endless_;
  size_t pos_ = 0;
  Clock::time_point ready_;
};

class FakeService : public sandbox::Service {
 public:
  // Scripts for the next foreground command or code run; defaults below when empty.
  std::vector<ScriptedEvent> command_script;
  bool command_endless = false;
  std::vector<ScriptedEvent> code_script;
  StreamRecord streams;
  // Called inside createSandbox (to hold a request in flight).
  std::function<void()> on_create;

  // What the last calls received.
  std::mutex mu;
  sandbox::SandboxSpec last_spec;
  sandbox::CommandSpec last_command;
  sandbox::CodeSpec last_code;
  std::string last_stdin;
  bool last_stdin_eof = false;
  int last_signal = 0;
  std::string last_tenant;
  uint64_t last_upload_size = 0;
  uint64_t last_upload_hash = 0;
  uint32_t last_mode = 0;
  std::map<std::string, std::string> files;  // path → content (uploads up to 1 MiB)
  uint64_t big_file_size = 0;                // GET of "/big" streams this many bytes

  SResult<sandbox::SandboxInfo> createSandbox(const sandbox::Caller& caller,
                                              const sandbox::SandboxSpec& spec) override {
    if (on_create) on_create();
    std::lock_guard lock(mu);
    last_spec = spec;
    last_tenant = caller.tenant;
    for (auto& [id, s] : sandboxes_) {
      if (!spec.name.empty() && s.tenant == caller.tenant && s.name == spec.name) {
        return serviceError(ErrorCode::kConflict, "sandbox name '" + spec.name + "' is taken");
      }
    }
    char id[17];
    std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(++next_id_));
    sandbox::SandboxInfo s;
    s.id = id;
    s.name = spec.name;
    s.tenant = caller.tenant;
    s.profile = spec.profile.empty() ? "default" : spec.profile;
    s.language = spec.language.empty() ? "python" : spec.language;
    s.state = "running";
    s.metadata = spec.metadata;
    s.persistent = spec.persistent;
    s.created_at = 1795000000000;
    s.keep_alive_s = spec.keep_alive_s.value_or(300);
    s.lifetime_s = spec.lifetime_s.value_or(3600);
    sandboxes_[s.id] = s;
    return s;
  }

  SResult<std::vector<sandbox::SandboxInfo>> listSandboxes(
      const sandbox::Caller& caller, const std::map<std::string, std::string>& metadata) override {
    std::lock_guard lock(mu);
    std::vector<sandbox::SandboxInfo> out;
    for (auto& [id, s] : sandboxes_) {
      if (s.tenant != caller.tenant) continue;
      bool match = true;
      for (auto& [k, v] : metadata) {
        auto it = s.metadata.find(k);
        if (it == s.metadata.end() || it->second != v) match = false;
      }
      if (match) out.push_back(s);
    }
    return out;
  }

  SResult<sandbox::SandboxInfo> getSandbox(const sandbox::Caller& caller,
                                           const std::string& sb) override {
    std::lock_guard lock(mu);
    auto* s = find(caller, sb);
    if (s == nullptr) return notFound(sb);
    return *s;
  }

  SResult<> destroySandbox(const sandbox::Caller& caller, const std::string& sb) override {
    std::lock_guard lock(mu);
    auto* s = find(caller, sb);
    if (s == nullptr) return notFound(sb);
    sandboxes_.erase(s->id);
    return {};
  }

  SResult<sandbox::SandboxInfo> keepAlive(const sandbox::Caller& caller, const std::string& sb,
                                          std::optional<int64_t> keep_alive_s,
                                          std::optional<int64_t> lifetime_s) override {
    std::lock_guard lock(mu);
    auto* s = find(caller, sb);
    if (s == nullptr) return notFound(sb);
    if (keep_alive_s) s->keep_alive_s = *keep_alive_s;
    if (lifetime_s) s->lifetime_s = *lifetime_s;
    return *s;
  }

  SResult<std::unique_ptr<sandbox::EventStream>> runCommand(
      const sandbox::Caller& caller, const std::string& sb,
      const sandbox::CommandSpec& spec) override {
    std::lock_guard lock(mu);
    if (find(caller, sb) == nullptr) return notFound(sb);
    last_command = spec;
    Json start = {{"type", "start"}, {"command_id", "c1"}, {"pid", 7}};
    if (spec.background) {
      return std::unique_ptr<sandbox::EventStream>(
          new ScriptedStream({{std::chrono::milliseconds(0), start}}, streams));
    }
    auto script = command_script;
    if (script.empty()) {
      script = {{{}, start},
                {{}, {{"type", "stdout"}, {"data", "total 0\n"}}},
                {{}, {{"type", "stderr"}, {"data_base64", "/w=="}}},
                {{},
                 {{"type", "exit"},
                  {"exit_code", 0},
                  {"signal", 0},
                  {"timed_out", false},
                  {"stdout_bytes", 8},
                  {"stderr_bytes", 1},
                  {"stdout_truncated", false},
                  {"stderr_truncated", false},
                  {"duration_ms", 3.1}}}};
    }
    return std::unique_ptr<sandbox::EventStream>(
        new ScriptedStream(std::move(script), streams, command_endless));
  }

  SResult<std::vector<sandbox::CommandInfo>> listCommands(const sandbox::Caller& caller,
                                                          const std::string& sb) override {
    std::lock_guard lock(mu);
    if (find(caller, sb) == nullptr) return notFound(sb);
    sandbox::CommandInfo c;
    c.command_id = "c1";
    c.argv = {"sleep", "100"};
    c.pid = 7;
    c.state = "running";
    c.background = true;
    return std::vector<sandbox::CommandInfo>{c};
  }

  SResult<std::unique_ptr<sandbox::EventStream>> attachCommand(const sandbox::Caller& caller,
                                                               const std::string& sb,
                                                               const std::string& cid) override {
    std::lock_guard lock(mu);
    if (find(caller, sb) == nullptr) return notFound(sb);
    if (cid != "c1") return serviceError(ErrorCode::kNotFound, "command '" + cid + "' not found");
    return std::unique_ptr<sandbox::EventStream>(
        new ScriptedStream({{{}, {{"type", "stdout"}, {"data", "buffered\n"}}},
                            {{}, {{"type", "exit"}, {"exit_code", 0}, {"signal", 0}}}},
                           streams));
  }

  SResult<> sendStdin(const sandbox::Caller& caller, const std::string& sb, const std::string&,
                      std::string data, bool eof) override {
    std::lock_guard lock(mu);
    if (find(caller, sb) == nullptr) return notFound(sb);
    last_stdin = std::move(data);
    last_stdin_eof = eof;
    return {};
  }

  SResult<> signalCommand(const sandbox::Caller& caller, const std::string& sb,
                          const std::string& cid, int signo) override {
    std::lock_guard lock(mu);
    if (find(caller, sb) == nullptr) return notFound(sb);
    if (cid != "c1") return serviceError(ErrorCode::kNotFound, "command '" + cid + "' not found");
    last_signal = signo;
    return {};
  }

  SResult<sandbox::ContextInfo> createContext(const sandbox::Caller& caller, const std::string& sb,
                                              const std::string& language,
                                              const std::string& cwd) override {
    std::lock_guard lock(mu);
    if (find(caller, sb) == nullptr) return notFound(sb);
    sandbox::ContextInfo c{"ctx" + std::to_string(contexts_.size() + 1),
                           language.empty() ? "python" : language,
                           "idle",
                           1795000000000,
                           0,
                           cwd};
    contexts_.push_back(c);
    return c;
  }

  SResult<std::vector<sandbox::ContextInfo>> listContexts(const sandbox::Caller& caller,
                                                          const std::string& sb) override {
    std::lock_guard lock(mu);
    if (find(caller, sb) == nullptr) return notFound(sb);
    return contexts_;
  }

  SResult<sandbox::ContextInfo> restartContext(const sandbox::Caller& caller, const std::string& sb,
                                               const std::string& ctx) override {
    std::lock_guard lock(mu);
    if (find(caller, sb) == nullptr) return notFound(sb);
    for (auto& c : contexts_) {
      if (c.context_id == ctx) return c;
    }
    return serviceError(ErrorCode::kNotFound, "context '" + ctx + "' not found");
  }

  SResult<> destroyContext(const sandbox::Caller& caller, const std::string& sb,
                           const std::string& ctx) override {
    std::lock_guard lock(mu);
    if (find(caller, sb) == nullptr) return notFound(sb);
    for (auto it = contexts_.begin(); it != contexts_.end(); ++it) {
      if (it->context_id == ctx) {
        contexts_.erase(it);
        return {};
      }
    }
    return serviceError(ErrorCode::kNotFound, "context '" + ctx + "' not found");
  }

  SResult<std::unique_ptr<sandbox::EventStream>> runCode(const sandbox::Caller& caller,
                                                         const std::string& sb,
                                                         const sandbox::CodeSpec& spec) override {
    std::lock_guard lock(mu);
    if (find(caller, sb) == nullptr) return notFound(sb);
    last_code = spec;
    auto script = code_script;
    if (script.empty()) {
      script = {{{}, {{"type", "stdout"}, {"data", "hello\n"}}},
                {{}, {{"type", "result"}, {"data", {{"text/plain", "3"}}}}},
                {{}, {{"type", "display"}, {"data", {{"image/png", "iVBORw0KGgo="}}}}},
                {{},
                 {{"type", "end"},
                  {"status", "ok"},
                  {"duration_ms", 12.5},
                  {"context_id", "python"},
                  {"context_restarted", false}}}};
    }
    return std::unique_ptr<sandbox::EventStream>(new ScriptedStream(std::move(script), streams));
  }

  SResult<sandbox::FileEntry> writeFile(const sandbox::Caller& caller, const std::string& sb,
                                        const std::string& path, uint32_t mode,
                                        const sandbox::ByteSource& source) override {
    {
      std::lock_guard lock(mu);
      if (find(caller, sb) == nullptr) return notFound(sb);
    }
    uint64_t size = 0;
    uint64_t hash = 1469598103934665603ull;  // FNV-1a
    std::string content;
    std::vector<char> buf(256 * 1024);
    while (true) {
      auto n = source(buf.data(), buf.size());
      if (!n) return std::unexpected(n.error());
      if (*n == 0) break;
      for (size_t i = 0; i < *n; ++i) {
        hash = (hash ^ static_cast<unsigned char>(buf[i])) * 1099511628211ull;
      }
      if (size + *n <= (1 << 20)) content.append(buf.data(), *n);
      size += *n;
    }
    std::lock_guard lock(mu);
    last_upload_size = size;
    last_upload_hash = hash;
    last_mode = mode;
    if (size <= (1 << 20)) files[path] = content;
    return sandbox::FileEntry{path, "file", size, mode, 0};
  }

  SResult<> readFile(const sandbox::Caller& caller, const std::string& sb, const std::string& path,
                     const std::function<void(uint64_t)>& on_size,
                     const sandbox::ByteSink& sink) override {
    std::string content;
    uint64_t big = 0;
    {
      std::lock_guard lock(mu);
      if (find(caller, sb) == nullptr) return notFound(sb);
      if (path == "/big") {
        big = big_file_size;
      } else {
        auto it = files.find(path);
        if (it == files.end()) return serviceError(ErrorCode::kNotFound, "no file '" + path + "'");
        content = it->second;
      }
    }
    if (path == "/big") {
      on_size(big);
      std::string chunk(64 * 1024, 'x');
      for (uint64_t sent = 0; sent < big; sent += chunk.size()) {
        if (!sink(
                std::string_view(chunk).substr(0, std::min<uint64_t>(chunk.size(), big - sent)))) {
          return serviceError(ErrorCode::kInternal, "client gone");
        }
      }
      return {};
    }
    on_size(content.size());
    for (size_t off = 0; off < content.size(); off += 4096) {
      if (!sink(std::string_view(content).substr(off, 4096))) {
        return serviceError(ErrorCode::kInternal, "client gone");
      }
    }
    return {};
  }

  SResult<std::vector<sandbox::FileEntry>> listFiles(const sandbox::Caller& caller,
                                                     const std::string& sb,
                                                     const std::string& path) override {
    std::lock_guard lock(mu);
    if (find(caller, sb) == nullptr) return notFound(sb);
    std::vector<sandbox::FileEntry> out;
    for (auto& [p, c] : files) {
      if (p.rfind(path + "/", 0) == 0) {
        out.push_back({p.substr(path.size() + 1), "file", c.size(), 0644, 1795000000000});
      }
    }
    return out;
  }

  SResult<sandbox::FileEntry> statFile(const sandbox::Caller& caller, const std::string& sb,
                                       const std::string& path) override {
    std::lock_guard lock(mu);
    if (find(caller, sb) == nullptr) return notFound(sb);
    auto it = files.find(path);
    if (it == files.end()) return serviceError(ErrorCode::kNotFound, "no file '" + path + "'");
    return sandbox::FileEntry{path, "file", it->second.size(), 0644, 1795000000000};
  }

  SResult<> makeDirectory(const sandbox::Caller& caller, const std::string& sb,
                          const std::string& path, bool) override {
    std::lock_guard lock(mu);
    if (find(caller, sb) == nullptr) return notFound(sb);
    dirs_.insert(path);
    return {};
  }

  SResult<> removeFile(const sandbox::Caller& caller, const std::string& sb,
                       const std::string& path, bool) override {
    std::lock_guard lock(mu);
    if (find(caller, sb) == nullptr) return notFound(sb);
    if (files.erase(path) == 0) return serviceError(ErrorCode::kNotFound, "no file '" + path + "'");
    return {};
  }

  SResult<> renameFile(const sandbox::Caller& caller, const std::string& sb,
                       const std::string& from, const std::string& to) override {
    std::lock_guard lock(mu);
    if (find(caller, sb) == nullptr) return notFound(sb);
    auto it = files.find(from);
    if (it == files.end()) return serviceError(ErrorCode::kNotFound, "no file '" + from + "'");
    files[to] = it->second;
    files.erase(from);
    return {};
  }

  // Workspaces per tenant: "busy" ones are in use.
  SResult<std::vector<sandbox::WorkspaceInfo>> listWorkspaces(
      const sandbox::Caller& caller) override {
    std::lock_guard lock(mu);
    std::vector<sandbox::WorkspaceInfo> out;
    for (const auto& [key, w] : workspaces)
      if (key.first == caller.tenant) out.push_back(w);
    return out;
  }

  SResult<> deleteWorkspace(const sandbox::Caller& caller, const std::string& name) override {
    std::lock_guard lock(mu);
    auto it = workspaces.find({caller.tenant, name});
    if (it == workspaces.end())
      return serviceError(ErrorCode::kNotFound, "workspace '" + name + "' not found");
    if (it->second.in_use)
      return serviceError(ErrorCode::kConflict, "workspace '" + name + "' is in use");
    workspaces.erase(it);
    return {};
  }

  // Held reviews: ids in `held`, decisions recorded in `decided`.
  SResult<Json> listReviews(const sandbox::Caller&) override {
    std::lock_guard lock(mu);
    Json list = Json::array();
    for (const auto& id : held) list.push_back({{"review_id", id}});
    return Json{{"reviews", list}};
  }

  SResult<> decideReview(const sandbox::Caller&, const std::string& review_id, bool approve,
                         const std::string& reason) override {
    std::lock_guard lock(mu);
    if (!held.erase(review_id))
      return serviceError(ErrorCode::kNotFound, "no held execution '" + review_id + "'");
    decided[review_id] = {approve, reason};
    return {};
  }

  Json health() override {
    std::lock_guard lock(mu);
    return {{"status", "ok"}, {"sandboxes", sandboxes_.size()}, {"draining", false}};
  }

  std::string metricsText() override {
    return "# TYPE airlock_sandboxes gauge\nairlock_sandboxes{state=\"running\"} 1\n";
  }

  std::map<std::pair<std::string, std::string>, sandbox::WorkspaceInfo> workspaces;
  std::set<std::string> held;
  std::map<std::string, std::pair<bool, std::string>> decided;

  bool hasDirectory(const std::string& p) {
    std::lock_guard lock(mu);
    return dirs_.count(p) != 0;
  }

 private:
  sandbox::SandboxInfo* find(const sandbox::Caller& caller, const std::string& sb) {
    for (auto& [id, s] : sandboxes_) {
      if (s.tenant == caller.tenant && (s.id == sb || (!s.name.empty() && s.name == sb))) return &s;
    }
    return nullptr;
  }
  static std::unexpected<sandbox::ServiceError> notFound(const std::string& sb) {
    return serviceError(ErrorCode::kNotFound, "sandbox '" + sb + "' not found");
  }

  uint64_t next_id_ = 0;
  std::map<std::string, sandbox::SandboxInfo> sandboxes_;
  std::vector<sandbox::ContextInfo> contexts_;
  std::set<std::string> dirs_;
};

}  // namespace airlock::testing
