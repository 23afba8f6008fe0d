#include "agent.h"

#include <fcntl.h>
#include <grp.h>
#include <linux/filter.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "airlock/protocol/channel.h"
#include "airlock/protocol/messages.h"
#include "caps.h"
#include "child.h"
#include "file_ops.h"
#include "landlock.h"
#include "port_relay.h"
#include "procs.h"
#include "rechannel.h"
#include "startup.h"

#ifndef AIRLOCK_VERSION
#define AIRLOCK_VERSION "0.0.0"
#endif

namespace airlock::agent {
namespace {

namespace proto = airlock::protocol;

constexpr size_t kMaxExecutions = 64;
constexpr size_t kMaxStdinBuffer = 4 << 20;  // per execution, not yet taken by the child
constexpr int64_t kDrainMs = 2000;           // after the main process exits, for pipes to close
constexpr int kShutdownReapMs = 5000;
// Frames read from the supervisor while a send waits, not yet handled.
constexpr size_t kMaxInbound = 16u << 20;

// The kernel's count of OOM kills since boot (/proc/vmstat oom_kill); 0 when unreadable.
uint64_t kernelOomKills() {
  UniqueFd fd(::open("/proc/vmstat", O_RDONLY | O_CLOEXEC));
  if (!fd) return 0;
  char buf[16384];
  size_t len = 0;
  for (ssize_t n;
       len < sizeof buf - 1 && (n = ::read(fd.get(), buf + len, sizeof buf - 1 - len)) > 0;)
    len += static_cast<size_t>(n);  // a seq_file returns a page per read
  buf[len] = '\0';
  const char* at = std::strstr(buf, "\noom_kill ");
  return at != nullptr ? std::strtoull(at + 10, nullptr, 10) : 0;
}

uint64_t monotonicUs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
}

uint64_t timevalUs(const timeval& tv) {
  return static_cast<uint64_t>(tv.tv_sec) * 1000000u + static_cast<uint64_t>(tv.tv_usec);
}

bool armTimer(int fd, int64_t ms) {
  itimerspec its{};
  its.it_value.tv_sec = ms / 1000;
  its.it_value.tv_nsec = (ms % 1000) * 1000000;
  if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) its.it_value.tv_nsec = 1;
  return ::timerfd_settime(fd, 0, &its, nullptr) == 0;
}

bool setNonBlocking(int fd) {
  int fl = ::fcntl(fd, F_GETFL);
  return fl >= 0 && ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0;
}

// Everything Configure decided, in the form the forked child consumes.
struct Confinement {
  uid_t uid = 0;
  gid_t gid = 0;
  uint64_t keep_caps = 0;
  std::vector<sock_filter> filter;
  sock_fprog prog{};
  std::vector<ChildRlimit> rlimits;
  LandlockRuleset landlock;
  bool change_ids = false;
  bool drop_groups = false;
  bool drop_bounding_set = false;
  int last_cap = 0;
};

struct Execution {
  uint32_t id = 0;
  pid_t pid = -1;
  std::vector<std::string> argv, env;
  std::string cwd;
  std::vector<char*> argv_ptrs, env_ptrs;
  ChildSpec spec;

  UniqueFd out, err, in, sync, timer, ctl;
  proto::ExecKillScope scope = proto::ExecKillScope::kAll;
  bool control_pipe = false;  // a language session driver (a code context), not a command
  bool started_sent = false;
  bool stdin_requested = false;
  bool stdin_eof = false;
  std::string stdin_buf;

  uint64_t out_cap = 0, err_cap = 0;
  uint64_t out_bytes = 0, err_bytes = 0, out_sent = 0, err_sent = 0;
  bool out_truncated = false, err_truncated = false;
  uint64_t ctl_bytes = 0, ctl_sent = 0;
  bool ctl_truncated = false;

  uint64_t start_us = 0, end_us = 0;
  uint64_t oom_kills_at_start = 0;  // the own kernel's count (Options::own_kernel)
  bool main_exited = false;
  int status = 0;
  rusage usage{};
  bool timed_out = false;
  bool exec_failed = false;
  int exec_errno = 0;
  std::string note;  // the supervisor's description of it (Exec.note, Note), for the next one
  // A session driver's frames sent since its last note (kMaxReplayBytes at most, oldest dropped
  // first and counted): a supervisor that dies before its note says a run ended may have read
  // the run's end, and the next one must see it too, so they are sent again (detach()).
  std::deque<std::string> since_note;
  size_t since_note_bytes = 0;
  uint64_t since_note_dropped = 0;
};

// What the agent tells a supervisor it understands (Hello, Reattached). A build for tests can
// be an agent as built before session keeping (AIRLOCK_AGENT_BEFORE_KEEP_SESSIONS): features 0,
// Note and Resume unknown, and a Reattach always ends the executions. A supervisor upgraded
// while such an agent runs must cope with it (tests/e2e/session_survival_test.cc).
#ifdef AIRLOCK_AGENT_BEFORE_KEEP_SESSIONS
constexpr uint32_t kFeatures = 0;
#else
constexpr uint32_t kFeatures = proto::kAgentFeatures;
#endif

// How often a detached agent whose channel is a VM's port looks whether its host reopened it.
constexpr int kHostCheckMs = 20;

// Per session driver; a run's end (its "done" line) is last, so it is never what is dropped.
constexpr size_t kMaxReplayBytes = 2u << 20;

class Agent {
 public:
  Agent(int in, int out, const Options& options, UniqueFd sigfd)
      : in_(in),
        out_(out),
        reattach_grace_ms_(options.reattach_grace_ms),
        reattach_by_helper_(options.reattach_by_helper),
        reattach_in_place_(options.reattach_in_place),
        own_kernel_(options.own_kernel),
        sigfd_(std::move(sigfd)),
        iobuf_(std::make_unique_for_overwrite<char[]>(proto::kMaxChunk)),
        ctlbuf_(std::make_unique_for_overwrite<char[]>(proto::kMaxChunk)) {}

  int serve();

 private:
  enum class Slot {
    kChannel,
    kSignal,
    kStdout,
    kStderr,
    kStdin,
    kSync,
    kTimer,
    kControl,
    kPort,
    kRechannel
  };

  template <typename M>
  bool send(uint32_t id, const M& m) {
    std::string frame;
    proto::encode(frame, id, m);
    return sendRaw(frame);
  }
  bool sendRaw(const std::string& frame);
  void sendError(uint32_t id, int errnum, const std::string& stage, const std::string& message);

  void pullChannel();
  void processFrames();
  void handleFrame(const proto::FrameHeader& h, const std::string& payload);
  void handleConfigure(uint32_t id, const std::string& payload);
  // With a kernel of its own (a VM), the workspace may be a disk whose writes sit in that
  // kernel's cache, lost if the VM is killed: flush them before an execution's end or a file
  // change is reported, so what the caller was told is done survives the sandbox.
  void persistWorkspace();
  void handleExec(uint32_t id, const std::string& payload);
  void handleStdin(uint32_t id, const std::string& payload);
  void handleSignal(uint32_t id, const std::string& payload);
  void handleFileWrite(uint32_t id, const std::string& payload);
  void handleFileRead(uint32_t id, const std::string& payload);
  void handleFileList(uint32_t id, const std::string& payload);
  void handleFileStat(uint32_t id, const std::string& payload);
  void handleFileMkdir(uint32_t id, const std::string& payload);
  void handleFileRemove(uint32_t id, const std::string& payload);
  void handleFileRename(uint32_t id, const std::string& payload);
  void sendFileError(uint32_t id, const Error& err, int fallback, const char* stage);

