// The blocking side of an API connection: a request's body and answer, on the request's own
// thread (blocking_exchange.h), with a deadline on every wait. Waiting for requests is
// asynchronous and lives in server.cc.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/error.hpp>
#include <chrono>
#include <system_error>
#include <vector>

namespace airlock::api::detail {

namespace net = boost::asio;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

// poll(2)'s timeout until `deadline`, rounded up; at most ~17 minutes a call.
inline int msUntil(Clock::time_point deadline) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (ms <= 0) return 0;
  return ms > 1000000 ? 1000000 : static_cast<int>(ms) + 1;
}

// A Beast SyncReadStream/SyncWriteStream over a non-blocking socket, where every wait is a
// poll() that also watches the server's stop event and gives up at a deadline. Asio's own sync
// sockets cannot time out.
class FdStream {
 public:
  FdStream(int fd, int stop_fd, std::chrono::milliseconds io_timeout)
      : fd_(fd), stop_fd_(stop_fd), io_timeout_(io_timeout) {}

  template <typename MutableBuffers>
  size_t read_some(const MutableBuffers& buffers, error_code& ec) {
    iovec iov[16];
    int n = 0;
    for (auto it = net::buffer_sequence_begin(buffers);
         it != net::buffer_sequence_end(buffers) && n < 16; ++it) {
      net::mutable_buffer b = *it;
      if (b.size() == 0) continue;
      iov[n++] = {b.data(), b.size()};
    }
    ec = {};
    if (n == 0) return 0;
    while (true) {
      ssize_t got = readv(fd_, iov, n);
      if (got > 0) return static_cast<size_t>(got);
      if (got == 0) {
        ec = net::error::eof;
        return 0;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN) {
        ec = error_code(errno, boost::system::system_category());
        return 0;
      }
      if (!wait(POLLIN, Clock::now() + io_timeout_, ec)) return 0;
    }
  }

  template <typename MutableBuffers>
  size_t read_some(const MutableBuffers& buffers) {
    error_code ec;
    size_t n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

  template <typename ConstBuffers>
  size_t write_some(const ConstBuffers& buffers, error_code& ec) {
    iovec iov[16];
    int n = 0;
    for (auto it = net::buffer_sequence_begin(buffers);
         it != net::buffer_sequence_end(buffers) && n < 16; ++it) {
      net::const_buffer b = *it;
      if (b.size() == 0) continue;
      iov[n++] = {const_cast<void*>(b.data()), b.size()};
    }
    ec = {};
    if (n == 0) return 0;
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(n);
    auto deadline = Clock::now() + io_timeout_;
    while (true) {
      ssize_t sent = sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (sent >= 0) return static_cast<size_t>(sent);
      if (errno == EINTR) continue;
      if (errno != EAGAIN) {
        ec = error_code(errno, boost::system::system_category());
        return 0;
      }
      if (!wait(POLLOUT, deadline, ec)) return 0;
    }
  }

  template <typename ConstBuffers>
  size_t write_some(const ConstBuffers& buffers) {
    error_code ec;
    size_t n = write_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

  int fd() const { return fd_; }
  int stopFd() const { return stop_fd_; }
  std::chrono::milliseconds ioTimeout() const { return io_timeout_; }

  // The client has hung up (or errored), or the server is stopping.
  bool peerGone() const {
    pollfd p[2] = {{fd_, POLLRDHUP, 0}, {stop_fd_, POLLIN, 0}};
    if (poll(p, 2, 0) <= 0) return false;
    return (p[0].revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0 || p[1].revents != 0;
  }

 private:
  bool wait(short events, Clock::time_point deadline, error_code& ec) {
    while (true) {
      pollfd p[2] = {{fd_, events, 0}, {stop_fd_, POLLIN, 0}};
      int rc = poll(p, 2, msUntil(deadline));
      if (rc < 0 && errno == EINTR) continue;
      if (rc < 0) {
        ec = error_code(errno, boost::system::system_category());
        return false;
      }
      if (p[1].revents != 0) {
        ec = net::error::operation_aborted;
        return false;
      }
      if (p[0].revents != 0) return true;  // ready, or HUP/ERR for the next call to report
      if (Clock::now() >= deadline) {
        ec = net::error::timed_out;
        return false;
      }
    }
  }

  int fd_;
  int stop_fd_;
  std::chrono::milliseconds io_timeout_;
};

}  // namespace airlock::api::detail
