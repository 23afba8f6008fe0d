#include "supervisor/sandbox/agent/program.h"

#include <unistd.h>

#include <algorithm>
#include <csignal>

namespace airlock::sandbox {

namespace proto = airlock::protocol;

namespace {

Unexpected protocolError(const std::string& what) {
  return fail("agent protocol violation: " + what);
}

}  // namespace

// Forwards a host fd to the program's stdin from the hub's loop, a chunk per readable event.
class ProgramRun::StdinRelay {
 public:
  StdinRelay(ProgramRun& run, int fd) : run_(run), fd_(fd) {}
  ~StdinRelay() {
    if (watching_) run_.conn_.hub().unwatch(fd_);
  }
  Result<> start() {
    auto r = run_.conn_.hub().watch(fd_, [this] { return onReadable(); });
    if (!r) {
      // A regular file or /dev/null cannot be polled: its bytes are all there, send them now.
      if (r.error().errnum() != EPERM) return r;
      while (onReadable()) {
      }
      return {};
    }
    watching_ = true;
    return {};
  }

 private:
  bool onReadable() {
    char buf[proto::kMaxChunk / 4];
    ssize_t n = read(fd_, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
    // EOF or a read error: either way the program sees end of input.
    bool eof = n <= 0;
    run_.write(eof ? std::string() : std::string(buf, static_cast<size_t>(n)), eof);
    if (eof) watching_ = false;
    return !eof;
  }

  ProgramRun& run_;
  int fd_;
  bool watching_ = false;
};

ProgramRun::ProgramRun(AgentConnection& conn, bool control_pipe)
    : conn_(conn), control_(control_pipe) {}

Result<std::unique_ptr<ProgramRun>> ProgramRun::start(AgentConnection& conn,
                                                      const proto::Exec& exec) {
  std::unique_ptr<ProgramRun> run(new ProgramRun(conn, exec.control_pipe));
  run->box_ = conn.mailbox();
  run->id_ = conn.open(run->box_->handler(
      [](const proto::FrameHeader& h) { return h.type == proto::MsgType::kExited; }));
  std::string frame;
  proto::encode(frame, run->id_, exec);
  if (auto r = conn.send(frame); !r) return Unexpected(r.error());
  return run;
}

ProgramRun::~ProgramRun() {
  relay_.reset();  // no more stdin from the hub's loop
  conn_.close(id_);
}

void ProgramRun::write(std::string data, bool eof) {
  // One frame carries at most kMaxChunk bytes (the agent refuses larger ones and drops the
  // channel): a large stdin goes in pieces, end of input with the last.
  std::string frame;
  size_t off = 0;
  do {
    const size_t n = std::min(proto::kMaxChunk, data.size() - off);
    const bool last = off + n == data.size();
    frame.clear();
    proto::encode(frame, id_, proto::Stdin{data.substr(off, n), eof && last});
    if (!conn_.send(frame)) return;
    off += n;
  } while (off < data.size());
}

Result<> ProgramRun::feed(const ProgramInput& input) {
  if (input.fd < 0) {
    write(input.data, true);
    return {};
  }
  relay_ = std::make_unique<StdinRelay>(*this, input.fd);
  if (auto r = relay_->start(); !r) return Unexpected(std::move(r.error()).wrap("stdin"));
  return {};
}

Result<> ProgramRun::signal(int signo) {
  std::string frame;
  proto::encode(frame, id_, proto::Signal{signo});
  return conn_.send(frame);
}

Result<> ProgramRun::apply(const Mailbox::Frame& f, const OutputFn* on_output) {
  if (isChannelFailure(f.header)) {
    auto e = proto::decodeError(f.payload);
    return fail(e ? e->message : "the sandbox's agent channel failed");
  }
  switch (f.header.type) {
    case proto::MsgType::kStarted: {
      auto st = proto::decodeStarted(f.payload);
      if (!st) return protocolError(st.error().message());
      outcome_.pid = st->pid;
      return {};
    }
    case proto::MsgType::kOutput: {
      auto o = proto::decodeOutput(f.payload);
      if (!o) return protocolError(o.error().message());
      if (o->stream == proto::Stream::kControl && !control_)
        return protocolError("control output for an execution without a control pipe");
      if (on_output != nullptr) (*on_output)(o->stream, o->data);
      return {};
    }
    case proto::MsgType::kError: {
      auto e = proto::decodeError(f.payload);
      if (!e) return protocolError(e.error().message());
      outcome_.error = e->stage + ": " + e->message;
      return {};
    }
    case proto::MsgType::kExited: {
      auto x = proto::decodeExited(f.payload);
      if (!x) return protocolError(x.error().message());
      outcome_.exited = *x;
      exited_ = true;
      return {};
    }
    default:
      return protocolError(std::string("unexpected ") + proto::msgTypeName(f.header.type) +
                           " during an execution");
  }
}

bool ProgramRun::drain() {
  while (!exited_) {
    auto f = box_->pop(Clock::now());
    if (!f) return true;
    if (!apply(*f, nullptr)) return false;
  }
  return false;
}

Result<bool> ProgramRun::pump(const OutputFn& on_output, Clock::time_point deadline) {
  if (exited_) return false;
  auto f = box_->pop(deadline);
  if (!f) return fail("timed out waiting for the sandbox agent");
  if (auto r = apply(*f, &on_output); !r) return Unexpected(r.error());
  return !exited_;
}

Result<ProgramOutcome> ProgramRun::wait(const OutputFn& on_output, Clock::time_point deadline,
                                        std::optional<Clock::time_point> kill_at) {
  while (!exited_) {
    auto until = kill_at && !outcome_.killed_at_limit ? std::min(deadline, *kill_at) : deadline;
    auto f = box_->pop(until);
    if (!f) {
      if (kill_at && !outcome_.killed_at_limit && Clock::now() >= *kill_at) {
        outcome_.killed_at_limit = true;
        (void)signal(SIGKILL);
        continue;
      }
      return fail("timed out waiting for the sandbox agent");
    }
    if (auto r = apply(*f, &on_output); !r) return Unexpected(r.error());
  }
  return outcome_;
}

Result<ProgramOutcome> runProgram(AgentConnection& conn, const proto::Exec& exec,
                                  const OutputFn& on_output, const ProgramInput& input,
                                  Clock::time_point deadline) {
  auto run = ProgramRun::start(conn, exec);
  if (!run) return Unexpected(run.error());
  if (exec.stdin_pipe) {
    if (auto r = (*run)->feed(input); !r) return Unexpected(r.error());
  }
  return (*run)->wait(on_output, deadline);
}

}  // namespace airlock::sandbox
