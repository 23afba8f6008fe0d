#include "supervisor/sandbox/agent/code_context.h"

#include <signal.h>

#include "supervisor/log/log.h"

namespace airlock::sandbox {

namespace proto = airlock::protocol;

namespace {

constexpr auto kReadyTimeout = std::chrono::seconds(30);
// After SIGINT, how long the interpreter has to answer before it is killed and restarted.
constexpr auto kInterruptGrace = std::chrono::seconds(2);
// A PNG of a large figure is a few MiB in base64; a longer line is a misbehaving driver.
constexpr size_t kMaxControlLine = 64 << 20;

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A display bundle: MIME type to string (text, or base64 for binary formats), or to any JSON
// value for JSON types (application/json, application/vnd.airlock.chart+json).
bool isMimeBundle(const Json& j) {
  if (!j.is_object()) return false;
  for (const auto& [k, v] : j.items())
    if (!v.is_string() && !k.ends_with("json")) return false;
  return true;
}

}  // namespace

struct CodeContext::Run {
  std::string id;
  std::shared_ptr<EventQueue> queue = std::make_shared<EventQueue>();
  Clock::time_point started = Clock::now();
  Clock::time_point deadline;
  std::optional<Clock::time_point> interrupted_at;
  bool killed = false;
  uint64_t out_bytes = 0, err_bytes = 0;
  bool out_truncated = false, err_truncated = false;
  OutputEncoder out_enc, err_enc;
  // A run taken over from a dead supervisor has no client of its own: its events are kept for
  // whoever attaches (attachRun), as a background command's are.
  bool recovered = false;
  std::vector<Json> kept;
  std::vector<std::weak_ptr<EventQueue>> attached;
  bool ended = false;

  void push(Json e) { deliver(std::move(e), false); }
  void finish(Json e) { deliver(std::move(e), true); }
  void deliver(Json e, bool last) {
    if (!recovered) {
      last ? queue->finish(std::move(e)) : queue->push(std::move(e));
      return;
    }
    for (auto it = attached.begin(); it != attached.end();) {
      if (auto q = it->lock()) {
        last ? q->finish(e) : q->push(e);
        ++it;
      } else {
        it = attached.erase(it);
      }
    }
    ended = ended || last;
    kept.push_back(std::move(e));
  }
};

CodeContext::CodeContext(std::shared_ptr<AgentConnection> conn, std::string id, DriverLaunch launch)
    : conn_(std::move(conn)), launch_(std::move(launch)) {
  info_.context_id = std::move(id);
  info_.language = launch_.language;
  info_.cwd = launch_.cwd;
  info_.state = "starting";
  info_.created_at = nowMs();
}

CodeContext::~CodeContext() { stop(); }

SResult<> CodeContext::start() {
  proto::Exec exec = launch_.exec;
  exec.stdin_pipe = true;
  exec.control_pipe = true;
  exec.kill_scope = proto::ExecKillScope::kSession;
  exec.stdout_cap = exec.stderr_cap = 0;  // capped per run here
  exec.timeout_ms = 0;
  {
    std::lock_guard lock(mu_);
    exec.note = noteText();
  }
  {
    std::lock_guard lock(mu_);
    ++generation_;
    alive_ = true;
    ready_ = false;
    start_error_.clear();
    control_.clear();
    info_.state = "starting";
  }
  std::weak_ptr<CodeContext> weak = weak_from_this();
  uint64_t gen = generation_;
  uint32_t id = conn_->open([weak, gen](const proto::FrameHeader& h, std::string_view p) {
    auto self = weak.lock();
    if (self == nullptr) return true;
    {
      std::lock_guard lock(self->mu_);
      if (self->generation_ != gen) return true;  // a frame of a driver already replaced
    }
    return self->onFrame(h, p);
  });
  {
    std::lock_guard lock(mu_);
    request_id_ = id;
  }
  std::string frame;
  proto::encode(frame, id, exec);
  if (auto r = conn_->send(frame); !r)
    return serviceError(ErrorCode::kInternal,
                        "starting the " + launch_.language + " context: " + r.error().message());
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, kReadyTimeout, [&] { return ready_ || !alive_; })) {
    lock.unlock();
    sendSignal(SIGKILL);
    return serviceError(ErrorCode::kInternal,
                        "the " + launch_.language + " session driver did not get ready in 30 s");
  }
  if (!ready_) {
    info_.state = "dead";
    return serviceError(ErrorCode::kInternal,
                        "the " + launch_.language + " session driver failed to start: " +
                            (start_error_.empty() ? "it exited" : start_error_));
  }
  info_.state = "idle";
  return {};
}

