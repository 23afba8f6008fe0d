#include "port_relay.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace airlock::agent {

namespace proto = airlock::protocol;

void PortRelay::fail(uint32_t id, int errnum, const std::string& stage,
                     const std::string& message) {
  proto::ErrorMsg m;
  m.errnum = errnum;
  m.stage = stage;
  m.message = message.size() > 4096 ? message.substr(0, 4096) : message;
  sendMsg(id, m);
}

void PortRelay::open(uint32_t id, const std::string& payload) {
  auto m = proto::decodePortOpen(payload);
  if (!m) {
    fail(id, EINVAL, "protocol", m.error().message());
    return;
  }
  if (streams_.count(id) != 0) {
    fail(id, EEXIST, "protocol",
         "PortOpen: request id " + std::to_string(id) + " is already a port stream");
    return;
  }
  if (streams_.size() >= proto::kMaxPortStreams) {
    fail(id, EMFILE, "port",
         "port " + std::to_string(m->port) + ": " + std::to_string(proto::kMaxPortStreams) +
             " port streams are already open in this sandbox");
    return;
  }
  auto s = std::make_unique<Stream>();
  s->id = id;
  s->port = static_cast<uint16_t>(m->port);
  int last_errno = 0;
  if (!connectNext(*s, last_errno)) {
    if (last_errno == ECONNREFUSED) {
      fail(id, ECONNREFUSED, "port",
           "nothing listens on port " + std::to_string(m->port) +
               " in the sandbox (127.0.0.1 and [::1] refused the connection)");
    } else {
      fail(id, last_errno, "port",
           "connect to port " + std::to_string(m->port) + ": " + std::strerror(last_errno));
    }
    return;
  }
  Stream& ref = *s;
  streams_.emplace(id, std::move(s));
  if (!ref.connecting) sendMsg(id, proto::Ok{});
}

// Loopback first over IPv4, then IPv6: a server bound to either is reached.
bool PortRelay::connectNext(Stream& s, int& last_errno) {
  for (; s.family_index < 2; ++s.family_index) {
    const bool v6 = s.family_index == 1;
    UniqueFd fd(::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) {
      if (last_errno == 0 || errno != EAFNOSUPPORT) last_errno = errno;
      continue;
    }
    int rc;
    if (v6) {
      sockaddr_in6 a{};
      a.sin6_family = AF_INET6;
      a.sin6_port = htons(s.port);
      a.sin6_addr = in6addr_loopback;
      rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
    } else {
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(s.port);
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a);
    }
    if (rc == 0 || errno == EINPROGRESS) {
      s.connecting = rc != 0;
      s.sock = std::move(fd);
      return true;
    }
    // A missing IPv6 stack says nothing about the port: keep IPv4's answer.
    if (!(v6 && (errno == EADDRNOTAVAIL || errno == ENETUNREACH) && last_errno != 0))
      last_errno = errno;
  }
  return false;
}

void PortRelay::finishConnect(Stream& s) {
  int err = 0;
  socklen_t len = sizeof err;
  if (::getsockopt(s.sock.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err == 0) {
    s.connecting = false;
    sendMsg(s.id, proto::Ok{});
    return;
  }
  const uint32_t id = s.id;
  const uint16_t port = s.port;
  int last_errno = err;
  ++s.family_index;
  s.sock.reset();
  if (connectNext(s, last_errno)) {
    if (!s.connecting) sendMsg(id, proto::Ok{});
    return;
  }
  streams_.erase(id);
  if (last_errno == ECONNREFUSED) {
    fail(id, ECONNREFUSED, "port",
         "nothing listens on port " + std::to_string(port) +
             " in the sandbox (127.0.0.1 and [::1] refused the connection)");
  } else {
    fail(id, last_errno, "port",
         "connect to port " + std::to_string(port) + ": " + std::strerror(last_errno));
  }
}

void PortRelay::data(uint32_t id, const std::string& payload) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;  // ended here while the frame was on its way
  Stream& s = *it->second;
  auto m = proto::decodePortData(payload);
  std::string problem;
  if (!m) {
    problem = m.error().message();
  } else if (s.connecting) {
    problem = "PortData before the stream was connected";
  } else if (s.peer_eof && (!m->data.empty() || m->eof)) {
    problem = "PortData after the supervisor's eof";
  } else if (s.to_socket.size() + m->data.size() > proto::kPortWindow) {
    problem = "PortData of " + std::to_string(m->data.size()) + " bytes overruns the " +
              std::to_string(proto::kPortWindow) + "-byte window";
  }
  if (!problem.empty()) {
    fail(id, EPROTO, "protocol", problem + "; closing the port stream");
    end(id, EPROTO);
    return;
  }
  s.to_socket += m->data;
  s.peer_eof = m->eof;
  writeSocket(s);
}

