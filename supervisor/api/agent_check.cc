#include "supervisor/api/agent_check.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "supervisor/api/listeners.h"

namespace airlock::api {

Result<std::unique_ptr<AgentCheckListener>> AgentCheckListener::start(
    const std::string& address, std::function<std::string()> line) {
  // Any address: what it answers is a weight, nothing a token or TLS would protect.
  auto listener = listenTcp(address, /*any_address=*/true);
  if (!listener) return Unexpected(std::move(listener.error()).wrap("agent-check listener"));
  std::unique_ptr<AgentCheckListener> a(new AgentCheckListener());
  a->listen_fd_ = std::move(listener->fd);
  a->port_ = listener->port;
  a->stop_fd_ = UniqueFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!a->stop_fd_) return sysError("eventfd", "agent-check listener");
  a->line_ = std::move(line);
  a->thread_ = std::thread([p = a.get()] { p->run(); });
  return a;
}

AgentCheckListener::~AgentCheckListener() {
  uint64_t one = 1;
  if (write(stop_fd_.get(), &one, sizeof one) < 0) {
    // An eventfd write fails only when its counter would overflow: the thread is told already.
  }
  if (thread_.joinable()) thread_.join();
}

void AgentCheckListener::run() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_.get(), POLLIN, 0}, {stop_fd_.get(), POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    UniqueFd conn(accept4(listen_fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!conn) continue;  // the peer went away first, or descriptors ran out: the next poll
    // One short line into an empty socket buffer: it fits at once, never blocks this thread.
    const std::string text = line_();
    (void)send(conn.get(), text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(conn.get(), SHUT_WR);
  }
}

}  // namespace airlock::api
