#include "supervisor/sandbox/agent/connection.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <vector>

namespace airlock::sandbox {

namespace proto = airlock::protocol;

namespace {

constexpr int kWriteTimeoutMs = 10000;
// Marks the synthetic error frame of a failed channel; real frames always carry flags 0.
constexpr uint16_t kChannelFailureFlag = 0x8000;

// The connection whose handlers this thread is running right now (with its mu_ held). A handler
// may drop the last reference to the object that owns it (a Command whose client went away), and
// that destructor closes its request: the close must neither lock mu_ again on this thread nor
// erase the handler that is still running.
thread_local const AgentConnection* t_dispatching = nullptr;

class Dispatching {
 public:
  explicit Dispatching(const AgentConnection* conn) : saved_(t_dispatching) {
    t_dispatching = conn;
  }
  ~Dispatching() { t_dispatching = saved_; }
  Dispatching(const Dispatching&) = delete;
  Dispatching& operator=(const Dispatching&) = delete;

 private:
  const AgentConnection* saved_;
};

}  // namespace

bool isChannelFailure(const proto::FrameHeader& h) { return (h.flags & kChannelFailureFlag) != 0; }

AgentConnection::AgentConnection(ChannelHub& hub, int fd, std::string sandbox_id)
    : hub_(hub), fd_(fd), sandbox_id_(std::move(sandbox_id)) {}

AgentConnection::~AgentConnection() = default;

void AgentConnection::continueAfter(uint32_t last_request_id) {
  std::lock_guard lock(mu_);
  if (last_request_id >= next_id_) next_id_ = last_request_id + 1;
  if (next_id_ == 0) next_id_ = 1;
}

void AgentConnection::openAt(uint32_t id, FrameHandler handler) {
  std::lock_guard lock(mu_);
  handlers_[id] = std::move(handler);
}

uint32_t AgentConnection::open(FrameHandler handler) {
  std::lock_guard lock(mu_);
  uint32_t id = next_id_++;
  if (next_id_ == 0) next_id_ = 1;  // 0 is the agent's Hello
  if (closed_) {
    // Answer at once so the caller's wait ends instead of waiting for frames that never come.
    proto::FrameHeader h{0, proto::MsgType::kError, kChannelFailureFlag, id};
    std::string frame;
    proto::encode(frame, id, proto::ErrorMsg{EPIPE, "channel", "the sandbox's agent is gone"});
    Dispatching scope(this);
    handler(h, std::string_view(frame).substr(proto::kHeaderSize));
    closed_while_dispatching_.clear();  // the handler was never registered
    return id;
  }
  handlers_.emplace(id, std::move(handler));
  return id;
}

void AgentConnection::close(uint32_t id) {
  if (t_dispatching == this) {  // from inside a handler: mu_ is ours already
    closed_while_dispatching_.push_back(id);
    return;
  }
  std::lock_guard lock(mu_);
  handlers_.erase(id);
}

// Called with mu_ held, after a handler returned.
void AgentConnection::eraseClosedWhileDispatching() {
  for (uint32_t id : closed_while_dispatching_) handlers_.erase(id);
  closed_while_dispatching_.clear();
}

Result<> AgentConnection::send(const std::string& frame) {
  std::lock_guard lock(write_mu_);
  size_t off = 0;
  while (off < frame.size()) {
    if (closed_) return fail("agent channel closed", sandbox_id_);
    ssize_t n = ::send(fd_, frame.data() + off, frame.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN) return sysError("write to agent", sandbox_id_);
    // The agent drains its channel while it writes, so a full buffer clears quickly; one that
    // stays full means the agent is wedged.
    pollfd p{fd_, POLLOUT, 0};
    int r = poll(&p, 1, kWriteTimeoutMs);
    if (r == 0) return fail("agent not reading its channel for 10 s", sandbox_id_);
    if (r < 0 && errno != EINTR) return sysError("poll agent channel", sandbox_id_);
  }
  return {};
}

void AgentConnection::onReadable() {
  char buf[64 * 1024];
  for (;;) {
    ssize_t n = read(fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n <= 0) {
      failAll(n == 0 ? "the sandbox's agent closed its channel"
                     : "read from agent: " + std::string(Error::errnoName(errno)));
      return;
    }
    reader_.feed(std::string_view(buf, static_cast<size_t>(n)));
    for (;;) {
      auto next = reader_.next();
      if (!next) {
        failAll("agent broke the protocol: " + next.error().message());
        return;
      }
      if (!*next) break;
      auto& [header, payload] = **next;
      std::lock_guard lock(mu_);
      auto it = handlers_.find(header.request_id);
      if (it == handlers_.end()) continue;  // a request already closed: late frames are normal
      bool finished;
      {
        Dispatching scope(this);
        finished = it->second(header, payload);
      }
      if (finished) handlers_.erase(it);
      eraseClosedWhileDispatching();
    }
    if (static_cast<size_t>(n) < sizeof buf) break;
  }
}

void AgentConnection::failAll(const std::string& why) {
  closed_ = true;
  std::map<uint32_t, FrameHandler> handlers;
  {
    std::lock_guard lock(mu_);
    handlers.swap(handlers_);
    Dispatching scope(this);
    for (auto& [id, handler] : handlers) {
      std::string frame;
      proto::encode(frame, id, proto::ErrorMsg{EPIPE, "channel", why});
      proto::FrameHeader h{static_cast<uint32_t>(frame.size() - proto::kHeaderSize),
                           proto::MsgType::kError, kChannelFailureFlag, id};
      handler(h, std::string_view(frame).substr(proto::kHeaderSize));
    }
    eraseClosedWhileDispatching();
  }
}

Result<std::unique_ptr<ChannelHub>> ChannelHub::start(Mode mode) {
  std::unique_ptr<ChannelHub> hub(new ChannelHub(mode));
  hub->epoll_ = UniqueFd(epoll_create1(EPOLL_CLOEXEC));
  if (!hub->epoll_) return sysError("epoll_create1", "agent channels");
  if (mode == Mode::kInline) return hub;  // no thread to wake
  hub->wake_ = UniqueFd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!hub->wake_) return sysError("eventfd", "agent channels");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = hub->wake_.get();
  if (epoll_ctl(hub->epoll_.get(), EPOLL_CTL_ADD, hub->wake_.get(), &ev) != 0)
    return sysError("epoll_ctl(ADD)", "eventfd");
  hub->thread_ = std::thread([h = hub.get()] { h->loop(); });
  return hub;
}

