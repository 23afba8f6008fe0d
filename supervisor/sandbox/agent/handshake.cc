#include "supervisor/sandbox/agent/handshake.h"
#include "airlock/error_from_text.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "airlock/protocol/channel.h"

namespace airlock::sandbox {

namespace {

// poll(2)'s timeout until `deadline`, in slices of at most a minute (an int of milliseconds
// cannot hold a far deadline): a poll that times out before the deadline is simply repeated.
int msUntil(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) return 0;
  return left.count() > 60'000 ? 60'000 : static_cast<int>(left.count());
}

Unexpected protocolError(const std::string& what) {
  return fail("agent protocol violation: " + what);
}

}  // namespace

Result<> AgentHandshake::send(const std::string& frame) {
  auto r = protocol::writeFrame(fd_.get(), frame);
  if (!r) return Unexpected(std::move(r.error()).wrap("send to agent"));
  return {};
}

Result<AgentHandshake::Frame> AgentHandshake::nextFrame(Clock::time_point deadline) {
  char buf[64 * 1024];
  for (;;) {
    auto ready = reader_.next();
    if (!ready) return protocolError(ready.error().message());
    if (ready->has_value()) {
      auto& [header, payload] = **ready;
      return Frame{header, std::move(payload)};
    }
    pollfd fds[1] = {{fd_.get(), POLLIN, 0}};
    int n = poll(fds, 1, msUntil(deadline));
    if (n < 0) {
      if (errno == EINTR) continue;
      return sysError("poll", "agent channel");
    }
    if (n == 0) {
      if (Clock::now() < deadline) continue;  // only a slice ended
      return fail("timed out waiting for the sandbox agent");
    }
    ssize_t got = read(fd_.get(), buf, sizeof buf);
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return sysError("read", "agent channel");
    }
    if (got == 0) return fail("the sandbox agent closed its channel (it exited or was killed)");
    reader_.feed(std::string_view(buf, static_cast<size_t>(got)));
  }
}

Result<> AgentHandshake::expectOk(uint32_t id, const char* what, Clock::time_point deadline) {
  auto frame = nextFrame(deadline);
  if (!frame) return Unexpected(std::move(frame.error()).wrap(what));
  if (frame->header.request_id != id)
    return protocolError(std::string(what) + ": answer for request " +
                         std::to_string(frame->header.request_id) + ", expected " +
                         std::to_string(id));
  if (frame->header.type == protocol::MsgType::kOk) return {};
  if (frame->header.type == protocol::MsgType::kError) {
    auto e = protocol::decodeError(frame->payload);
    if (!e) return protocolError(e.error().message());
    return Unexpected(errorFromText(e->message, e->errnum)
                          .wrap(std::string(what) + " (agent stage " + e->stage + ")"));
  }
  return protocolError(std::string(what) + ": unexpected " +
                       protocol::msgTypeName(frame->header.type));
}

Result<> AgentHandshake::preconfigure(const protocol::Configure& config) {
  // A Unix stream socket buffers ~200 KiB by default; a Configure is a few KiB (its seccomp
  // program is most of it).
  constexpr size_t kAheadMax = 64 * 1024;
  std::string out;
  uint32_t id = next_id_;
  protocol::encode(out, id, config);
  if (out.size() > kAheadMax) return {};
  if (auto r = send(out); !r) return Unexpected(r.error());
  configure_id_ = nextId();
  return {};
}

Result<protocol::Hello> AgentHandshake::handshake(const protocol::Configure& config,
                                                  Clock::time_point deadline) {
  auto frame = nextFrame(deadline);
  if (!frame) return Unexpected(std::move(frame.error()).wrap("waiting for the agent's hello"));
  if (frame->header.type != protocol::MsgType::kHello)
    return protocolError(std::string("first frame is ") +
                         protocol::msgTypeName(frame->header.type) + ", expected Hello");
  auto hello = protocol::decodeHello(frame->payload);
  if (!hello) return protocolError(hello.error().message());
  if (hello->protocol_version != protocol::kProtocolVersion)
    return fail("agent speaks protocol version " + std::to_string(hello->protocol_version) +
                ", this supervisor speaks " + std::to_string(protocol::kProtocolVersion));
  uint32_t id = configure_id_;
  if (id == 0) {
    id = nextId();
    std::string out;
    protocol::encode(out, id, config);
    if (auto r = send(out); !r) return Unexpected(r.error());
  }
  if (auto r = expectOk(id, "configure", deadline); !r) return Unexpected(r.error());
  return *hello;
}

Result<protocol::Reattached> AgentHandshake::reattach(Clock::time_point deadline) {
  uint32_t id = nextId();
  std::string out;
  // This supervisor takes live executions over; an agent built before that ends them instead
  // (it skips the field) and says so by leaving kFeatureKeepSessions out of its answer.
  protocol::encode(out, id, protocol::Reattach{.keep_sessions = true});
  if (auto r = send(out); !r) return Unexpected(r.error());
  auto frame = nextFrame(deadline);
  if (!frame) return Unexpected(std::move(frame.error()).wrap("reattach"));
  if (frame->header.request_id != id || frame->header.type != protocol::MsgType::kReattached)
    return protocolError(std::string("reattach: unexpected ") +
                         protocol::msgTypeName(frame->header.type) + " for request " +
                         std::to_string(frame->header.request_id));
  auto answer = protocol::decodeReattached(frame->payload);
  if (!answer) return protocolError(answer.error().message());
  return *answer;
}

void AgentHandshake::shutdown() {
  if (!fd_) return;
  std::string f;
  protocol::encode(f, nextId(), protocol::Shutdown{});
  // Non-blocking on purpose: a wedged agent must not stall teardown; the cgroup kill follows.
  (void)::send(fd_.get(), f.data(), f.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

}  // namespace airlock::sandbox