  Execution* find(uint32_t id) {
    auto it = execs_.find(id);
    return it == execs_.end() ? nullptr : it->second.get();
  }
  void startFailed(Execution& e, int errnum, const std::string& stage, const std::string& msg);
  void readSignals();
  void reapChildren();
  void killExecution(Execution& e, int sig);
  void readOutput(Execution& e, proto::Stream stream);
  void forward(Execution& e, proto::Stream stream, const char* data, size_t n);
  void readControl(Execution& e);
  void drainReady(Execution& e);
  void ensureStarted(Execution& e);
  void flushStdin(Execution& e);
  void readSync(Execution& e);
  void onTimer(Execution& e);
  void tryFinish(uint32_t id, bool force);
  void shutdownAll();
  void handleReattach(uint32_t id, const std::string& payload);
  void handleNote(uint32_t id, const std::string& payload);
  void setNote(Execution& e, std::string note);
  void handleResume(uint32_t id);

  // The supervisor is gone. With a reattach grace, executions keep running and their frames are
  // held (hold()) until the next supervisor resumes them; otherwise the sandbox ends.
  void channelLost();
  bool detach();
  bool detachForHelper();
  void takeHelperChannel();
  bool detachInPlace();
  void checkHostBack();
  bool holds(const std::string& frame) const;
  bool hold(const std::string& frame);
  bool writeNow(const std::string& frame);
  void keepForReplay(const std::string& frame);

  int in_, out_;
  int reattach_grace_ms_;
  bool reattach_by_helper_;
  bool reattach_in_place_;
  bool own_kernel_;
  UniqueFd spare_end_;          // kReattachFd while waiting for, and until, a Reattach
  UniqueFd rechannel_;          // reattach_by_helper_: where the helper brings the next channel
  bool awaiting_host_ = false;  // reattach_in_place_: the channel's host side is closed
  // For the next supervisor's Reattach: the highest request id the dead one used, and the
  // executions that were running when it died (their clients learn how they ended).
  uint32_t last_request_id_ = 0;
  std::vector<proto::EndedExecution> ended_;
  // Executions that outlived a supervisor, by request id: their frames go to held_ until a
  // Resume (holding_), counted in their entry. detached_: no supervisor at all, until
  // detach_deadline_us_ (the reattach grace), when the sandbox ends.
  std::map<uint32_t, proto::LiveExecution> kept_;
  std::map<uint32_t, proto::Exited> kept_exits_;  // how those that ended meanwhile ended
  std::deque<std::string> held_;
  size_t held_total_ = 0;
  bool holding_ = false;
  bool detached_ = false;
  uint64_t detach_deadline_us_ = 0;
  UniqueFd sigfd_;
  proto::FrameReader reader_;
  // Not zeroed (a std::vector would be): untouched, their pages are never faulted in, so an
  // execution without output costs no 512 KiB of page clearing, and the agent's fork for each
  // execution has fewer page-table entries to copy.
  std::unique_ptr<char[]> iobuf_;
  std::unique_ptr<char[]> ctlbuf_;  // control bytes held while stdout/stderr are drained first
  std::unique_ptr<Confinement> conf_;
  std::map<uint32_t, std::unique_ptr<Execution>> execs_;
  FileWriter writer_;
  PortRelay ports_{[this](const std::string& frame) { sendRaw(frame); }};
  bool stop_ = false;
  bool channel_eof_ = false;
  int exit_code_ = 0;
};

bool Agent::sendRaw(const std::string& frame) {
  if (stop_) return false;
  if (holding_ && holds(frame)) return hold(frame);
  if (detached_) return false;  // nobody to tell: a file operation or port of the dead one
  if (writeNow(frame)) {
    keepForReplay(frame);
    return true;
  }
  channelLost();
  // The frame may be half in the dead socket: the next supervisor gets all of it.
  return holding_ && holds(frame) && hold(frame);
}

// Writes while still draining the channel: the supervisor may itself be blocked writing
// (Stdin for a process whose Output we are sending), so refusing to read would deadlock both.
bool Agent::writeNow(const std::string& frame) {
  size_t done = 0;
  while (done < frame.size()) {
    ssize_t n = ::write(out_, frame.data() + done, frame.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p[2] = {{out_, POLLOUT, 0}, {in_, 0, 0}};
      if (!channel_eof_ && reader_.buffered() < kMaxInbound) p[1].events = POLLIN;
      if (::poll(p, 2, -1) < 0 && errno != EINTR) break;
      if (p[1].revents != 0) pullChannel();
      if (channel_eof_) break;
      continue;
    }
    break;
  }
  return done == frame.size();
}

void Agent::sendError(uint32_t id, int errnum, const std::string& stage,
                      const std::string& message) {
  proto::ErrorMsg m;
  m.errnum = errnum;
  m.stage = stage;
  m.message = message.size() > 4096 ? message.substr(0, 4096) : message;
  send(id, m);
}

