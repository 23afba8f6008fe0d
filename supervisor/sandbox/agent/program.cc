#include "supervisor/sandbox/agent/program.h"

#include <unistd.h>

namespace airlock::sandbox {

namespace proto = airlock::protocol;

namespace {

Unexpected protocolError(const std::string& what) {
  return fail("agent protocol violation: " + what);
}

Result<> sendStdin(AgentConnection& conn, uint32_t id, std::string data, bool eof) {
  std::string frame;
  proto::encode(frame, id, proto::Stdin{std::move(data), eof});
  return conn.send(frame);
}

// Forwards a host fd to the program's stdin from the hub's loop, a chunk per readable event.
class StdinRelay {
 public:
  StdinRelay(AgentConnection& conn, uint32_t id, int fd) : conn_(conn), id_(id), fd_(fd) {}
  ~StdinRelay() {
    if (watching_) conn_.hub().unwatch(fd_);
  }
  Result<> start() {
    auto r = conn_.hub().watch(fd_, [this] { return onReadable(); });
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
    // EOF or a read error: either way the program sees end of input. The program may have
    // exited already; a refused write is then harmless.
    bool eof = n <= 0;
    (void)sendStdin(conn_, id_, eof ? std::string() : std::string(buf, static_cast<size_t>(n)),
                    eof);
    if (eof) watching_ = false;
    return !eof;
  }

  AgentConnection& conn_;
  uint32_t id_;
  int fd_;
  bool watching_ = false;
};

}  // namespace

Result<ProgramOutcome> runProgram(AgentConnection& conn, const proto::Exec& exec,
                                  const OutputFn& on_output, const ProgramInput& input,
                                  Clock::time_point deadline) {
  auto box = conn.mailbox();
  uint32_t id = conn.open(
      box->handler([](const proto::FrameHeader& h) { return h.type == proto::MsgType::kExited; }));
  struct Close {
    AgentConnection& conn;
    uint32_t id;
    ~Close() { conn.close(id); }
  } close{conn, id};

  std::string frame;
  proto::encode(frame, id, exec);
  if (auto r = conn.send(frame); !r) return Unexpected(r.error());
  std::optional<StdinRelay> relay;
  if (exec.stdin_pipe) {
    if (input.fd >= 0) {
      relay.emplace(conn, id, input.fd);
      if (auto r = relay->start(); !r) return Unexpected(std::move(r.error()).wrap("stdin"));
    } else {
      (void)sendStdin(conn, id, input.data, true);
    }
  }

  ProgramOutcome outcome;
  for (;;) {
    auto f = box->pop(deadline);
    if (!f) return fail("timed out waiting for the sandbox agent");
    if (isChannelFailure(f->header)) {
      auto e = proto::decodeError(f->payload);
      return fail(e ? e->message : "the sandbox's agent channel failed");
    }
    switch (f->header.type) {
      case proto::MsgType::kStarted: {
        auto st = proto::decodeStarted(f->payload);
        if (!st) return protocolError(st.error().message());
        outcome.pid = st->pid;
        break;
      }
      case proto::MsgType::kOutput: {
        auto o = proto::decodeOutput(f->payload);
        if (!o) return protocolError(o.error().message());
        if (o->stream == proto::Stream::kControl && !exec.control_pipe)
          return protocolError("control output for an execution without a control pipe");
        on_output(o->stream, o->data);
        break;
      }
      case proto::MsgType::kError: {
        auto e = proto::decodeError(f->payload);
        if (!e) return protocolError(e.error().message());
        outcome.error = e->stage + ": " + e->message;
        break;
      }
      case proto::MsgType::kExited: {
        auto x = proto::decodeExited(f->payload);
        if (!x) return protocolError(x.error().message());
        outcome.exited = *x;
        return outcome;
      }
      default:
        return protocolError(std::string("unexpected ") + proto::msgTypeName(f->header.type) +
                             " during an execution");
    }
  }
}

}  // namespace airlock::sandbox
