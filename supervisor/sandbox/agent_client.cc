#include "supervisor/sandbox/agent_client.h"

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

Result<> AgentClient::send(const std::string& frame) {
  auto r = protocol::writeFrame(fd_.get(), frame);
  if (!r) return Unexpected(std::move(r.error()).wrap("send to agent"));
  return {};
}

// Returns the next whole frame from the agent. When extra_fd is given and becomes readable
// first, returns with *extra_ready = true and an empty frame (type 0).
Result<AgentClient::Frame> AgentClient::nextFrame(Clock::time_point deadline, int extra_fd,
                                                  bool* extra_ready) {
  char buf[64 * 1024];
  for (;;) {
    auto ready = reader_.next();
    if (!ready) return protocolError(ready.error().message());
    if (ready->has_value()) {
      auto& [header, payload] = **ready;
      return Frame{header, std::move(payload)};
    }
    pollfd fds[4] = {{fd_.get(), POLLIN, 0},
                     {extra_fd, POLLIN, 0},
                     {cancel_fd_, POLLIN, 0},
                     {side_fd_, POLLIN, 0}};
    int n = poll(fds, 4, msUntil(deadline));
    if (n < 0) {
      if (errno == EINTR) continue;
      return sysError("poll", "agent channel");
    }
    if (n == 0) {
      // Only a slice ended: a program may stay silent for longer than a minute.
      if (Clock::now() < deadline) continue;
      return fail("timed out waiting for the sandbox agent");
    }
    if (fds[2].revents != 0) return Unexpected(Error("interrupted by a signal", {}, EINTR));
    if (side_fd_ >= 0 && fds[3].revents != 0) {
      on_side_readable_();
      if (fds[0].revents == 0 && (extra_fd < 0 || fds[1].revents == 0)) continue;
    }
    if (extra_fd >= 0 && fds[1].revents != 0) {
      *extra_ready = true;
      return Frame{};
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

Result<> AgentClient::expectOk(uint32_t id, const char* what, Clock::time_point deadline) {
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
    return Unexpected(Error(e->message, {}, e->errnum)
                          .wrap(std::string(what) + " (agent stage " + e->stage + ")"));
  }
  return protocolError(std::string(what) + ": unexpected " +
                       protocol::msgTypeName(frame->header.type));
}

Result<> AgentClient::preconfigure(const protocol::Configure& config) {
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

Result<protocol::Hello> AgentClient::handshake(const protocol::Configure& config,
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

Result<protocol::Reattached> AgentClient::reattach(Clock::time_point deadline) {
  uint32_t id = nextId();
  std::string out;
  protocol::encode(out, id, protocol::Reattach{});
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

Result<AgentClient::ExecOutcome> AgentClient::exec(const protocol::Exec& exec,
                                                   const OutputFn& on_output, int stdin_fd,
                                                   Clock::time_point deadline) {
  uint32_t id = nextId();
  std::string out;
  protocol::encode(out, id, exec);
  if (auto r = send(out); !r) return Unexpected(r.error());

  ExecOutcome outcome;
  bool stdin_open = exec.stdin_pipe && stdin_fd >= 0;
  std::string chunk;
  for (;;) {
    bool stdin_ready = false;
    auto frame = nextFrame(deadline, stdin_open ? stdin_fd : -1, &stdin_ready);
    if (!frame) return Unexpected(frame.error());
    if (stdin_ready) {
      chunk.resize(protocol::kMaxChunk / 4);
      ssize_t n = read(stdin_fd, chunk.data(), chunk.size());
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      protocol::Stdin msg;
      if (n > 0) {
        msg.data.assign(chunk.data(), static_cast<size_t>(n));
      } else {
        msg.eof = true;  // EOF or a read error: either way the program sees end of input
        stdin_open = false;
      }
      std::string f;
      protocol::encode(f, id, msg);
      // The program may have exited already; a refused write is then harmless.
      (void)send(f);
      continue;
    }
    if (frame->header.request_id != id)
      return protocolError("frame for request " + std::to_string(frame->header.request_id) +
                           " during execution " + std::to_string(id));
    switch (frame->header.type) {
      case protocol::MsgType::kStarted: {
        auto st = protocol::decodeStarted(frame->payload);
        if (!st) return protocolError(st.error().message());
        outcome.pid = st->pid;
        break;
      }
      case protocol::MsgType::kOutput: {
        auto o = protocol::decodeOutput(frame->payload);
        if (!o) return protocolError(o.error().message());
        if (o->stream == protocol::Stream::kControl && !exec.control_pipe)
          return protocolError("control output for an execution without a control pipe");
        on_output(o->stream, o->data);
        break;
      }
      case protocol::MsgType::kError: {
        auto e = protocol::decodeError(frame->payload);
        if (!e) return protocolError(e.error().message());
        outcome.error = e->stage + ": " + e->message;
        break;
      }
      case protocol::MsgType::kExited: {
        auto x = protocol::decodeExited(frame->payload);
        if (!x) return protocolError(x.error().message());
        outcome.exited = *x;
        return outcome;
      }
      default:
        return protocolError(std::string("unexpected ") +
                             protocol::msgTypeName(frame->header.type) + " during an execution");
    }
  }
}

Result<uint64_t> AgentClient::writeFile(const std::string& path, uint32_t mode, int src_fd,
                                        Clock::time_point deadline) {
  uint32_t id = nextId();
  protocol::FileWrite msg;
  msg.path = path;
  msg.mode = mode;
  uint64_t total = 0;
  std::string buf(protocol::kMaxChunk, '\0');
  bool first = true;
  for (;;) {
    ssize_t n = read(src_fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return sysError("read", "local file for '" + path + "'");
    }
    // Look ahead by one read so the last chunk carries the flag; a final empty chunk is fine.
    msg.data.assign(buf.data(), static_cast<size_t>(n));
    msg.first = first;
    msg.last = (n == 0);
    total += static_cast<uint64_t>(n);
    std::string f;
    protocol::encode(f, id, msg);
    if (auto r = send(f); !r) return Unexpected(r.error());
    first = false;
    if (n == 0) break;
  }
  if (auto r = expectOk(id, ("write '" + path + "'").c_str(), deadline); !r)
    return Unexpected(r.error());
  return total;
}

Result<uint64_t> AgentClient::readFile(const std::string& path, uint64_t max_bytes, int dst_fd,
                                       Clock::time_point deadline) {
  uint32_t id = nextId();
  protocol::FileRead msg{path, max_bytes};
  std::string f;
  protocol::encode(f, id, msg);
  if (auto r = send(f); !r) return Unexpected(r.error());
  uint64_t total = 0;
  for (;;) {
    auto frame = nextFrame(deadline);
    if (!frame) return Unexpected(std::move(frame.error()).wrap("read '" + path + "'"));
    if (frame->header.request_id != id) return protocolError("file data for another request");
    if (frame->header.type == protocol::MsgType::kError) {
      auto e = protocol::decodeError(frame->payload);
      if (!e) return protocolError(e.error().message());
      return Unexpected(Error(e->message, {}, e->errnum).wrap("read '" + path + "'"));
    }
    if (frame->header.type != protocol::MsgType::kFileData)
      return protocolError(std::string("unexpected ") + protocol::msgTypeName(frame->header.type) +
                           " while reading a file");
    auto d = protocol::decodeFileData(frame->payload);
    if (!d) return protocolError(d.error().message());
    total += d->data.size();
    if (max_bytes != 0 && total > max_bytes)
      return protocolError("agent sent more than the " + std::to_string(max_bytes) +
                           " bytes allowed for '" + path + "'");
    size_t off = 0;
    while (off < d->data.size()) {
      ssize_t w = write(dst_fd, d->data.data() + off, d->data.size() - off);
      if (w < 0) {
        if (errno == EINTR) continue;
        return sysError("write", "local copy of '" + path + "'");
      }
      off += static_cast<size_t>(w);
    }
    if (d->last) return total;
  }
}

template <typename M>
Result<> AgentClient::request(const M& m, const std::string& what, Clock::time_point deadline) {
  uint32_t id = nextId();
  std::string f;
  protocol::encode(f, id, m);
  if (auto r = send(f); !r) return Unexpected(std::move(r.error()).wrap(what));
  return expectOk(id, what.c_str(), deadline);
}

Result<> AgentClient::readEntries(uint32_t id, const std::string& what, bool listing,
                                  size_t max_entries, std::vector<protocol::FileEntry>& out,
                                  Clock::time_point deadline) {
  for (;;) {
    auto frame = nextFrame(deadline);
    if (!frame) return Unexpected(std::move(frame.error()).wrap(what));
    if (frame->header.request_id != id)
      return protocolError(what + ": answer for request " +
                           std::to_string(frame->header.request_id) + ", expected " +
                           std::to_string(id));
    if (frame->header.type == protocol::MsgType::kError) {
      auto e = protocol::decodeError(frame->payload);
      if (!e) return protocolError(e.error().message());
      return Unexpected(Error(e->message, {}, e->errnum).wrap(what));
    }
    if (frame->header.type != protocol::MsgType::kFileEntries)
      return protocolError(what + ": unexpected " + protocol::msgTypeName(frame->header.type));
    auto d = protocol::decodeFileEntries(frame->payload);
    if (!d) return protocolError(d.error().message());
    if (out.size() + d->entries.size() > max_entries)
      return protocolError(what + ": more than " + std::to_string(max_entries) + " entries");
    for (auto& e : d->entries) {
      // A listing names entries of the directory asked for, nothing else.
      if (listing && (e.name.find('/') != std::string::npos || e.name == "." || e.name == ".."))
        return protocolError(what + ": entry name '" + e.name + "' is not a plain name");
      out.push_back(std::move(e));
    }
    if (d->last) return {};
  }
}

Result<std::vector<protocol::FileEntry>> AgentClient::listFiles(const std::string& path,
                                                                Clock::time_point deadline,
                                                                size_t max_entries) {
  uint32_t id = nextId();
  std::string f;
  protocol::encode(f, id, protocol::FileList{path});
  std::string what = "list '" + path + "'";
  if (auto r = send(f); !r) return Unexpected(std::move(r.error()).wrap(what));
  std::vector<protocol::FileEntry> entries;
  if (auto r = readEntries(id, what, true, max_entries, entries, deadline); !r)
    return Unexpected(r.error());
  return entries;
}

Result<protocol::FileEntry> AgentClient::statFile(const std::string& path,
                                                  Clock::time_point deadline) {
  uint32_t id = nextId();
  std::string f;
  protocol::encode(f, id, protocol::FileStat{path});
  std::string what = "stat '" + path + "'";
  if (auto r = send(f); !r) return Unexpected(std::move(r.error()).wrap(what));
  std::vector<protocol::FileEntry> entries;
  if (auto r = readEntries(id, what, false, 1, entries, deadline); !r) return Unexpected(r.error());
  if (entries.size() != 1) return protocolError(what + ": no entry in the answer");
  return entries[0];
}

Result<> AgentClient::makeDirectory(const std::string& path, bool parents, uint32_t mode,
                                    Clock::time_point deadline) {
  return request(protocol::FileMkdir{path, parents, mode}, "mkdir '" + path + "'", deadline);
}

Result<> AgentClient::removeFile(const std::string& path, bool recursive,
                                 Clock::time_point deadline) {
  return request(protocol::FileRemove{path, recursive}, "remove '" + path + "'", deadline);
}

Result<> AgentClient::renameFile(const std::string& from, const std::string& to,
                                 Clock::time_point deadline) {
  return request(protocol::FileRename{from, to}, "rename '" + from + "' to '" + to + "'", deadline);
}

void AgentClient::shutdown() {
  if (!fd_) return;
  std::string f;
  protocol::encode(f, nextId(), protocol::Shutdown{});
  // Non-blocking on purpose: a wedged agent must not stall teardown; the cgroup kill follows.
  (void)::send(fd_.get(), f.data(), f.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

}  // namespace airlock::sandbox