void PortRelay::credit(uint32_t id, const std::string& payload) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  Stream& s = *it->second;
  auto m = proto::decodePortCredit(payload);
  std::string problem;
  if (!m) {
    problem = m.error().message();
  } else if (uint64_t{s.send_credit} + m->bytes > proto::kPortWindow) {
    problem = "PortCredit of " + std::to_string(m->bytes) + " bytes grows the window past " +
              std::to_string(proto::kPortWindow);
  }
  if (!problem.empty()) {
    fail(id, EPROTO, "protocol", problem + "; closing the port stream");
    end(id, EPROTO);
    return;
  }
  s.send_credit += m->bytes;
}

void PortRelay::close(uint32_t id, const std::string& payload) {
  (void)payload;  // no fields the agent needs: the supervisor is done with the stream
  streams_.erase(id);
}

void PortRelay::addPollFds(std::vector<pollfd>& fds, std::vector<uint32_t>& ids) const {
  for (const auto& [id, s] : streams_) {
    short events = 0;
    if (s->connecting) {
      events = POLLOUT;
    } else {
      if (!s->read_eof && s->send_credit > 0) events |= POLLIN;
      if (!s->to_socket.empty() || (s->peer_eof && !s->write_shut)) events |= POLLOUT;
    }
    if (events == 0) continue;
    fds.push_back({s->sock.get(), events, 0});
    ids.push_back(id);
  }
}

void PortRelay::onReady(uint32_t id, short revents) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  Stream& s = *it->second;
  if (s.connecting) {
    finishConnect(s);
    return;
  }
  if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0 && !s.read_eof && s.send_credit > 0) {
    readSocket(s);
    if (streams_.count(id) == 0) return;
  }
  if ((revents & (POLLOUT | POLLHUP | POLLERR)) != 0 &&
      (!s.to_socket.empty() || (s.peer_eof && !s.write_shut)))
    writeSocket(s);
}

void PortRelay::readSocket(Stream& s) {
  size_t want = std::min<size_t>(s.send_credit, proto::kMaxChunk);
  ssize_t n = ::read(s.sock.get(), buf_.get(), want);
  if (n < 0) {
    if (errno == EINTR || errno == EAGAIN) return;
    end(s.id, errno);
    return;
  }
  proto::PortData d;
  if (n == 0) {
    d.eof = true;
    s.read_eof = true;
    sendMsg(s.id, d);
    maybeFinish(s.id);
    return;
  }
  s.send_credit -= static_cast<uint32_t>(n);
  d.data.assign(buf_.get(), static_cast<size_t>(n));
  sendMsg(s.id, d);
}

void PortRelay::writeSocket(Stream& s) {
  size_t written = 0;
  while (written < s.to_socket.size()) {
    ssize_t n = ::send(s.sock.get(), s.to_socket.data() + written, s.to_socket.size() - written,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      written += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    end(s.id, n < 0 ? errno : EIO);
    return;
  }
  if (written > 0) {
    s.to_socket.erase(0, written);
    // Credit in pieces no larger than the window (the decoder's bound), returned as the bytes
    // leave the agent, so the supervisor's next bytes always fit.
    proto::PortCredit c;
    c.bytes = static_cast<uint32_t>(written);
    sendMsg(s.id, c);
  }
  if (s.to_socket.empty() && s.peer_eof && !s.write_shut) {
    ::shutdown(s.sock.get(), SHUT_WR);
    s.write_shut = true;
    maybeFinish(s.id);
  }
}

void PortRelay::maybeFinish(uint32_t id) {
  auto it = streams_.find(id);
  if (it != streams_.end() && it->second->read_eof && it->second->write_shut) end(id, 0);
}

void PortRelay::end(uint32_t id, int errnum) {
  if (streams_.erase(id) == 0) return;
  proto::PortClose c;
  c.errnum = errnum;
  sendMsg(id, c);
}

}  // namespace airlock::agent