int Agent::serve() {
  // The rendezvous name is taken now, before any code of the sandbox runs, and kept: nothing
  // else can squat it to receive the next supervisor's channel (rechannel.h).
  if (reattach_by_helper_ && reattach_grace_ms_ > 0)
    if (auto listener = listenForRechannel()) rechannel_ = std::move(*listener);
  proto::Hello hello;
  hello.agent_version = AIRLOCK_VERSION;
  hello.agent_pid = static_cast<uint32_t>(::getpid());
  hello.features = kFeatures;
  if (!send(0, hello)) return 0;

  std::vector<pollfd> fds;
  std::vector<std::pair<Slot, uint32_t>> slots;
  std::vector<pollfd> port_fds;
  std::vector<uint32_t> port_ids;
  while (!stop_) {
    processFrames();  // including frames that arrived while a send was waiting
    if (stop_) break;
    if (channel_eof_) channelLost();
    if (stop_) break;
    fds.clear();
    slots.clear();
    auto add = [&](int fd, short events, Slot s, uint32_t id) {
      fds.push_back({fd, events, 0});
      slots.push_back({s, id});
    };
    // -1 (ignored) while a helper must bring the next channel, or while the port's host side is
    // closed (it would poll as hung up, always).
    add(awaiting_host_ ? -1 : in_, POLLIN, Slot::kChannel, 0);
    add(sigfd_.get(), POLLIN, Slot::kSignal, 0);
    if (rechannel_) add(rechannel_.get(), POLLIN, Slot::kRechannel, 0);
    for (auto& [id, e] : execs_) {
      if (e->out) add(e->out.get(), POLLIN, Slot::kStdout, id);
      if (e->err) add(e->err.get(), POLLIN, Slot::kStderr, id);
      if (e->in && !e->stdin_buf.empty()) add(e->in.get(), POLLOUT, Slot::kStdin, id);
      if (e->sync) add(e->sync.get(), POLLIN, Slot::kSync, id);
      if (e->timer) add(e->timer.get(), POLLIN, Slot::kTimer, id);
      if (e->ctl) add(e->ctl.get(), POLLIN, Slot::kControl, id);
    }
    port_fds.clear();
    port_ids.clear();
    ports_.addPollFds(port_fds, port_ids);
    for (size_t i = 0; i < port_fds.size(); ++i)
      add(port_fds[i].fd, port_fds[i].events, Slot::kPort, port_ids[i]);
    int wait_ms = -1;
    if (detached_) {
      uint64_t now = monotonicUs();
      if (now >= detach_deadline_us_) break;  // the grace ran out: the sandbox ends
      wait_ms = static_cast<int>((detach_deadline_us_ - now) / 1000) + 1;
      // A port reopened by its host wakes no poll of ours: look at it every kHostCheckMs.
      if (awaiting_host_) wait_ms = std::min(wait_ms, kHostCheckMs);
    }
    int n = ::poll(fds.data(), fds.size(), wait_ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      exit_code_ = 1;
      break;
    }
    if (awaiting_host_) checkHostBack();
    for (size_t i = 0; i < fds.size() && !stop_; ++i) {
      if (fds[i].revents == 0) continue;
      auto [slot, id] = slots[i];
      if (slot == Slot::kChannel) {
        pullChannel();
        continue;
      }
      if (slot == Slot::kSignal) {
        readSignals();
        continue;
      }
      if (slot == Slot::kPort) {
        ports_.onReady(id, fds[i].revents);
        continue;
      }
      if (slot == Slot::kRechannel) {
        takeHelperChannel();
        continue;
      }
      Execution* e = find(id);
      if (e == nullptr) continue;  // finished earlier in this round
      switch (slot) {
        case Slot::kStdout:
          readOutput(*e, proto::Stream::kStdout);
          break;
        case Slot::kStderr:
          readOutput(*e, proto::Stream::kStderr);
          break;
        case Slot::kStdin:
          flushStdin(*e);
          break;
        case Slot::kSync:
          readSync(*e);
          break;
        case Slot::kTimer:
          onTimer(*e);
          break;
        case Slot::kControl:
          readControl(*e);
          break;
        default:
          break;
      }
      if (find(id) != nullptr) tryFinish(id, false);
    }
  }
  shutdownAll();
  return exit_code_;
}

void Agent::pullChannel() {
  char buf[64 * 1024];
  ssize_t n = ::read(in_, buf, sizeof(buf));
  if (n < 0) {
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) return;
    channel_eof_ = true;  // the channel broke: treat like EOF
    return;
  }
  if (n == 0) {
    channel_eof_ = true;  // the supervisor closed the channel
    return;
  }
  reader_.feed(std::string_view(buf, static_cast<size_t>(n)));
}

void Agent::processFrames() {
  while (!stop_) {
    auto frame = reader_.next();
    if (!frame) {
      sendError(0, EPROTO, "protocol", frame.error().message() + "; closing the channel");
      stop_ = true;
      exit_code_ = 2;
      return;
    }
    if (!*frame) return;
    handleFrame((*frame)->first, (*frame)->second);
  }
}

void Agent::handleFrame(const proto::FrameHeader& h, const std::string& payload) {
  uint32_t id = h.request_id;
  // A Reattach comes from the next supervisor, which numbers its requests afresh.
  if (h.type != proto::MsgType::kReattach) last_request_id_ = std::max(last_request_id_, id);
  if (!conf_ && h.type != proto::MsgType::kConfigure && h.type != proto::MsgType::kShutdown &&
      h.type != proto::MsgType::kReattach) {
    sendError(id, EPROTO, "protocol",
              std::string("expected Configure first, got ") + proto::msgTypeName(h.type));
    return;
  }
  switch (h.type) {
    case proto::MsgType::kConfigure:
      handleConfigure(id, payload);
      return;
    case proto::MsgType::kExec:
      handleExec(id, payload);
      return;
    case proto::MsgType::kStdin:
      handleStdin(id, payload);
      return;
    case proto::MsgType::kSignal:
      handleSignal(id, payload);
      return;
    case proto::MsgType::kFileWrite:
      handleFileWrite(id, payload);
      return;
    case proto::MsgType::kFileRead:
      handleFileRead(id, payload);
      return;
    case proto::MsgType::kFileList:
      handleFileList(id, payload);
      return;
    case proto::MsgType::kFileStat:
      handleFileStat(id, payload);
      return;
    case proto::MsgType::kPortOpen:
      ports_.open(id, payload);
      return;
    case proto::MsgType::kPortData:
      ports_.data(id, payload);
      return;
    case proto::MsgType::kPortCredit:
      ports_.credit(id, payload);
      return;
    case proto::MsgType::kPortClose:
      ports_.close(id, payload);
      return;
    case proto::MsgType::kFileMkdir:
      handleFileMkdir(id, payload);
      return;
    case proto::MsgType::kFileRemove:
      handleFileRemove(id, payload);
      return;
    case proto::MsgType::kFileRename:
      handleFileRename(id, payload);
      return;
    case proto::MsgType::kReattach:
      handleReattach(id, payload);
      return;
    case proto::MsgType::kNote:
      if ((kFeatures & proto::kFeatureKeepSessions) == 0) break;
      handleNote(id, payload);
      return;
    case proto::MsgType::kResume:
      if ((kFeatures & proto::kFeatureKeepSessions) == 0) break;
      handleResume(id);
      return;
    case proto::MsgType::kShutdown:
      shutdownAll();
      send(id, proto::Ok{});
      stop_ = true;
      return;
    default:
      sendError(id, EPROTO, "protocol",
                std::string(proto::msgTypeName(h.type)) + " is sent by the agent, not to it");
      return;
  }
  // Only an agent built without session keeping gets here (above).
  sendError(id, EPROTO, "protocol",
            std::string("unknown message type ") + proto::msgTypeName(h.type));
}

void Agent::handleConfigure(uint32_t id, const std::string& payload) {
  if (conf_) {
    sendError(id, EPROTO, "protocol", "Configure: the agent is already configured");
    return;
  }
  auto m = proto::decodeConfigure(payload);
  if (!m) {
    sendError(id, EINVAL, "protocol", m.error().message());
    return;
  }
  auto c = std::make_unique<Confinement>();
  c->uid = m->uid;
  c->gid = m->gid;
  c->keep_caps = m->keep_caps;
  c->filter.resize(m->seccomp_bpf.size() / sizeof(sock_filter));
  if (!c->filter.empty())
    std::memcpy(c->filter.data(), m->seccomp_bpf.data(), m->seccomp_bpf.size());
  c->prog.len = static_cast<unsigned short>(c->filter.size());
  c->prog.filter = c->filter.data();
  for (const auto& r : m->rlimits)
    c->rlimits.push_back(
        {static_cast<int>(r.resource), {static_cast<rlim_t>(r.soft), static_cast<rlim_t>(r.hard)}});
  if (m->landlock) {
    auto ruleset = LandlockRuleset::create(m->writable_paths);
    if (!ruleset) {
      sendError(id, ruleset.error().errnum(), "landlock", ruleset.error().message());
      return;
    }
    c->landlock = std::move(*ruleset);
  }
  uid_t ru, eu, su;
  gid_t rg, eg, sg;
  ::getresuid(&ru, &eu, &su);
  ::getresgid(&rg, &eg, &sg);
  c->change_ids = !(ru == c->uid && eu == c->uid && su == c->uid && rg == c->gid && eg == c->gid &&
                    sg == c->gid);
  c->drop_groups = ::getgroups(0, nullptr) > 0;
  c->drop_bounding_set = canDropBoundingSet();
  c->last_cap = lastCap();
  // File operations check permissions with the agent's supplementary groups too.
  if (::geteuid() == 0 && c->drop_groups) ::setgroups(0, nullptr);
  conf_ = std::move(c);
  send(id, proto::Ok{});
}