void CodeContext::sendSignal(int signo) {
  uint32_t id;
  {
    std::lock_guard lock(mu_);
    if (!alive_) return;
    id = request_id_;
  }
  std::string frame;
  proto::encode(frame, id, proto::Signal{signo});
  (void)conn_->send(frame);  // a closed channel means the driver is gone anyway
}

void CodeContext::stop() {
  sendSignal(SIGKILL);
  uint32_t id;
  {
    std::lock_guard lock(mu_);
    id = request_id_;
  }
  conn_->close(id);  // outside mu_: the hub takes the connection's lock before ours
  std::lock_guard lock(mu_);
  ++generation_;
  alive_ = ready_ = false;
  info_.state = "dead";
  if (run_) endRun("context_lost");
}

SResult<> CodeContext::restart() {
  stop();
  return start();
}

SResult<std::unique_ptr<EventStream>> CodeContext::run(
    const std::string& code, const std::map<std::string, std::string>& env,
    std::chrono::milliseconds timeout) {
  bool restarted = false;
  {
    std::unique_lock lock(mu_);
    if (run_)
      return serviceError(ErrorCode::kConflict,
                          "context '" + info_.context_id + "' is busy with another run");
    if (!alive_ || !ready_) {
      lock.unlock();
      if (auto r = start(); !r) return std::unexpected(r.error());
      restarted = info_.runs > 0;
    }
  }
  std::unique_lock lock(mu_);
  if (run_)
    return serviceError(ErrorCode::kConflict,
                        "context '" + info_.context_id + "' is busy with another run");
  auto run = std::make_shared<Run>();
  run->id = "r" + std::to_string(++info_.runs);
  // Drivers enforce timeout_ms themselves where they can (Node); SIGINT is the backstop, a
  // little later so the two do not race at the same instant.
  run->deadline = run->started + timeout + std::chrono::milliseconds(250);
  run_ = run;
  restarted_by_timeout_ = restarted || restarted_by_timeout_;
  info_.state = "busy";
  uint32_t id = request_id_;
  // With the request, in its first Stdin frame: the agent keeps what the driver says from here
  // on for the next supervisor, until the next run's note (no note ends a run: a supervisor
  // that dies after a run ended hands the run's frames to the next one, which sees it end).
  std::optional<std::string> note;
  if (conn_->keepsSessions()) note = noteText();
  lock.unlock();

  Json request{{"id", run->id}, {"code", code}, {"timeout_ms", timeout.count()}};
  if (!env.empty()) request["env"] = env;
  std::string line = request.dump() + "\n";
  for (size_t off = 0; off < line.size(); off += proto::kMaxChunk) {
    proto::Stdin m;
    m.data = line.substr(off, proto::kMaxChunk);
    if (off == 0) m.note = std::move(note);
    std::string frame;
    proto::encode(frame, id, m);
    if (auto r = conn_->send(frame); !r) {
      std::lock_guard relock(mu_);
      if (run_ == run) endRun("context_lost");
      break;
    }
  }
  std::weak_ptr<CodeContext> weak = weak_from_this();
  return std::make_unique<QueueStream>(
      run->queue,
      [weak] {
        if (auto self = weak.lock()) self->checkTimeout();
      },
      [weak] {
        // The client left: interrupt the run; the context stays for the next one.
        if (auto self = weak.lock()) self->sendSignal(SIGINT);
      });
}

void CodeContext::checkTimeout() {
  int signo = 0;
  {
    std::lock_guard lock(mu_);
    if (!run_) return;
    auto now = Clock::now();
    if (!run_->interrupted_at && now >= run_->deadline) {
      run_->interrupted_at = now;
      signo = SIGINT;
    } else if (run_->interrupted_at && !run_->killed &&
               now >= *run_->interrupted_at + kInterruptGrace) {
      run_->killed = true;  // the interpreter ignored SIGINT: its state is lost
      signo = SIGKILL;
    }
  }
  if (signo != 0) sendSignal(signo);
}

