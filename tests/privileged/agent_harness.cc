#include "agent_harness.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "airlock/protocol/channel.h"
#include "test_support.h"

namespace airlock::agent::testing {

namespace proto = airlock::protocol;

AgentProcess::AgentProcess(const std::vector<std::string>& wrapper,
                           const std::vector<std::string>& agent_args) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    ADD_FAILURE() << "socketpair: " << strerror(errno);
    return;
  }
  sock_.reset(sv[0]);
  // Move the agent's end above 3 so dup2 onto 3 always makes a fresh, inheritable fd.
  int theirs = fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
  close(sv[1]);
  std::vector<std::string> args = wrapper;
  args.push_back(::airlock::testing::agentBinary());
  args.insert(args.end(), agent_args.begin(), agent_args.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_ = fork();
  if (pid_ == 0) {
    dup2(theirs, 3);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(theirs);
  if (pid_ < 0) {
    ADD_FAILURE() << "fork: " << strerror(errno);
    return;
  }
  auto f = next(10000);
  if (!f) return;
  EXPECT_EQ(f->first.type, proto::MsgType::kHello);
  EXPECT_EQ(f->first.request_id, 0u);
  auto h = proto::decodeHello(f->second);
  EXPECT_TRUE(h) << h.error().message();
  if (h) hello_ = *h;
}

AgentProcess::~AgentProcess() {
  if (pid_ > 0) closeAndWait();
}

proto::Configure AgentProcess::defaultConfigure() {
  proto::Configure c;
  c.uid = getuid();
  c.gid = getgid();
  c.landlock = true;
  c.writable_paths = {"/tmp"};
  return c;
}

Frame AgentProcess::configure(const proto::Configure& c, uint32_t id) {
  send(id, c);
  auto f = nextFor(id);
  if (!f) return {};
  return *f;
}

void AgentProcess::useChannel(UniqueFd channel) {
  sock_ = std::move(channel);
  reader_ = proto::FrameReader();
  backlog_.clear();
}

bool AgentProcess::quietFor(int ms) {
  if (!backlog_.empty()) return false;
  pollfd p{sock_.get(), POLLIN, 0};
  return ::poll(&p, 1, ms) == 0;
}

void AgentProcess::sendRaw(const std::string& bytes) {
  auto r = proto::writeFrame(sock_.get(), bytes);
  EXPECT_TRUE(r) << r.error().message();
}

std::optional<Frame> AgentProcess::next(int timeout_ms) {
  if (!backlog_.empty()) {
    Frame f = std::move(backlog_.front());
    backlog_.pop_front();
    return f;
  }
  auto f = proto::readFrame(sock_.get(), reader_, timeout_ms);
  if (!f) {
    ADD_FAILURE() << "reading from the agent: " << f.error().message();
    return std::nullopt;
  }
  return std::move(*f);
}

std::optional<Frame> AgentProcess::nextFor(uint32_t id, int timeout_ms) {
  for (auto it = backlog_.begin(); it != backlog_.end(); ++it) {
    if (it->first.request_id == id) {
      Frame f = std::move(*it);
      backlog_.erase(it);
      return f;
    }
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    deadline - std::chrono::steady_clock::now())
                                    .count());
    auto f = proto::readFrame(sock_.get(), reader_, std::max(left, 0));
    if (!f) {
      ADD_FAILURE() << "waiting for request " << id << ": " << f.error().message();
      return std::nullopt;
    }
    if (f->first.request_id == id) return std::move(*f);
    backlog_.push_back(std::move(*f));
  }
}

ExecResult AgentProcess::run(uint32_t id, const proto::Exec& e, int timeout_ms) {
  send(id, e);
  return collect(id, timeout_ms);
}

ExecResult AgentProcess::collect(uint32_t id, int timeout_ms) {
  ExecResult r;
  while (!r.exited) {
    auto f = nextFor(id, timeout_ms);
    if (!f) break;
    r.order.push_back(f->first.type);
    switch (f->first.type) {
      case proto::MsgType::kStarted: {
        auto st = proto::decodeStarted(f->second);
        EXPECT_TRUE(st) << st.error().message();
        EXPECT_FALSE(r.started_pid) << "a second Started for exec " << id;
        if (st) r.started_pid = st->pid;
        break;
      }
      case proto::MsgType::kOutput: {
        auto o = proto::decodeOutput(f->second);
        EXPECT_TRUE(o) << o.error().message();
        if (!o) break;
        EXPECT_LE(o->data.size(), proto::kMaxChunk);
        if (!r.started_pid) r.started_after_output = true;
        std::string& to = o->stream == proto::Stream::kStdout   ? r.out
                          : o->stream == proto::Stream::kStderr ? r.err
                                                                : r.control;
        to += o->data;
        break;
      }
      case proto::MsgType::kError: {
        auto m = proto::decodeError(f->second);
        EXPECT_TRUE(m) << m.error().message();
        if (m) r.errors.push_back(*m);
        break;
      }
      case proto::MsgType::kExited: {
        auto x = proto::decodeExited(f->second);
        EXPECT_TRUE(x) << x.error().message();
        if (x) r.exited = *x;
        break;
      }
      default:
        ADD_FAILURE() << "unexpected " << proto::msgTypeName(f->first.type) << " for exec " << id;
    }
  }
  // Anything already buffered for this id after Exited breaks the ordering guarantee.
  for (const auto& f : backlog_)
    if (f.first.request_id == id && f.first.type == proto::MsgType::kOutput)
      r.output_after_exit = true;
  return r;
}

std::optional<proto::Output> AgentProcess::nextOutput(uint32_t id, int timeout_ms) {
  for (;;) {
    auto f = nextFor(id, timeout_ms);
    if (!f) return std::nullopt;
    if (f->first.type == proto::MsgType::kStarted) continue;
    if (f->first.type != proto::MsgType::kOutput) {
      ADD_FAILURE() << "expected Output for exec " << id << ", got "
                    << proto::msgTypeName(f->first.type);
      return std::nullopt;
    }
    auto o = proto::decodeOutput(f->second);
    EXPECT_TRUE(o) << o.error().message();
    if (!o) return std::nullopt;
    return *o;
  }
}

int AgentProcess::waitExit(int timeout_ms) {
  if (pid_ <= 0) return -1;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
      ADD_FAILURE() << "airlock-agent did not exit within " << timeout_ms << " ms";
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

int AgentProcess::closeAndWait(int timeout_ms) {
  sock_.reset();
  return waitExit(timeout_ms);
}

proto::Exec shell(const std::string& script) {
  proto::Exec e;
  e.argv = {"/bin/sh", "-c", script};
  e.env = {"PATH=/usr/local/bin:/usr/bin:/bin"};
  e.cwd = "/";
  return e;
}

bool processGone(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

std::string procStatusField(const std::string& status, const std::string& key) {
  size_t at = status.find("\n" + key + ":");
  if (at == std::string::npos) return "";
  at += key.size() + 2;
  size_t end = status.find('\n', at);
  std::string v = status.substr(at, end - at);
  size_t b = v.find_first_not_of(" \t");
  return b == std::string::npos ? "" : v.substr(b);
}

}  // namespace airlock::agent::testing