void Agent::startFailed(Execution& e, int errnum, const std::string& stage,
                        const std::string& msg) {
  sendError(e.id, errnum, stage, msg);
  proto::Exited x;
  x.exit_code = errnum == ENOENT ? 127 : 126;
  send(e.id, x);
}

void Agent::handleExec(uint32_t id, const std::string& payload) {
  auto m = proto::decodeExec(payload);
  if (!m) {
    sendError(id, EINVAL, "protocol", m.error().message());
    return;
  }
  if (find(id) != nullptr) {
    sendError(id, EEXIST, "protocol",
              "Exec: request id " + std::to_string(id) + " is already a running execution");
    return;
  }
  auto e = std::make_unique<Execution>();
  e->id = id;
  e->argv = std::move(m->argv);
  e->env = std::move(m->env);
  e->cwd = std::move(m->cwd);
  e->out_cap = m->stdout_cap;
  e->err_cap = m->stderr_cap;
  e->stdin_requested = m->stdin_pipe;
  e->scope = m->kill_scope;
  e->control_pipe = m->control_pipe;
  e->note = std::move(m->note);
  if (execs_.size() >= kMaxExecutions) {
    startFailed(*e, EAGAIN, "exec",
                "exec '" + e->argv[0] + "': " + std::to_string(kMaxExecutions) +
                    " executions already running");
    return;
  }

  auto failNow = [&](const char* op, const char* subject) {
    int err = errno;
    startFailed(*e, err, "exec", Error(op, subject, err).message());
  };

  // Prepare everything the child needs; after fork it only makes syscalls.
  int out_pipe[2], err_pipe[2], sync_pipe[2], in_pipe[2] = {-1, -1};
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    failNow("pipe2", "stdout");
    return;
  }
  UniqueFd out_r(out_pipe[0]), out_w(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    failNow("pipe2", "stderr");
    return;
  }
  UniqueFd err_r(err_pipe[0]), err_w(err_pipe[1]);
  if (::pipe2(sync_pipe, O_CLOEXEC) != 0) {
    failNow("pipe2", "sync");
    return;
  }
  UniqueFd sync_r(sync_pipe[0]), sync_w(sync_pipe[1]);
  UniqueFd in_r, in_w;
  if (e->stdin_requested) {
    if (::pipe2(in_pipe, O_CLOEXEC) != 0) {
      failNow("pipe2", "stdin");
      return;
    }
    in_r.reset(in_pipe[0]);
    in_w.reset(in_pipe[1]);
  } else {
    in_r.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!in_r) {
      failNow("open", "/dev/null");
      return;
    }
  }
  UniqueFd ctl_r, ctl_w;
  if (m->control_pipe) {
    int ctl_pipe[2];
    if (::pipe2(ctl_pipe, O_CLOEXEC) != 0) {
      failNow("pipe2", "control");
      return;
    }
    ctl_r.reset(ctl_pipe[0]);
    ctl_w.reset(ctl_pipe[1]);
    setNonBlocking(ctl_r.get());
  }
  UniqueFd timer(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
  if (!timer) {
    failNow("timerfd_create", "execution timer");
    return;
  }
  setNonBlocking(out_r.get());
  setNonBlocking(err_r.get());
  setNonBlocking(sync_r.get());
  if (in_w) setNonBlocking(in_w.get());

  for (auto& a : e->argv) e->argv_ptrs.push_back(a.data());
  e->argv_ptrs.push_back(nullptr);
  for (auto& v : e->env) e->env_ptrs.push_back(v.data());
  e->env_ptrs.push_back(nullptr);

  const Confinement& c = *conf_;
  ChildSpec& s = e->spec;
  s.path = e->argv[0].c_str();
  s.argv = e->argv_ptrs.data();
  s.envp = e->env_ptrs.data();
  s.cwd = e->cwd.c_str();
  s.stdin_fd = in_r.get();
  s.stdout_fd = out_w.get();
  s.stderr_fd = err_w.get();
  s.sync_fd = sync_w.get();
  s.control_fd = ctl_w ? ctl_w.get() : -1;
  s.rlimits = c.rlimits.data();
  s.rlimit_count = c.rlimits.size();
  s.landlock_fd = c.landlock.valid() ? c.landlock.fd() : -1;
  s.drop_groups = c.drop_groups;
  s.change_ids = c.change_ids;
  s.uid = c.uid;
  s.gid = c.gid;
  s.drop_bounding_set = c.drop_bounding_set;
  s.last_cap = c.last_cap;
  // Only uid 0 can hold capabilities across execve without file capabilities.
  s.caps = c.uid == 0 ? c.keep_caps : 0;
  s.seccomp = c.filter.empty() ? nullptr : &c.prog;

  e->start_us = monotonicUs();
  if (own_kernel_) e->oom_kills_at_start = kernelOomKills();
  pid_t pid = spawnChild(e->spec);
  if (pid < 0) {
    int err = errno;
    startFailed(*e, err, "clone", Error("clone", e->argv[0], err).message());
    return;
  }

  e->pid = pid;
  e->out = std::move(out_r);
  e->err = std::move(err_r);
  e->sync = std::move(sync_r);
  e->in = std::move(in_w);
  e->timer = std::move(timer);
  e->ctl = std::move(ctl_r);
  if (m->timeout_ms > 0) {
    int64_t ms = static_cast<int64_t>(std::min<uint64_t>(m->timeout_ms, 1ull << 40));
    armTimer(e->timer.get(), ms);
  }
  execs_.emplace(id, std::move(e));
}

void Agent::handleStdin(uint32_t id, const std::string& payload) {
  auto m = proto::decodeStdin(payload);
  if (!m) {
    sendError(id, EINVAL, "protocol", m.error().message());
    return;
  }
  Execution* e = find(id);
  if (e == nullptr) return;  // already ended: a normal race, nothing to report
  if (m->note) setNote(*e, std::move(*m->note));
  if (!e->stdin_requested) {
    sendError(id, EBADF, "stdin",
              "stdin of execution " + std::to_string(id) + " is /dev/null (Exec.stdin_pipe false)");
    return;
  }
  if (!e->in) return;  // the child closed its stdin or eof was already sent
  if (e->stdin_buf.size() + m->data.size() > kMaxStdinBuffer) {
    sendError(id, ENOBUFS, "stdin",
              "stdin of execution " + std::to_string(id) + ": " +
                  std::to_string(e->stdin_buf.size()) + " bytes not yet read by the process; " +
                  "limit " + std::to_string(kMaxStdinBuffer) + ", data dropped");
    return;
  }
  e->stdin_buf += m->data;
  e->stdin_eof = e->stdin_eof || m->eof;
  flushStdin(*e);
}