// mu_ held.
void CodeContext::endRun(const std::string& status, Json error, Json execution_count) {
  auto run = std::move(run_);
  run_.reset();
  if (!run) return;
  Json tail{{"type", "stdout"}};
  if (run->out_enc.flush(tail)) run->push(std::move(tail));
  Json etail{{"type", "stderr"}};
  if (run->err_enc.flush(etail)) run->push(std::move(etail));
  if (!error.is_null()) run->push(std::move(error));
  bool restarted = status == "context_lost" || run->killed || restarted_by_timeout_;
  restarted_by_timeout_ = false;
  Json end{{"type", "end"},
           {"status", status},
           {"duration_ms",
            std::chrono::duration<double, std::milli>(Clock::now() - run->started).count()},
           {"context_id", info_.context_id},
           {"context_restarted", restarted},
           {"stdout_truncated", run->out_truncated},
           {"stderr_truncated", run->err_truncated},
           {"execution_count", std::move(execution_count)}};
  run->finish(std::move(end));
  if (alive_ && ready_) info_.state = "idle";
}

bool CodeContext::onFrame(const proto::FrameHeader& h, std::string_view payload) {
  std::unique_lock lock(mu_);
  if (isChannelFailure(h) || h.type == proto::MsgType::kError ||
      h.type == proto::MsgType::kExited) {
    if (h.type == proto::MsgType::kError && !isChannelFailure(h) && ready_) {
      return false;  // e.g. a stdin write after the driver closed stdin; the exit follows
    }
    if (h.type != proto::MsgType::kExited) {
      auto m = proto::decodeError(payload);
      start_error_ = m ? m->message : "malformed error from the agent";
    }
    alive_ = ready_ = false;
    info_.state = "dead";
    if (run_) {
      bool timed_out = run_->interrupted_at.has_value();
      if (timed_out)
        log::info("execution.timeout",
                  {{"sandbox", conn_->sandboxId()}, {"context", info_.context_id}});
      endRun(timed_out ? "timeout" : "context_lost");
    }
    cv_.notify_all();
    return true;
  }
  if (h.type != proto::MsgType::kOutput) return false;  // Started, Ok
  auto m = proto::decodeOutput(payload);
  if (!m) return false;
  if (m->stream == proto::Stream::kControl) {
    control_.append(m->data);
    size_t pos;
    while ((pos = control_.find('\n')) != std::string::npos) {
      std::string line = control_.substr(0, pos);
      control_.erase(0, pos + 1);
      onControlLine(line);
    }
    if (control_.size() > kMaxControlLine) {
      control_.clear();
      lock.unlock();
      sendSignal(SIGKILL);  // a driver that floods its control pipe has been subverted
    }
    return false;
  }
  if (!run_) return false;  // output between runs (a thread still printing): nobody to give it to
  bool out = m->stream == proto::Stream::kStdout;
  uint64_t& n = out ? run_->out_bytes : run_->err_bytes;
  std::string_view data = m->data;
  if (launch_.output_cap != 0 && n + data.size() > launch_.output_cap) {
    data = data.substr(0, n >= launch_.output_cap ? 0 : launch_.output_cap - n);
    (out ? run_->out_truncated : run_->err_truncated) = true;
  }
  n += m->data.size();
  if (data.empty()) return false;
  Json e{{"type", out ? "stdout" : "stderr"}};
  if ((out ? run_->out_enc : run_->err_enc).encode(data, e)) run_->push(std::move(e));
  return false;
}

// mu_ held.
void CodeContext::onControlLine(std::string_view line) {
  try {
    handleControlLine(line);
  } catch (const Json::exception&) {
    // A field of the wrong type: the line is dropped like any other malformed one.
  }
}