ChannelHub::~ChannelHub() {
  stop_ = true;
  if (!thread_.joinable()) return;
  uint64_t one = 1;
  [[maybe_unused]] auto r = write(wake_.get(), &one, sizeof one);
  thread_.join();
}

Result<> ChannelHub::watch(int fd, std::function<bool()> on_readable) {
  {
    std::lock_guard lock(mu_);
    watched_[fd] = std::move(on_readable);
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
    std::lock_guard lock(mu_);
    watched_.erase(fd);
    return sysError("epoll_ctl(ADD)", "fd " + std::to_string(fd));
  }
  return {};
}

void ChannelHub::unwatch(int fd) {
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  std::lock_guard dispatch(dispatch_mu_);  // a callback in progress finishes first
  std::lock_guard lock(mu_);
  watched_.erase(fd);
}

Result<std::shared_ptr<AgentConnection>> ChannelHub::attach(int fd, const std::string& sandbox_id) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0)
    return sysError("fcntl(O_NONBLOCK)", "agent channel of " + sandbox_id);
  auto conn = std::make_shared<AgentConnection>(*this, fd, sandbox_id);
  {
    std::lock_guard lock(mu_);
    conns_[fd] = conn;
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = fd;
  if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
    std::lock_guard lock(mu_);
    conns_.erase(fd);
    return sysError("epoll_ctl(ADD)", "agent channel of " + sandbox_id);
  }
  return conn;
}

void ChannelHub::detach(const std::shared_ptr<AgentConnection>& conn) {
  epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, conn->fd(), nullptr);
  {
    // Waits for a dispatch in progress, so no handler of conn runs after we return.
    std::lock_guard dispatch(dispatch_mu_);
    std::lock_guard lock(mu_);
    conns_.erase(conn->fd());
  }
  conn->failAll("sandbox stopped");
}

void ChannelHub::failAll(const std::string& why) {
  std::vector<std::shared_ptr<AgentConnection>> conns;
  {
    std::lock_guard lock(mu_);
    for (auto& [fd, conn] : conns_) conns.push_back(conn);
  }
  for (auto& conn : conns) conn->failAll(why);
}

void ChannelHub::loop() {
  std::vector<epoll_event> events(64);
  while (!stop_) {
    int n = epoll_wait(epoll_.get(), events.data(), static_cast<int>(events.size()), -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // EBADF etc.: a bug; the supervisor notices channels going silent
    }
    dispatch(events.data(), n);
  }
}

void ChannelHub::pump(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  // Whole milliseconds, rounded up, in slices of at most a minute (a far deadline is repeated).
  int timeout =
      left.count() <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left.count() + 1, 60'000));
  epoll_event events[16];
  int n = epoll_wait(epoll_.get(), events, 16, timeout);
  if (n > 0) dispatch(events, n);
}

void ChannelHub::dispatch(const epoll_event* events, int n) {
  for (int i = 0; i < n; ++i) {
    int fd = events[i].data.fd;
    if (fd == wake_.get()) continue;
    std::lock_guard dispatch(dispatch_mu_);
    std::shared_ptr<AgentConnection> conn;
    std::function<bool()> watcher;
    {
      std::lock_guard lock(mu_);
      if (auto it = conns_.find(fd); it != conns_.end()) {
        conn = it->second;
      } else if (auto w = watched_.find(fd); w != watched_.end()) {
        watcher = w->second;
      }
    }
    if (watcher) {
      if (!watcher()) {  // done with it: no more calls
        epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
        std::lock_guard lock(mu_);
        watched_.erase(fd);
      }
      continue;
    }
    if (conn == nullptr || conn->closed()) continue;
    conn->onReadable();
    if (conn->closed()) epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  }
}

std::shared_ptr<Mailbox> AgentConnection::mailbox() {
  return std::make_shared<Mailbox>(hub_.isInline() ? &hub_ : nullptr);
}

FrameHandler Mailbox::handler(std::function<bool(const proto::FrameHeader&)> is_last) {
  return
      [this, is_last = std::move(is_last)](const proto::FrameHeader& h, std::string_view payload) {
        {
          std::lock_guard lock(mu_);
          frames_.push_back(Frame{h, std::string(payload)});
        }
        cv_.notify_one();
        return isChannelFailure(h) || is_last(h);
      };
}

std::optional<Mailbox::Frame> Mailbox::pop(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mu_);
  if (hub_ != nullptr) {
    // Inline hub: this thread is the only reader, so it reads until a frame of ours arrives.
    while (frames_.empty()) {
      if (Clock::now() >= deadline) return std::nullopt;
      lock.unlock();
      hub_->pump(deadline);
      lock.lock();
    }
  } else if (!cv_.wait_until(lock, deadline, [&] { return !frames_.empty(); })) {
    return std::nullopt;
  }
  Frame f = std::move(frames_.front());
  frames_.pop_front();
  return f;
}

}  // namespace airlock::sandbox
