#include "supervisor/sandbox/agent/port_stream.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <mutex>

#include "airlock/unique_fd.h"

namespace airlock::sandbox {

namespace proto = airlock::protocol;

// Shared by the stream's thread and the hub thread's frame handler.
struct PortStream::State {
  std::mutex mu;
  std::condition_variable cv;  // the open's answer
  UniqueFd ready{::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};

  enum class Open { kWaiting, kOpen, kFailed } open = Open::kWaiting;
  int open_errnum = 0;
  std::string open_error;

  std::string inbox;
  bool eof = false;
  bool ended = false;
  std::string error;
  uint64_t unconsumed = 0;  // bytes received and not yet credited back (at most the window)
  uint64_t send_credit = proto::kPortWindow;

  void wake() {
    uint64_t one = 1;
    (void)!::write(ready.get(), &one, sizeof one);
  }
  void endWith(std::string why) {
    if (!ended && error.empty()) error = std::move(why);
    ended = true;
  }

  // On the hub thread: one frame of the stream. True when the stream is over.
  bool onFrame(const proto::FrameHeader& h, std::string_view payload) {
    std::lock_guard lock(mu);
    if (open == Open::kWaiting) {
      if (h.type == proto::MsgType::kOk) {
        open = Open::kOpen;
      } else {
        open = Open::kFailed;
        open_errnum = EPROTO;
        if (h.type == proto::MsgType::kError) {
          auto m = proto::decodeError(payload);
          open_errnum = m ? m->errnum : EPROTO;
          open_error = m ? m->message : "agent: " + m.error().message();
        } else {
          open_error = std::string("agent answered PortOpen with ") + proto::msgTypeName(h.type);
        }
      }
      cv.notify_all();
      return open == Open::kFailed;
    }
    switch (h.type) {
      case proto::MsgType::kPortData: {
        auto m = proto::decodePortData(payload);
        if (!m) {
          endWith("agent: " + m.error().message());
        } else if (eof && (!m->data.empty() || m->eof)) {
          endWith("agent sent PortData after its eof");
        } else if (unconsumed + m->data.size() > proto::kPortWindow) {
          endWith("agent overran its " + std::to_string(proto::kPortWindow) + "-byte window");
        } else {
          inbox += m->data;
          unconsumed += m->data.size();
          eof = eof || m->eof;
        }
        break;
      }
      case proto::MsgType::kPortCredit: {
        auto m = proto::decodePortCredit(payload);
        if (!m) {
          endWith("agent: " + m.error().message());
        } else if (send_credit + m->bytes > proto::kPortWindow) {
          endWith("agent granted credit past the " + std::to_string(proto::kPortWindow) +
                  "-byte window");
        } else {
          send_credit += m->bytes;
        }
        break;
      }
      case proto::MsgType::kPortClose: {
        auto m = proto::decodePortClose(payload);
        if (!m)
          endWith("agent: " + m.error().message());
        else if (m->errnum != 0)
          endWith(std::string("connection in the sandbox failed: ") + Error::errnoName(m->errnum));
        ended = true;
        break;
      }
      case proto::MsgType::kError: {
        auto m = proto::decodeError(payload);
        endWith(m ? "agent: " + m->message : "agent: " + m.error().message());
        break;
      }
      default:
        endWith(std::string("agent sent ") + proto::msgTypeName(h.type) + " on a port stream");
        break;
    }
    wake();
    return ended;
  }
};

SResult<std::unique_ptr<PortStream>> PortStream::open(std::shared_ptr<AgentConnection> conn,
                                                      uint16_t port,
                                                      std::chrono::milliseconds timeout) {
  auto state = std::make_shared<State>();
  if (!state->ready)
    return serviceError(ErrorCode::kInternal, std::string("eventfd: ") + Error::errnoName(errno));
  uint32_t id = conn->open([state](const proto::FrameHeader& h, std::string_view payload) {
    return state->onFrame(h, payload);
  });
  // From here the destructor closes the handler (and tells the agent once it is open).
  std::unique_ptr<PortStream> stream(new PortStream(conn, state, id, port));
  std::string frame;
  proto::encode(frame, id, proto::PortOpen{port});
  if (auto r = conn->send(frame); !r)
    return serviceError(ErrorCode::kConflict, "sandbox agent: " + r.error().message());
  std::unique_lock lock(state->mu);
  if (!state->cv.wait_for(lock, timeout, [&] { return state->open != State::Open::kWaiting; })) {
    return serviceError(ErrorCode::kBadGateway, "port " + std::to_string(port) +
                                                    ": the sandbox did not connect within " +
                                                    std::to_string(timeout.count()) + " ms");
  }
  if (state->open == State::Open::kFailed) {
    const std::string what = "port " + std::to_string(port) + ": " + state->open_error;
    if (state->open_errnum == EMFILE) return serviceError(ErrorCode::kTooManyRequests, what);
    return serviceError(ErrorCode::kBadGateway, what);
  }
  return stream;
}

PortStream::~PortStream() {
  bool tell = false;
  {
    std::lock_guard lock(state_->mu);
    // A connect still in progress (open() timed out) is closed too: the agent may finish it.
    tell = state_->open != State::Open::kFailed && !state_->ended;
  }
  conn_->close(id_);
  if (tell) {
    std::string frame;
    proto::encode(frame, id_, proto::PortClose{});
    (void)conn_->send(frame);  // a gone agent closed the connection already
  }
}

int PortStream::readyFd() const { return state_->ready.get(); }

PortStream::Arrived PortStream::take() {
  uint64_t drained;
  (void)!::read(state_->ready.get(), &drained, sizeof drained);
  std::lock_guard lock(state_->mu);
  Arrived a;
  a.data.swap(state_->inbox);
  a.eof = state_->eof;
  a.ended = state_->ended;
  a.error = state_->error;
  return a;
}

SResult<> PortStream::consumed(size_t n) {
  if (n == 0) return {};
  {
    std::lock_guard lock(state_->mu);
    if (state_->ended) return {};
    state_->unconsumed -= std::min<uint64_t>(n, state_->unconsumed);
  }
  std::string frame;
  proto::encode(frame, id_, proto::PortCredit{static_cast<uint32_t>(n)});
  return sendFrame(frame);
}

size_t PortStream::sendWindow() const {
  std::lock_guard lock(state_->mu);
  return state_->ended || eof_sent_ ? 0 : static_cast<size_t>(state_->send_credit);
}

SResult<> PortStream::write(std::string_view data) {
  {
    std::lock_guard lock(state_->mu);
    if (state_->ended) return serviceError(ErrorCode::kConflict, "the port stream has ended");
    if (data.size() > state_->send_credit)
      return serviceError(ErrorCode::kInternal, "port stream: write beyond the agent's window");
    state_->send_credit -= data.size();
  }
  std::string frames;
  for (size_t at = 0; at < data.size(); at += proto::kMaxChunk) {
    proto::PortData d;
    d.data.assign(data.substr(at, proto::kMaxChunk));
    proto::encode(frames, id_, d);
  }
  return sendFrame(frames);
}

SResult<> PortStream::writeEof() {
  if (eof_sent_) return {};
  eof_sent_ = true;
  std::string frame;
  proto::encode(frame, id_, proto::PortData{{}, true});
  return sendFrame(frame);
}

SResult<> PortStream::sendFrame(const std::string& frame) {
  if (auto r = conn_->send(frame); !r)
    return serviceError(ErrorCode::kConflict, "sandbox agent: " + r.error().message());
  return {};
}

}  // namespace airlock::sandbox
