#include "supervisor/mcp/stdio_transport.h"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstring>
#include <string_view>

#include "airlock/unique_fd.h"

namespace airlock::mcp {

namespace {

Result<> writeLine(int fd, std::string line) {
  line += '\n';
  std::string_view rest = line;
  while (!rest.empty()) {
    ssize_t n = ::write(fd, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sysError("write", "stdout");
    rest.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

}  // namespace

Result<std::string> serveStdio(McpServer& server, int in_fd, int out_fd) {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&stop_signals, s);
  if (sigprocmask(SIG_BLOCK, &stop_signals, nullptr) != 0) return sysError("sigprocmask");
  // A host that closed our stdout makes write() fail with EPIPE instead of killing us before the
  // sandboxes are ended.
  signal(SIGPIPE, SIG_IGN);
  UniqueFd sfd(signalfd(-1, &stop_signals, SFD_CLOEXEC));
  if (!sfd) return sysError("signalfd");

  std::string pending;
  bool discarding = false;  // inside a line longer than kMaxMessageBytes
  char buf[64 * 1024];
  for (;;) {
    pollfd fds[2] = {{in_fd, POLLIN, 0}, {sfd.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return sysError("poll", "stdin");
    }
    if (fds[1].revents & POLLIN) {
      signalfd_siginfo info{};
      if (::read(sfd.get(), &info, sizeof info) == sizeof info)
        return std::string(sigabbrev_np(static_cast<int>(info.ssi_signo)) != nullptr
                               ? std::string("SIG") + sigabbrev_np(static_cast<int>(info.ssi_signo))
                               : "a signal");
    }
    if (fds[0].revents == 0) continue;
    ssize_t n = ::read(in_fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return sysError("read", "stdin");
    if (n == 0) {
      // A last message without its newline still counts.
      if (!discarding && !pending.empty())
        if (auto answer = server.handleLine(pending))
          if (auto w = writeLine(out_fd, *answer); !w) return Unexpected(w.error());
      return std::string("end of input");
    }
    std::string_view chunk(buf, static_cast<size_t>(n));
    while (!chunk.empty()) {
      size_t nl = chunk.find('\n');
      std::string_view piece = chunk.substr(0, nl);
      if (!discarding) {
        if (pending.size() + piece.size() > kMaxMessageBytes) {
          discarding = true;
          pending.clear();
        } else {
          pending.append(piece);
        }
      }
      if (nl == std::string_view::npos) break;
      chunk.remove_prefix(nl + 1);
      std::optional<std::string> answer =
          discarding
              ? std::optional<std::string>(JsonRpcDispatcher::oversizedMessage(kMaxMessageBytes))
              : server.handleLine(pending);
      pending.clear();
      discarding = false;
      if (answer)
        if (auto w = writeLine(out_fd, *answer); !w) return Unexpected(w.error());
    }
  }
}

}  // namespace airlock::mcp
