#include "airlock/protocol/channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

namespace airlock::protocol {
namespace {

constexpr const char* kClosedOp = "agent channel closed by peer";

// Waits until fd is ready for events; timeout_ms < 0 waits forever. 0 on success.
int waitFd(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  for (;;) {
    int n = ::poll(&p, 1, timeout_ms);
    if (n > 0) return 0;
    if (n == 0) {
      errno = ETIMEDOUT;
      return -1;
    }
    if (errno != EINTR) return -1;
  }
}

}  // namespace

bool isChannelClosed(const Error& err) { return err.op() == kClosedOp; }

Result<> writeFrame(int fd, const std::string& frame) {
  size_t done = 0;
  bool is_socket = true;
  while (done < frame.size()) {
    ssize_t n;
    if (is_socket) {
      n = ::send(fd, frame.data() + done, frame.size() - done, MSG_NOSIGNAL);
      if (n < 0 && errno == ENOTSOCK) {
        is_socket = false;
        continue;
      }
    } else {
      n = ::write(fd, frame.data() + done, frame.size() - done);
    }
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (waitFd(fd, POLLOUT, -1) != 0) return sysError("poll(agent channel, POLLOUT)");
      continue;
    }
    if (n == 0) errno = EPIPE;
    return sysError("write(agent channel)",
                    std::to_string(done) + "/" + std::to_string(frame.size()) + " bytes");
  }
  return {};
}

Result<std::pair<FrameHeader, std::string>> readFrame(int fd, FrameReader& reader, int timeout_ms) {
  using Clock = std::chrono::steady_clock;
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms < 0 ? 0 : timeout_ms);
  char buf[64 * 1024];
  for (;;) {
    auto frame = reader.next();
    if (!frame) return Unexpected(std::move(frame.error()));
    if (*frame) return std::move(**frame);

    int wait_ms = -1;
    if (timeout_ms >= 0) {
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      wait_ms = left > 0 ? static_cast<int>(left) : 0;
    }
    if (waitFd(fd, POLLIN, wait_ms) != 0) {
      if (errno == ETIMEDOUT)
        return Unexpected(
            Error("read(agent channel)", std::to_string(timeout_ms) + " ms", ETIMEDOUT));
      return sysError("poll(agent channel, POLLIN)");
    }
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      if (errno == ECONNRESET) return fail(kClosedOp, "connection reset");
      return sysError("read(agent channel)");
    }
    if (n == 0)
      return fail(kClosedOp,
                  reader.buffered() == 0
                      ? "at a frame boundary"
                      : "mid-frame, " + std::to_string(reader.buffered()) + " bytes pending");
    reader.feed(std::string_view(buf, static_cast<size_t>(n)));
  }
}

}  // namespace airlock::protocol
