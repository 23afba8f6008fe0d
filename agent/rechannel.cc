#include "rechannel.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace airlock::agent {
namespace {

constexpr char kName[] = "airlock-agent.rechannel";  // abstract: sun_path[0] is '\0'
constexpr char kHello = 'A', kChannel = 'C', kTaken = 'T';
// The helper may start before the agent noticed its supervisor died and began listening.
constexpr auto kConnectFor = std::chrono::seconds(5);
// Each side's wait for the other's next message: short, since the agent waits in its loop.
constexpr int kStepTimeoutMs = 1000;

socklen_t address(sockaddr_un& addr) {
  std::memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path + 1, kName, sizeof kName - 1);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + sizeof kName - 1);
}

// SO_PEERCRED cannot tell who is at the other end: gVisor (2022-12) answers it with the
// caller's own credentials. Credentials a process sends (SCM_CREDENTIALS) are checked by the
// kernel instead: only root may claim another process's, or uid 0.
void sendWithCredentials(int fd, char byte, int pass_fd) {
  ucred self{::getpid(), ::geteuid(), ::getegid()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred)) + CMSG_SPACE(sizeof(int))] = {};
  iovec iov{&byte, 1};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = CMSG_SPACE(sizeof(ucred)) + (pass_fd >= 0 ? CMSG_SPACE(sizeof(int)) : 0);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_CREDENTIALS;
  c->cmsg_len = CMSG_LEN(sizeof(ucred));
  std::memcpy(CMSG_DATA(c), &self, sizeof self);
  if (pass_fd >= 0) {
    c = CMSG_NXTHDR(&msg, c);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &pass_fd, sizeof pass_fd);
  }
  (void)::sendmsg(fd, &msg, MSG_NOSIGNAL);
}

struct Received {
  char byte = 0;
  bool has_credentials = false;
  ucred credentials{};
  UniqueFd passed;  // the first fd received; any others are closed
};

// One message, within kStepTimeoutMs: its byte, the sender's credentials, the fd it passed.
Result<Received> receive(int fd) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, kStepTimeoutMs) != 1) return fail("nothing came in time");
  Received r;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred)) + CMSG_SPACE(4 * sizeof(int))];
  iovec iov{&r.byte, 1};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  for (cmsghdr* c = n > 0 ? CMSG_FIRSTHDR(&msg) : nullptr; c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET) continue;
    if (c->cmsg_type == SCM_CREDENTIALS && c->cmsg_len == CMSG_LEN(sizeof(ucred))) {
      std::memcpy(&r.credentials, CMSG_DATA(c), sizeof(ucred));
      r.has_credentials = true;
    } else if (c->cmsg_type == SCM_RIGHTS) {
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int got;
        std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
        if (!r.passed)
          r.passed.reset(got);
        else
          ::close(got);
      }
    }
  }
  if (n != 1) return n == 0 ? fail("the other side closed") : sysError("recvmsg", "rechannel");
  if ((msg.msg_flags & MSG_CTRUNC) != 0) return fail("a message with more than it may carry");
  return r;
}

void say(const char* text) { (void)!::write(2, text, std::strlen(text)); }

}  // namespace

Result<UniqueFd> listenForRechannel() {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return sysError("socket", "rechannel listener");
  sockaddr_un addr;
  socklen_t len = address(addr);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0)
    return sysError("bind", "rechannel listener");
  if (::listen(fd.get(), 4) != 0) return sysError("listen", "rechannel listener");
  return fd;
}

Result<UniqueFd> takeChannel(int listener) {
  UniqueFd conn(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
  if (!conn) return sysError("accept", "rechannel listener");
  int on = 1;
  if (::setsockopt(conn.get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0)
    return sysError("setsockopt(SO_PASSCRED)", "rechannel helper");
  sendWithCredentials(conn.get(), kHello, -1);
  auto got = receive(conn.get());
  if (!got) return Unexpected(std::move(got.error()).wrap("rechannel helper"));
  if (!got->has_credentials || got->credentials.uid != 0)
    return fail("a process that is not root offered a channel; refused");
  if (got->byte != kChannel || !got->passed) return fail("the helper's message carried no channel");
  if (::fcntl(got->passed.get(), F_SETFL, ::fcntl(got->passed.get(), F_GETFL) | O_NONBLOCK) != 0)
    return sysError("fcntl", "new channel");
  (void)::send(conn.get(), &kTaken, 1, MSG_NOSIGNAL);
  return std::move(got->passed);
}

int rechannelMain(int argc, char** argv) {
  long agent_pid = 1;
  bool usable = argc == 2;
  if (argc == 4 && std::strcmp(argv[2], "--agent-pid") == 0) {
    char* end = nullptr;
    agent_pid = std::strtol(argv[3], &end, 10);
    usable = end != argv[3] && *end == '\0' && agent_pid > 0;
  }
  if (!usable) {
    say("usage: airlock-agent --rechannel [--agent-pid N]  (N: a positive pid)\n");
    return 2;
  }
  sockaddr_un addr;
  socklen_t len = address(addr);
  const auto deadline = std::chrono::steady_clock::now() + kConnectFor;
  UniqueFd fd;
  for (;;) {
    fd = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    int on = 1;
    if (!fd || ::setsockopt(fd.get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0) return 1;
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      say("airlock-agent --rechannel: no agent is waiting for a channel\n");
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // The listener must be the agent itself, root and the process the caller named, before it
  // gets anything. (The agent holds the name from its start, so nothing else should.)
  auto hello = receive(fd.get());
  if (!hello || hello->byte != kHello || !hello->has_credentials || hello->credentials.uid != 0 ||
      hello->credentials.pid != agent_pid) {
    say("airlock-agent --rechannel: the listener is not a waiting agent; nothing handed over\n");
    return 1;
  }
  sendWithCredentials(fd.get(), kChannel, 0);
  auto reply = receive(fd.get());
  if (!reply || reply->byte != kTaken) {
    say("airlock-agent --rechannel: the agent did not take the channel\n");
    return 1;
  }
  return 0;
}

}  // namespace airlock::agent