// mu_ held.
void CodeContext::handleControlLine(std::string_view line) {
  Json j = Json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("type") || !j["type"].is_string()) return;
  std::string type = j["type"];
  if (type == "ready") {
    ready_ = true;
    cv_.notify_all();
    return;
  }
  if (!run_ || j.value("id", "") != run_->id) return;  // stale or forged: not this run's
  if ((type == "result" || type == "display") && j.contains("data") && isMimeBundle(j["data"])) {
    run_->push(Json{{"type", type}, {"data", j["data"]}});
  } else if (type == "error") {
    Json e{{"type", "error"},
           {"name", j.value("name", "Error")},
           {"value", j.value("value", "")},
           {"traceback", Json::array()}};
    if (j.contains("traceback") && j["traceback"].is_array())
      for (const auto& t : j["traceback"])
        if (t.is_string()) e["traceback"].push_back(t);
    if (!e["name"].is_string() || !e["value"].is_string()) return;
    run_->push(std::move(e));
  } else if (type == "done") {
    std::string status = j.value("status", "error");
    if (status == "interrupted") status = run_->interrupted_at ? "timeout" : "error";
    if (status != "ok" && status != "timeout") status = "error";
    Json count = j.contains("execution_count") && j["execution_count"].is_number_integer()
                     ? j["execution_count"]
                     : Json(nullptr);
    endRun(status, nullptr, std::move(count));
  }
}

std::string CodeContext::noteText() const {
  return Json{{"kind", "context"},
              {"context_id", info_.context_id},
              {"language", info_.language},
              {"cwd", info_.cwd},
              {"created_at", info_.created_at},
              {"runs", info_.runs},
              {"run", run_ ? Json(run_->id) : Json(nullptr)}}
      .dump();
}

std::shared_ptr<CodeContext> CodeContext::adopt(std::shared_ptr<AgentConnection> conn,
                                                const proto::LiveExecution& live, const Json& note,
                                                DriverLaunch launch) {
  auto ctx = std::make_shared<CodeContext>(conn, note.value("context_id", ""), std::move(launch));
  ctx->info_.cwd = note.value("cwd", ctx->info_.cwd);
  if (auto t = note.find("created_at"); t != note.end() && t->is_number_integer())
    ctx->info_.created_at = t->get<int64_t>();
  if (auto r = note.find("runs"); r != note.end() && r->is_number_integer())
    ctx->info_.runs = r->get<int64_t>();
  ctx->request_id_ = live.request_id;
  ctx->generation_ = 1;
  ctx->alive_ = ctx->ready_ = !live.exited;
  ctx->info_.state = live.exited ? "dead" : "idle";
  if (auto r = note.find("run"); r != note.end() && r->is_string()) {
    auto run = std::make_shared<Run>();
    run->id = r->get<std::string>();
    run->recovered = true;
    // The run's own timeout was the dead supervisor's to enforce; the driver's (Node) still
    // is. Its events are kept for attachRun, with no deadline of this supervisor's.
    run->deadline = Clock::time_point::max();
    run->push(Json{{"type", "supervisor_restart"},
                   {"run_id", run->id},
                   {"held_bytes", live.held_bytes},
                   {"dropped_bytes", live.dropped_bytes}});
    ctx->run_ = run;
    ctx->recovered_ = run;
    ctx->info_.state = "busy";
  }
  std::weak_ptr<CodeContext> weak = ctx;
  conn->openAt(live.request_id, [weak](const proto::FrameHeader& h, std::string_view p) {
    auto self = weak.lock();
    if (self == nullptr) return true;
    {
      std::lock_guard lock(self->mu_);
      if (self->generation_ != 1) return true;  // restarted since: a new driver
    }
    return self->onFrame(h, p);
  });
  return ctx;
}

SResult<std::unique_ptr<EventStream>> CodeContext::attachRun(const std::string& run_id) {
  std::lock_guard lock(mu_);
  if (!recovered_ || (run_id != "last" && run_id != recovered_->id))
    return serviceError(ErrorCode::kNotFound,
                        "context '" + info_.context_id + "' has no run '" + run_id +
                            "' taken over from a dead supervisor (the events of other runs went "
                            "to the client that started them)");
  auto q = std::make_shared<EventQueue>();
  for (size_t i = 0; i < recovered_->kept.size(); ++i) {
    if (recovered_->ended && i + 1 == recovered_->kept.size())
      q->finish(recovered_->kept[i]);
    else
      q->push(recovered_->kept[i]);
  }
  if (!recovered_->ended) recovered_->attached.push_back(q);
  return std::unique_ptr<EventStream>(std::make_unique<QueueStream>(q, nullptr, nullptr));
}

ContextInfo CodeContext::info() const {
  std::lock_guard lock(mu_);
  return info_;
}

}  // namespace airlock::sandbox