void Agent::flushStdin(Execution& e) {
  while (e.in && !e.stdin_buf.empty()) {
    ssize_t n = ::write(e.in.get(), e.stdin_buf.data(), e.stdin_buf.size());
    if (n > 0) {
      e.stdin_buf.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    // EPIPE: the process closed its stdin; the rest can never be delivered.
    e.stdin_buf.clear();
    e.in.reset();
    return;
  }
  if (e.in && e.stdin_eof && e.stdin_buf.empty()) e.in.reset();
}

void Agent::handleSignal(uint32_t id, const std::string& payload) {
  auto m = proto::decodeSignal(payload);
  if (!m) {
    sendError(id, EINVAL, "protocol", m.error().message());
    return;
  }
  Execution* e = find(id);
  if (e == nullptr || e->main_exited) return;  // already ended: a normal race
  if (m->signo == SIGKILL && e->scope == proto::ExecKillScope::kSession) {
    killExecution(*e, SIGKILL);  // the whole session, not only the process group
    return;
  }
  if (::kill(-e->pid, m->signo) != 0) {
    // Before the child's setsid there is no group yet; signal the process itself.
    if (errno != ESRCH || ::kill(e->pid, m->signo) != 0)
      sendError(
          id, errno, "signal",
          Error("kill", "execution " + std::to_string(id) + " signal " + std::to_string(m->signo),
                errno)
              .message());
  }
}

void Agent::handleFileWrite(uint32_t id, const std::string& payload) {
  auto m = proto::decodeFileWrite(payload);
  if (!m) {
    sendError(id, EINVAL, "protocol", m.error().message());
    return;
  }
  auto done = writer_.write(id, *m, conf_->uid, conf_->gid);
  if (!done) {
    int e = done.error().errnum();
    sendError(id, e != 0 ? e : EINVAL, "file_write", done.error().message());
    return;
  }
  if (*done) {
    persistWorkspace();
    send(id, proto::Ok{});
  }
}

void Agent::handleFileRead(uint32_t id, const std::string& payload) {
  auto m = proto::decodeFileRead(payload);
  if (!m) {
    sendError(id, EINVAL, "protocol", m.error().message());
    return;
  }
  auto r =
      readFile(*m, conf_->uid, conf_->gid, [&](const proto::FileData& d) { return send(id, d); });
  if (!r && !stop_) {
    int e = r.error().errnum();
    sendError(id, e != 0 ? e : EIO, "file_read", r.error().message());
  }
}

void Agent::sendFileError(uint32_t id, const Error& err, int fallback, const char* stage) {
  if (stop_) return;
  sendError(id, err.errnum() != 0 ? err.errnum() : fallback, stage, err.message());
}

void Agent::handleFileList(uint32_t id, const std::string& payload) {
  auto m = proto::decodeFileList(payload);
  if (!m) {
    sendError(id, EINVAL, "protocol", m.error().message());
    return;
  }
  auto r = listDirectory(*m, conf_->uid, conf_->gid,
                         [&](const proto::FileEntries& f) { return send(id, f); });
  if (!r) sendFileError(id, r.error(), EIO, "file_list");
}

void Agent::handleFileStat(uint32_t id, const std::string& payload) {
  auto m = proto::decodeFileStat(payload);
  if (!m) {
    sendError(id, EINVAL, "protocol", m.error().message());
    return;
  }
  auto r = statPath(*m, conf_->uid, conf_->gid);
  if (!r) {
    sendFileError(id, r.error(), EIO, "file_stat");
    return;
  }
  proto::FileEntries f;
  f.entries.push_back(std::move(*r));
  send(id, f);
}

void Agent::handleFileMkdir(uint32_t id, const std::string& payload) {
  auto m = proto::decodeFileMkdir(payload);
  if (!m) {
    sendError(id, EINVAL, "protocol", m.error().message());
    return;
  }
  auto r = makeDirectory(*m, conf_->uid, conf_->gid);
  if (!r) {
    sendFileError(id, r.error(), EIO, "file_mkdir");
    return;
  }
  persistWorkspace();
  send(id, proto::Ok{});
}

void Agent::handleFileRemove(uint32_t id, const std::string& payload) {
  auto m = proto::decodeFileRemove(payload);
  if (!m) {
    sendError(id, EINVAL, "protocol", m.error().message());
    return;
  }
  auto r = removePath(*m, conf_->uid, conf_->gid);
  if (!r) {
    sendFileError(id, r.error(), EIO, "file_remove");
    return;
  }
  persistWorkspace();
  send(id, proto::Ok{});
}

void Agent::handleFileRename(uint32_t id, const std::string& payload) {
  auto m = proto::decodeFileRename(payload);
  if (!m) {
    sendError(id, EINVAL, "protocol", m.error().message());
    return;
  }
  auto r = renamePath(*m, conf_->uid, conf_->gid);
  if (!r) {
    sendFileError(id, r.error(), EIO, "file_rename");
    return;
  }
  persistWorkspace();
  send(id, proto::Ok{});
}

void Agent::readSignals() {
  signalfd_siginfo si;
  while (::read(sigfd_.get(), &si, sizeof(si)) == sizeof(si)) {
  }
  reapChildren();
}

void Agent::reapChildren() {
  for (;;) {
    int status = 0;
    rusage ru{};
    pid_t pid = ::wait4(-1, &status, WNOHANG, &ru);
    if (pid <= 0) break;  // 0: none ready; ECHILD: no children left
    for (auto& [id, e] : execs_) {
      if (e->pid != pid || e->main_exited) continue;
      e->main_exited = true;
      e->status = status;
      e->usage = ru;
      e->end_us = monotonicUs();
      // The execution ends with its main process: nothing it started may outlive it.
      killExecution(*e, SIGKILL);
      armTimer(e->timer.get(), kDrainMs);
      break;
    }
  }
  std::vector<uint32_t> ids;
  for (auto& [id, e] : execs_)
    if (e->main_exited) ids.push_back(id);
  for (uint32_t id : ids) tryFinish(id, false);
}

void Agent::killExecution(Execution& e, int sig) {
  // As PID 1 of a sandbox running one execution, everything but the agent belongs to it,
  // including daemons that left the process group with setsid.
  if (e.scope == proto::ExecKillScope::kAll && ::getpid() == 1 && execs_.size() == 1) {
    ::kill(-1, sig);
    return;
  }
  if (::kill(-e.pid, sig) != 0 && !e.main_exited) ::kill(e.pid, sig);
  // Other executions keep running: only this execution's session goes, including process
  // groups a shell with job control made inside it. A process that calls setsid itself leaves.
  if (e.scope == proto::ExecKillScope::kSession) signalSession(e.pid, sig);
}

void Agent::readOutput(Execution& e, proto::Stream stream) {
  UniqueFd& fd = stream == proto::Stream::kStdout ? e.out : e.err;
  ssize_t n = ::read(fd.get(), iobuf_.get(), proto::kMaxChunk);
  if (n < 0) {
    if (errno == EINTR || errno == EAGAIN) return;
    fd.reset();
    return;
  }
  if (n == 0) {
    fd.reset();
    return;
  }
  forward(e, stream, iobuf_.get(), static_cast<size_t>(n));
}

void Agent::forward(Execution& e, proto::Stream stream, const char* data, size_t n) {
  ensureStarted(e);
  if (stream == proto::Stream::kControl) {
    e.ctl_bytes += n;
    size_t take = static_cast<size_t>(std::min<uint64_t>(n, proto::kMaxControlBytes - e.ctl_sent));
    if (take < n && !e.ctl_truncated) {
      e.ctl_truncated = true;
      sendError(e.id, EMSGSIZE, "control",
                "control pipe of execution " + std::to_string(e.id) + " passed " +
                    std::to_string(proto::kMaxControlBytes) + " bytes; the rest is dropped");
    }
    if (take == 0) return;
    e.ctl_sent += take;
    if (holding_ && held_total_ + take > proto::kMaxHeldBytes) {
      // A driver's report (a run's result) is never cut in the middle: its line is lost whole.
      if (auto k = kept_.find(e.id); k != kept_.end()) k->second.dropped_bytes += take;
      return;
    }
    proto::Output o;
    o.stream = stream;
    o.data.assign(data, take);
    send(e.id, o);
    return;
  }
  bool is_out = stream == proto::Stream::kStdout;
  uint64_t cap = is_out ? e.out_cap : e.err_cap;
  uint64_t& bytes = is_out ? e.out_bytes : e.err_bytes;
  uint64_t& sent = is_out ? e.out_sent : e.err_sent;
  bool& truncated = is_out ? e.out_truncated : e.err_truncated;
  bytes += n;
  size_t take = n;
  if (cap != 0) take = static_cast<size_t>(std::min<uint64_t>(n, cap - sent));
  if (take < n) truncated = true;
  if (take == 0) return;
  sent += take;
  if (holding_ && held_total_ + take > proto::kMaxHeldBytes) {
    if (auto k = kept_.find(e.id); k != kept_.end()) k->second.dropped_bytes += take;
    return;
  }
  proto::Output o;
  o.stream = stream;
  o.data.assign(data, take);
  send(e.id, o);
}

// What the process already wrote to stdout and stderr, and no more: a process that keeps
// writing cannot hold the control stream back.
void Agent::drainReady(Execution& e) {
  for (auto stream : {proto::Stream::kStdout, proto::Stream::kStderr}) {
    UniqueFd& fd = stream == proto::Stream::kStdout ? e.out : e.err;
    int avail = 0;
    if (!fd || ::ioctl(fd.get(), FIONREAD, &avail) != 0) continue;
    while (avail > 0 && fd) {
      ssize_t n = ::read(fd.get(), iobuf_.get(), std::min<size_t>(proto::kMaxChunk, avail));
      if (n <= 0) break;
      avail -= static_cast<int>(n);
      forward(e, stream, iobuf_.get(), static_cast<size_t>(n));
    }
  }
}

void Agent::readControl(Execution& e) {
  ssize_t n = ::read(e.ctl.get(), ctlbuf_.get(), proto::kMaxChunk);
  if (n < 0) {
    if (errno == EINTR || errno == EAGAIN) return;
    e.ctl.reset();
    return;
  }
  if (n == 0) {
    e.ctl.reset();
    return;
  }
  // A driver flushes its output before it reports on the control pipe. Whatever it wrote
  // before these control bytes is in the stdout/stderr pipes now (the drain comes after the
  // control read), so relaying that first keeps the order.
  drainReady(e);
  forward(e, proto::Stream::kControl, ctlbuf_.get(), static_cast<size_t>(n));
}

// Started comes after a successful execve and before the first Output; output in a pipe means
// execve already happened (the child writes nothing before it).
void Agent::ensureStarted(Execution& e) {
  if (e.started_sent || e.exec_failed) return;
  if (e.sync) readSync(e);
  if (e.started_sent || e.exec_failed) return;
  e.started_sent = true;
  proto::Started st;
  st.pid = static_cast<uint32_t>(e.pid);
  send(e.id, st);
}

void Agent::readSync(Execution& e) {
  StageRecord rec{};
  ssize_t n = ::read(e.sync.get(), &rec, sizeof(rec));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  e.sync.reset();
  if (n != static_cast<ssize_t>(sizeof(rec))) {  // EOF: execve succeeded
    ensureStarted(e);
    return;
  }
  e.exec_failed = true;
  e.exec_errno = rec.err;
  sendError(e.id, rec.err, childStageName(static_cast<ChildStage>(rec.stage)),
            describeChildFailure(rec, e.spec));
}

void Agent::onTimer(Execution& e) {
  uint64_t expirations = 0;
  if (::read(e.timer.get(), &expirations, sizeof(expirations)) != sizeof(expirations)) return;
  if (!e.main_exited) {
    e.timed_out = true;
    killExecution(e, SIGKILL);
    return;
  }
  tryFinish(e.id, true);  // pipes still open after the drain deadline: something escaped
}

void Agent::tryFinish(uint32_t id, bool force) {
  Execution* e = find(id);
  if (e == nullptr || !e->main_exited) return;
  bool session = e->scope == proto::ExecKillScope::kSession;
  if (!force) {
    if (e->sync || e->out || e->err || e->ctl) return;
    // Processes of the group still exist (dying, or zombies about to be re-parented and reaped).
    if (::kill(-e->pid, 0) == 0) return;
    if (session && sessionAlive(e->pid)) {
      signalSession(e->pid, SIGKILL);  // forked while the first kill was on its way
      return;
    }
  } else {
    if (e->sync) readSync(*e);
    if (session) signalSession(e->pid, SIGKILL);
    for (auto stream : {proto::Stream::kStdout, proto::Stream::kStderr, proto::Stream::kControl}) {
      for (int i = 0; i < 64; ++i) {
        UniqueFd& fd = stream == proto::Stream::kStdout   ? e->out
                       : stream == proto::Stream::kStderr ? e->err
                                                          : e->ctl;
        if (!fd) break;
        ssize_t n = ::read(fd.get(), iobuf_.get(), proto::kMaxChunk);
        if (n <= 0) break;
        forward(*e, stream, iobuf_.get(), static_cast<size_t>(n));
      }
    }
  }
  proto::Exited x;
  if (e->exec_failed) {
    x.exit_code = e->exec_errno == ENOENT ? 127 : 126;
  } else if (WIFSIGNALED(e->status)) {
    x.exit_code = -1;
    x.signal = WTERMSIG(e->status);
  } else {
    x.exit_code = WEXITSTATUS(e->status);
  }
  x.timed_out = e->timed_out;
  x.stdout_truncated = e->out_truncated;
  x.stderr_truncated = e->err_truncated;
  x.stdout_bytes = e->out_bytes;
  x.stderr_bytes = e->err_bytes;
  x.wall_us = e->end_us - e->start_us;
  x.user_us = timevalUs(e->usage.ru_utime);
  x.sys_us = timevalUs(e->usage.ru_stime);
  x.max_rss_kb = static_cast<uint64_t>(e->usage.ru_maxrss);
  x.control_bytes = e->ctl_bytes;
  x.control_truncated = e->ctl_truncated;
  if (own_kernel_) {
    const uint64_t now = kernelOomKills();
    x.oom_kills = now > e->oom_kills_at_start ? now - e->oom_kills_at_start : 0;
  }
  execs_.erase(id);
  persistWorkspace();
  if (auto k = kept_.find(id); k != kept_.end()) {
    k->second.exited = true;
    kept_exits_[id] = x;
  }
  send(id, x);
}

void Agent::persistWorkspace() {
  if (!own_kernel_) return;
  UniqueFd home(::open("/home/user", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (home) (void)::syncfs(home.get());
}

// Direct children of the agent that are not yet reaped (re-parented orphans included).
std::vector<pid_t> childrenOfSelf() {
  std::vector<pid_t> out;
  pid_t self = ::getpid();
  for (const auto& p : listProcesses())
    if (p.ppid == self) out.push_back(p.pid);
  return out;
}

// The supervisor died (its end of the channel closed). With a reattach grace the sandbox waits
// reattach_grace_ms for the next supervisor, which takes the far end of a new socket pair from
// fd kReattachFd with pidfd_getfd() (only host root can: it needs ptrace rights over this
// process) and sends Reattach. Meanwhile executions — commands, language session drivers — keep
// running and their frames are held (bounded by kMaxHeldBytes); without a grace, or if the new
// socket cannot be made, the sandbox ends.
void Agent::channelLost() {
  channel_eof_ = false;
  if (detached_) return;
  if (reattach_grace_ms_ <= 0 || !conf_ || (in_ != out_ && !reattach_by_helper_) || !detach())
    stop_ = true;
}

bool Agent::detach() {
  ports_.closeAll();       // their connections on the supervisor's side died with it
  writer_ = FileWriter();  // a file half written by the dead supervisor stays as it was
  // Executions started by the supervisor just lost join those kept from an earlier one.
  for (auto& [id, e] : execs_) {
    if (!kept_.contains(id)) {
      proto::LiveExecution x;
      x.request_id = id;
      x.pid = e->pid > 0 ? static_cast<uint32_t>(e->pid) : 0;
      x.code_context = e->control_pipe;
      kept_.emplace(id, std::move(x));
    }
    // What a session driver said since its note was sent to the dead supervisor, which may
    // not have acted on it: the next one gets it first.
    proto::LiveExecution& x = kept_[id];
    x.dropped_bytes += e->since_note_dropped;
    for (auto& frame : e->since_note) {
      x.held_bytes += frame.size();
      held_total_ += frame.size();
      held_.push_back(std::move(frame));
    }
    e->since_note.clear();
    e->since_note_bytes = 0;
    e->since_note_dropped = 0;
  }
  holding_ = true;
  if (reattach_by_helper_) return detachForHelper();
  if (reattach_in_place_) return detachInPlace();
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair) != 0) return false;
  int keep = pair[0], spare = pair[1];
  if (keep == kReattachFd) {  // nothing held the number: move out of the way
    keep = ::fcntl(keep, F_DUPFD_CLOEXEC, kReattachFd + 1);
    ::close(pair[0]);
    if (keep < 0) return false;
  }
  // The number still holds the dead channel (or /dev/null after a Reattach): dup3 replaces it
  // in one step, so a supervisor taking it never gets another socket of ours in between.
  if (spare != kReattachFd) {
    if (::dup3(spare, kReattachFd, O_CLOEXEC) < 0) return false;
    ::close(spare);
  }
  if (in_ != kReattachFd) ::close(in_);
  (void)spare_end_.release();
  spare_end_ = UniqueFd(kReattachFd);
  in_ = out_ = keep;
  reader_ = proto::FrameReader();
  detached_ = true;
  detach_deadline_us_ = monotonicUs() + static_cast<uint64_t>(reattach_grace_ms_) * 1000;
  return true;
}

// No host process can take a socket from this one: listen for the helper the next supervisor
// starts inside the sandbox (rechannel.h). The dead channel's numbers (stdio, for gVisor) are
// pointed at /dev/null, so that no socket of an execution takes them.
bool Agent::detachForHelper() {
  if (!rechannel_) return false;  // the name could not be ours at start (serve())
  UniqueFd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
  for (int fd : {in_, out_}) {
    if (fd < 0) continue;
    if (fd <= 2 && null) {
      ::dup3(null.get(), fd, fd == 0 || fd == 1 ? 0 : O_CLOEXEC);
    } else {
      ::close(fd);
    }
    if (out_ == in_) break;
  }
  in_ = out_ = -1;
  reader_ = proto::FrameReader();
  detached_ = true;
  detach_deadline_us_ = monotonicUs() + static_cast<uint64_t>(reattach_grace_ms_) * 1000;
  return true;
}

// The channel is a VM's port (virtio-serial), which reads as closed while its host side is and
// opens again when the next supervisor connects QEMU's side to a new socket: keep it, and wait.
bool Agent::detachInPlace() {
  reader_ = proto::FrameReader();  // a frame the dead supervisor sent half of is gone with it
  awaiting_host_ = true;
  detached_ = true;
  detach_deadline_us_ = monotonicUs() + static_cast<uint64_t>(reattach_grace_ms_) * 1000;
  return true;
}

void Agent::checkHostBack() {
  pollfd p{in_, POLLIN, 0};
  if (::poll(&p, 1, 0) < 0 || (p.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0) return;
  awaiting_host_ = false;
  reader_ = proto::FrameReader();
  channel_eof_ = false;
}

// A helper came with the next supervisor's channel; Reattach is the first frame on it. A
// refused peer (not root) or a failed hand-over leaves the agent waiting for the next. While a
// supervisor is attached nobody may offer one: such a connection is closed unread.
void Agent::takeHelperChannel() {
  if (in_ >= 0) {
    UniqueFd refused(::accept4(rechannel_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    return;
  }
  auto channel = takeChannel(rechannel_.get());
  if (!channel) return;
  in_ = out_ = channel->release();
  reader_ = proto::FrameReader();
  channel_eof_ = false;
}

void Agent::keepForReplay(const std::string& frame) {
  uint32_t id = 0;
  std::memcpy(&id, frame.data() + 8, sizeof id);
  Execution* e = find(id);
  if (e == nullptr || !e->control_pipe) return;
  e->since_note.push_back(frame);
  e->since_note_bytes += frame.size();
  if (e->since_note_bytes <= kMaxReplayBytes) return;
  // Over the bound: stdout and stderr go first, oldest first; a run's end (a control line) is
  // what the next supervisor cannot do without.
  // Frames this agent encoded: the type is the header's u16 at 4, and an Output's first field
  // is its stream (tag, u32 length, then the byte), so nothing needs decoding again.
  auto isControl = [](const std::string& f) {
    uint16_t type = 0;
    std::memcpy(&type, f.data() + 4, sizeof type);
    constexpr size_t kStreamAt = proto::kHeaderSize + 6;
    return type != static_cast<uint16_t>(proto::MsgType::kOutput) || f.size() <= kStreamAt ||
           f[kStreamAt] == static_cast<char>(proto::Stream::kControl);
  };
  for (auto it = e->since_note.begin();
       e->since_note_bytes > kMaxReplayBytes && it != e->since_note.end();) {
    if (isControl(*it)) {
      ++it;
      continue;
    }
    e->since_note_bytes -= it->size();
    e->since_note_dropped += it->size();
    it = e->since_note.erase(it);
  }
  while (e->since_note_bytes > kMaxReplayBytes && e->since_note.size() > 1) {
    e->since_note_bytes -= e->since_note.front().size();
    e->since_note_dropped += e->since_note.front().size();
    e->since_note.pop_front();
  }
}

bool Agent::holds(const std::string& frame) const {
  if (frame.size() < proto::kHeaderSize) return false;
  uint32_t id = 0;
  std::memcpy(&id, frame.data() + 8, sizeof id);  // little-endian, as the header is
  return kept_.contains(id);
}

bool Agent::hold(const std::string& frame) {
  uint32_t id = 0;
  std::memcpy(&id, frame.data() + 8, sizeof id);
  kept_[id].held_bytes += frame.size();
  held_total_ += frame.size();
  held_.push_back(frame);
  return true;
}

void Agent::handleReattach(uint32_t id, const std::string& payload) {
  auto m = proto::decodeReattach(payload);
  if (!m) {
    sendError(id, EINVAL, "protocol", m.error().message());
    return;
  }
  // The new supervisor holds its end now: nobody else may take ours. /dev/null keeps its
  // number taken, so that no socket of ours (an execution's) lands there, where the next
  // supervisor would take it for a channel.
  if (!spare_end_) {
    // A helper brought the channel (reattach_by_helper_): no fd of ours was on offer.
  } else if (int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC); null >= 0) {
    ::dup3(null, kReattachFd, O_CLOEXEC);
    ::close(null);
    (void)spare_end_.release();
  } else {
    spare_end_.reset();
  }
  detached_ = false;
  proto::Reattached r;
  r.last_request_id = last_request_id_;
  r.features = kFeatures;
  if (m->keep_sessions && (kFeatures & proto::kFeatureKeepSessions) != 0) {
    for (auto& [rid, x] : kept_) {
      if (r.live.size() >= proto::kMaxListItems) break;
      if (Execution* e = find(rid)) x.note = e->note;
      r.live.push_back(x);
    }
  } else {
    // A supervisor that cannot take executions over: they end, and it learns how.
    for (const auto& [rid, x] : kept_) {
      if (ended_.size() >= proto::kMaxListItems) break;
      proto::EndedExecution ended;
      ended.request_id = rid;
      ended.pid = x.pid;
      ended.code_context = x.code_context;
      Execution* e = find(rid);
      auto done = kept_exits_.find(rid);
      if (e != nullptr && e->main_exited && WIFEXITED(e->status)) {
        ended.exit_code = WEXITSTATUS(e->status);
      } else if (e == nullptr && done != kept_exits_.end() && done->second.signal == 0) {
        ended.exit_code = done->second.exit_code;
      } else {
        ended.signal = e == nullptr && done != kept_exits_.end() ? done->second.signal : SIGKILL;
      }
      ended_.push_back(ended);
    }
    r.ended = std::move(ended_);
    ended_.clear();
    shutdownAll();
    kept_.clear();
    kept_exits_.clear();
    held_.clear();
    held_total_ = 0;
    holding_ = false;
  }
  // Straight out, never held: the new supervisor numbers its first requests afresh, so this
  // answer's id may be one of the held executions'.
  std::string frame;
  proto::encode(frame, id, r);
  if (!writeNow(frame)) channelLost();
}

void Agent::handleNote(uint32_t id, const std::string& payload) {
  auto m = proto::decodeNote(payload);
  if (!m) {
    sendError(id, EINVAL, "protocol", m.error().message());
    return;
  }
  if (Execution* e = find(id)) setNote(*e, std::move(m->note));  // ended already: a normal race
}

// The supervisor has acted on everything before the note: nothing of it is sent again.
void Agent::setNote(Execution& e, std::string note) {
  e.note = std::move(note);
  e.since_note.clear();
  e.since_note_bytes = 0;
  e.since_note_dropped = 0;
}

// The next supervisor has a handler for every execution it took over: their held frames go
// first, in the order they were made, then everything live.
void Agent::handleResume(uint32_t id) {
  std::deque<std::string> held = std::move(held_);
  held_.clear();
  held_total_ = 0;
  holding_ = false;
  kept_.clear();
  kept_exits_.clear();
  for (const auto& frame : held)
    if (!sendRaw(frame)) return;
  send(id, proto::Ok{});
}

void Agent::shutdownAll() {
  ports_.closeAll();  // the supervisor that used them is gone, or the sandbox ends
  bool pid1 = ::getpid() == 1;
  if (pid1) {
    ::kill(-1, SIGKILL);
  } else {
    for (auto& [id, e] : execs_) {
      ::kill(-e->pid, SIGKILL);
      if (!e->main_exited) ::kill(e->pid, SIGKILL);
      if (e->scope == proto::ExecKillScope::kSession) signalSession(e->pid, SIGKILL);
    }
  }
  uint64_t deadline = monotonicUs() + kShutdownReapMs * 1000ull;
  for (;;) {
    if (!pid1)
      for (pid_t p : childrenOfSelf()) ::kill(p, SIGKILL);
    pid_t r;
    while ((r = ::waitpid(-1, nullptr, WNOHANG)) > 0) {
    }
    if (r < 0 && errno == ECHILD) break;
    if (monotonicUs() > deadline) break;
    ::usleep(5000);
  }
  execs_.clear();
}

}  // namespace

namespace {

void announceReady() {
  (void)!::write(2, proto::kAgentReadyLine, sizeof proto::kAgentReadyLine - 1);
  // From here on, stderr is nobody's: the launcher stops reading it once it saw the line.
  int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null >= 0 && null != 2) {
    ::dup2(null, 2);
    ::close(null);
  }
}

}  // namespace

int run(const Options& options) {
  auto sigfd = prepareProcess(options.channel_in, options.channel_out);
  if (!sigfd) {
    // No channel to report on is certain yet; try anyway, then give up.
    proto::ErrorMsg m;
    m.errnum = sigfd.error().errnum();
    m.stage = "startup";
    m.message = sigfd.error().message();
    std::string frame;
    proto::encode(frame, 0, m);
    (void)proto::writeFrame(options.channel_out, frame);
    return 1;
  }
  if (options.announce_ready) announceReady();
  Agent agent(options.channel_in, options.channel_out, options, std::move(*sigfd));
  return agent.serve();
}

}  // namespace airlock::agent
