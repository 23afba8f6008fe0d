#include "supervisor/sandbox/agent/command.h"

#include <signal.h>

#include <chrono>

#include "supervisor/log/log.h"

namespace airlock::sandbox {

namespace proto = airlock::protocol;

namespace {

constexpr auto kStartTimeout = std::chrono::seconds(10);

int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

SResult<std::shared_ptr<Command>> Command::start(std::shared_ptr<AgentConnection> conn,
                                                 proto::Exec exec, CommandInfo info,
                                                 std::string stdin_data) {
  std::shared_ptr<Command> cmd(new Command(conn, std::move(info)));
  if (!cmd->info_.background) cmd->foreground_ = std::make_shared<EventQueue>();
  std::weak_ptr<Command> weak = cmd;
  cmd->request_id_ = conn->open([weak](const proto::FrameHeader& h, std::string_view p) {
    auto self = weak.lock();
    return self == nullptr || self->onFrame(h, p);
  });
  cmd->info_.command_id = "c" + std::to_string(cmd->request_id_);
  cmd->started_ = Clock::now();
  cmd->started_ms_ = nowMs();
  cmd->info_.started_at = cmd->started_ms_;
  cmd->info_.state = "running";

  // For the supervisor that adopts the sandbox if this one dies (adopt()).
  Json note{{"kind", "command"},
            {"argv", cmd->info_.argv},
            {"background", cmd->info_.background},
            {"started_at", cmd->started_ms_}};
  exec.note = note.dump();
  if (exec.note.size() > proto::kMaxNote) {
    note["argv"] = Json::array();  // too long to keep: the adopted command shows none
    exec.note = note.dump();
  }
  std::string frame;
  proto::encode(frame, cmd->request_id_, exec);
  if (auto r = conn->send(frame); !r)
    return serviceError(ErrorCode::kInternal, "starting the command: " + r.error().message());
  {
    std::unique_lock lock(cmd->mu_);
    if (!cmd->started_cv_.wait_for(lock, kStartTimeout, [&] { return cmd->start_answered_; })) {
      lock.unlock();
      conn->close(cmd->request_id_);
      return serviceError(ErrorCode::kInternal, "the sandbox did not start the command in 10 s");
    }
    if (!cmd->start_error_.empty()) return serviceError(ErrorCode::kBadRequest, cmd->start_error_);
  }
  // A foreground command's stdin is the request's, closed after it; a background command's
  // pipe stays open for later sendStdin calls.
  bool foreground = !cmd->info_.background;
  if (exec.stdin_pipe && (foreground || !stdin_data.empty())) {
    if (auto r = cmd->sendStdin(std::move(stdin_data), foreground); !r)
      return std::unexpected(r.error());
  }
  return cmd;
}

Command::~Command() { conn_->close(request_id_); }

bool Command::onFrame(const proto::FrameHeader& h, std::string_view payload) {
  std::unique_lock lock(mu_);
  auto startAnswered = [&](std::string error) {
    start_answered_ = true;
    start_error_ = std::move(error);
    started_cv_.notify_all();
  };
  if (isChannelFailure(h) || h.type == proto::MsgType::kError) {
    auto m = proto::decodeError(payload);
    std::string why = m ? m->message : "the agent sent a malformed error";
    if (!start_answered_) {
      startAnswered(why);
      return true;
    }
    if (!isChannelFailure(h)) {
      // An error after the start (a stdin write that failed, ...) is reported; the exit follows.
      deliver(Json{{"type", "error"}, {"message", why}}, false);
      return false;
    }
    exited_ = true;
    deliver(Json{{"type", "exit"},
                 {"exit_code", nullptr},
                 {"signal", nullptr},
                 {"timed_out", false},
                 {"error", why}},
            true);
    return true;
  }
  switch (h.type) {
    case proto::MsgType::kStarted: {
      auto m = proto::decodeStarted(payload);
      if (!m) return startAnswered("agent: " + m.error().message()), true;
      info_.pid = static_cast<int>(m->pid);
      startAnswered("");
      deliver(Json{{"type", "start"}, {"command_id", info_.command_id}, {"pid", info_.pid}}, false);
      return false;
    }
    case proto::MsgType::kOutput: {
      auto m = proto::decodeOutput(payload);
      if (!m || m->stream == proto::Stream::kControl) return false;
      bool out = m->stream == proto::Stream::kStdout;
      Json e{{"type", out ? "stdout" : "stderr"}};
      if ((out ? out_enc_ : err_enc_).encode(m->data, e)) deliver(std::move(e), false);
      return false;
    }
    case proto::MsgType::kExited: {
      auto m = proto::decodeExited(payload);
      if (!start_answered_) startAnswered("");
      Json tail{{"type", "stdout"}};
      if (out_enc_.flush(tail)) deliver(std::move(tail), false);
      Json etail{{"type", "stderr"}};
      if (err_enc_.flush(etail)) deliver(std::move(etail), false);
      exited_ = true;
      Json e{{"type", "exit"}};
      if (m) {
        if (m->signal != 0) {
          e["exit_code"] = nullptr;
          e["signal"] = m->signal;
          info_.signal = m->signal;
        } else {
          e["exit_code"] = m->exit_code;
          e["signal"] = 0;
          info_.exit_code = m->exit_code;
        }
        e["timed_out"] = m->timed_out;
        if (m->timed_out)
          log::info("execution.timeout",
                    {{"sandbox", conn_->sandboxId()}, {"command", info_.command_id}});
        e["stdout_bytes"] = m->stdout_bytes;
        e["stderr_bytes"] = m->stderr_bytes;
        e["stdout_truncated"] = m->stdout_truncated;
        e["stderr_truncated"] = m->stderr_truncated;
      } else {
        e["exit_code"] = nullptr;
        e["signal"] = nullptr;
        e["timed_out"] = false;
        e["error"] = "agent: " + m.error().message();
      }
      e["duration_ms"] = std::chrono::duration<double, std::milli>(Clock::now() - started_).count();
      info_.state = "exited";
      deliver(std::move(e), true);
      return true;
    }
    default:
      return false;  // Ok for stdin and signals: nothing to tell the client
  }
}

// Called with mu_ held.
void Command::deliver(Json event, bool last) {
  if (foreground_) {
    if (last)
      foreground_->finish(std::move(event));
    else
      foreground_->push(std::move(event));
    return;
  }
  for (auto it = attached_.begin(); it != attached_.end();) {
    if (auto q = it->lock()) {
      if (last)
        q->finish(event);
      else
        q->push(event);
      ++it;
    } else {
      it = attached_.erase(it);
    }
  }
  kept_.push_back(std::move(event));
}

std::shared_ptr<Command> Command::endedByRestart(std::shared_ptr<AgentConnection> conn,
                                                 const proto::EndedExecution& ended) {
  CommandInfo info;
  info.command_id = "c" + std::to_string(ended.request_id);
  info.pid = static_cast<int>(ended.pid);
  info.state = "exited";
  info.background = true;  // its caller's connection died with the supervisor
  info.ended_by = "supervisor_restart";
  Json e = {{"type", "exit"},
            {"exit_code", nullptr},
            {"signal", nullptr},
            {"timed_out", false},
            {"ended_by", info.ended_by},
            {"error",
             "the supervisor running this command died; the command was ended and its "
             "output is lost (the sandbox itself was adopted by a new supervisor)"}};
  if (ended.signal != 0) {
    info.signal = ended.signal;
    e["signal"] = ended.signal;
  } else {
    info.exit_code = ended.exit_code;
    e["exit_code"] = ended.exit_code;
    e["signal"] = 0;
  }
  std::shared_ptr<Command> cmd(new Command(std::move(conn), std::move(info)));
  cmd->request_id_ = ended.request_id;
  cmd->start_answered_ = true;
  cmd->exited_ = true;
  cmd->kept_.push_back(std::move(e));
  return cmd;
}

std::shared_ptr<Command> Command::adopt(std::shared_ptr<AgentConnection> conn,
                                        const proto::LiveExecution& live, const Json& note) {
  CommandInfo info;
  info.command_id = "c" + std::to_string(live.request_id);
  info.pid = static_cast<int>(live.pid);
  info.state = "running";
  info.background = true;  // its caller's connection died with the supervisor
  if (auto a = note.find("argv"); a != note.end() && a->is_array())
    for (const auto& v : *a)
      if (v.is_string()) info.argv.push_back(v.get<std::string>());
  if (auto t = note.find("started_at"); t != note.end() && t->is_number_integer())
    info.started_at = t->get<int64_t>();
  std::shared_ptr<Command> cmd(new Command(conn, std::move(info)));
  cmd->request_id_ = live.request_id;
  cmd->start_answered_ = true;
  cmd->started_ms_ = cmd->info_.started_at;
  // Its duration counts from the adoption: the old supervisor's clock is not this one's.
  cmd->started_ = Clock::now();
  cmd->kept_.push_back(Json{{"type", "supervisor_restart"},
                            {"held_bytes", live.held_bytes},
                            {"dropped_bytes", live.dropped_bytes}});
  std::weak_ptr<Command> weak = cmd;
  conn->openAt(live.request_id, [weak](const proto::FrameHeader& h, std::string_view p) {
    auto self = weak.lock();
    return self == nullptr || self->onFrame(h, p);
  });
  return cmd;
}

std::unique_ptr<EventStream> Command::foregroundStream() {
  std::weak_ptr<Command> weak = weak_from_this();
  return std::make_unique<QueueStream>(foreground_, nullptr, [weak] {
    // The client went away before the exit: nothing it started may keep running.
    if (auto self = weak.lock()) (void)self->signal(SIGKILL);
  });
}

std::unique_ptr<EventStream> Command::attach() {
  auto q = std::make_shared<EventQueue>();
  std::lock_guard lock(mu_);
  for (const auto& e : kept_) {
    if (e.value("type", "") == "exit")
      q->finish(e);
    else
      q->push(e);
  }
  if (!exited_) attached_.push_back(q);
  return std::make_unique<QueueStream>(q, nullptr, nullptr);
}

SResult<> Command::sendStdin(std::string data, bool eof) {
  if (!running())
    return serviceError(ErrorCode::kConflict, "command " + info_.command_id + " has exited");
  size_t off = 0;
  do {
    proto::Stdin m;
    size_t n = std::min(proto::kMaxChunk, data.size() - off);
    m.data = data.substr(off, n);
    off += n;
    m.eof = eof && off == data.size();
    std::string frame;
    proto::encode(frame, request_id_, m);
    if (auto r = conn_->send(frame); !r)
      return serviceError(ErrorCode::kInternal,
                          "stdin of " + info_.command_id + ": " + r.error().message());
  } while (off < data.size());
  return {};
}

SResult<> Command::signal(int signo) {
  if (!running())
    return serviceError(ErrorCode::kConflict, "command " + info_.command_id + " has exited");
  std::string frame;
  proto::encode(frame, request_id_, proto::Signal{signo});
  if (auto r = conn_->send(frame); !r)
    return serviceError(ErrorCode::kInternal,
                        "signal to " + info_.command_id + ": " + r.error().message());
  return {};
}

CommandInfo Command::info() const {
  std::lock_guard lock(mu_);
  return info_;
}

bool Command::running() const {
  std::lock_guard lock(mu_);
  return !exited_;
}

}  // namespace airlock::sandbox
