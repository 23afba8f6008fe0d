#include "monitor.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

namespace airlock::isolation::gvisor {
namespace {

// Caps on what one event may carry into the supervisor (the sandbox chooses these).
constexpr size_t kMaxArgs = 64;
constexpr size_t kMaxString = 4096;
// The sink's receive buffer: runsc never blocks a sandboxed task on a slow reader, it drops
// events once the socket is full, so room matters more than latency here.
constexpr int kReceiveBuffer = 1 << 20;
constexpr size_t kMaxPacket = 256 * 1024;
constexpr size_t kMaxTrackedSockets = 4096;

// A protobuf reader for the few wire types gVisor's messages use.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  bool done() const { return at_ >= data_.size(); }
  bool varint(uint64_t& out) {
    out = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at_ >= data_.size()) return false;
      uint8_t b = static_cast<uint8_t>(data_[at_++]);
      out |= uint64_t{b & 0x7fu} << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  }
  // The next field's number and wire type.
  bool tag(uint32_t& field, uint32_t& wire) {
    uint64_t t;
    if (!varint(t) || (t >> 3) == 0 || (t >> 3) > UINT32_MAX) return false;
    field = static_cast<uint32_t>(t >> 3);
    wire = static_cast<uint32_t>(t & 7);
    return true;
  }
  bool bytes(std::string_view& out) {
    uint64_t n;
    if (!varint(n) || n > data_.size() - at_) return false;
    out = data_.substr(at_, n);
    at_ += n;
    return true;
  }
  bool skip(uint32_t wire) {
    uint64_t v;
    std::string_view s;
    switch (wire) {
      case 0:
        return varint(v);
      case 1:
        return advance(8);
      case 2:
        return bytes(s);
      case 5:
        return advance(4);
      default:
        return false;  // groups are not used by proto3
    }
  }

 private:
  bool advance(size_t n) {
    if (n > data_.size() - at_) return false;
    at_ += n;
    return true;
  }
  std::string_view data_;
  size_t at_ = 0;
};

std::string capped(std::string_view s) { return std::string(s.substr(0, kMaxString)); }

// Walks a message: `on` gets each field; varints as value, length-delimited as bytes.
template <typename On>
bool walk(std::string_view message, On&& on) {
  Reader r(message);
  while (!r.done()) {
    uint32_t field, wire;
    if (!r.tag(field, wire)) return false;
    if (wire == 0) {
      uint64_t v;
      if (!r.varint(v)) return false;
      if (!on(field, v, std::string_view())) return false;
    } else if (wire == 2) {
      std::string_view b;
      if (!r.bytes(b)) return false;
      if (!on(field, 0, b)) return false;
    } else if (!r.skip(wire)) {
      return false;
    }
  }
  return true;
}

// ContextData: 1 time_ns, 2 thread_id, 4 thread_group_id, 7 credentials (2 effective_uid),
// 9 process_name.
bool context(std::string_view m, MonitorRecord& out) {
  return walk(m, [&](uint32_t f, uint64_t v, std::string_view b) {
    switch (f) {
      case 1:
        out.time_ns = static_cast<int64_t>(v);
        break;
      case 2:
        out.tid = static_cast<int32_t>(v);
        break;
      case 4:
        out.tgid = static_cast<int32_t>(v);
        break;
      case 7:
        return walk(b, [&](uint32_t cf, uint64_t cv, std::string_view) {
          if (cf == 2) out.euid = static_cast<uint32_t>(cv);
          return true;
        });
      case 9:
        out.comm = capped(b.substr(0, 64));
        break;
      default:
        break;
    }
    return true;
  });
}

// Exit: 1 result, 2 errorno.
bool exitInfo(std::string_view m, MonitorRecord& out) {
  out.exit = true;
  return walk(m, [&](uint32_t f, uint64_t v, std::string_view) {
    if (f == 1) out.result = static_cast<int64_t>(v);
    if (f == 2) out.errno_value = static_cast<int64_t>(v);
    return true;
  });
}

}  // namespace

std::string podInitConfig(const std::string& endpoint) {
  return "{\"trace_session\":" + traceSessionConfig(endpoint) + "}";
}

std::string traceSessionConfig(const std::string& endpoint) {
  const nlohmann::json ctx = {"time", "thread_id", "group_id", "credentials", "process_name"};
  nlohmann::json points = nlohmann::json::array();
  for (const char* p : {"syscall/execve/exit", "syscall/socket/exit", "syscall/connect/exit"})
    points.push_back({{"name", p}, {"context_fields", ctx}});
  points.push_back({{"name", "syscall/execveat/exit"},
                    {"optional_fields", {"fd_path"}},
                    {"context_fields", ctx}});
  return nlohmann::json{{"name", "Default"},
                        {"points", points},
                        {"sinks", {{{"name", "remote"}, {"config", {{"endpoint", endpoint}}}}}}}
      .dump();
}

Result<MonitorRecord> decodeRecord(std::string_view packet) {
  if (packet.size() < 8) return fail("monitoring packet shorter than its header");
  uint16_t header_size, type;
  uint32_t dropped;
  std::memcpy(&header_size, packet.data(), 2);
  std::memcpy(&type, packet.data() + 2, 2);
  std::memcpy(&dropped, packet.data() + 4, 4);
  if (header_size < 8 || header_size > packet.size())
    return fail("monitoring packet header size " + std::to_string(header_size) + " is invalid");
  MonitorRecord out;
  out.type = type;
  out.dropped_total = dropped;
  const std::string_view body = packet.substr(header_size);
  bool ok = walk(body, [&](uint32_t f, uint64_t v, std::string_view b) {
    if (f == 1) return context(b, out);
    if (f == 2) return exitInfo(b, out);
    switch (static_cast<MessageType>(type)) {
      case MessageType::kExecve:
        // 3 sysno, 4 fd, 5 fd_path, 6 pathname, 7 argv.
        if (f == 3) out.sysno = static_cast<int64_t>(v);
        if (f == 4) out.fd = static_cast<int64_t>(v);
        if (f == 5) out.fd_path = capped(b);
        if (f == 6) out.pathname = capped(b);
        if (f == 7) {
          ++out.argc;
          if (out.argv.size() < kMaxArgs) out.argv.push_back(capped(b));
        }
        break;
      case MessageType::kConnect:
        // 3 sysno, 4 fd, 5 fd_path, 6 address.
        if (f == 4) out.fd = static_cast<int64_t>(v);
        if (f == 6) out.address = std::string(b.substr(0, 128));
        break;
      case MessageType::kSocket:
        // 3 sysno, 4 domain, 5 type, 6 protocol.
        if (f == 4) out.domain = static_cast<int32_t>(v);
        if (f == 5) out.sock_type = static_cast<int32_t>(v);
        if (f == 6) out.protocol = static_cast<int32_t>(v);
        break;
      default:
        break;
    }
    return true;
  });
  if (!ok)
    return fail("monitoring packet of type " + std::to_string(type) + " is not valid protobuf");
  return out;
}

bool decodeInetAddress(std::string_view sa, uint32_t& family, uint8_t (&address)[16],
                       uint16_t& port) {
  if (sa.size() < 2) return false;
  uint16_t fam;
  std::memcpy(&fam, sa.data(), 2);
  std::memset(address, 0, sizeof address);
  if (fam == AF_INET && sa.size() >= 8) {
    family = 4;
    port = static_cast<uint16_t>((static_cast<uint8_t>(sa[2]) << 8) | static_cast<uint8_t>(sa[3]));
    std::memcpy(address, sa.data() + 4, 4);
    return true;
  }
  if (fam == AF_INET6 && sa.size() >= 24) {
    family = 6;
    port = static_cast<uint16_t>((static_cast<uint8_t>(sa[2]) << 8) | static_cast<uint8_t>(sa[3]));
    std::memcpy(address, sa.data() + 8, 16);
    return true;
  }
  return false;
}

Result<MonitorSink> MonitorSink::listen(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path)
    return fail("the monitoring socket's path is longer than " +
                    std::to_string(sizeof addr.sun_path - 1) + " bytes; use a shorter state_dir",
                path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  MonitorSink sink;
  sink.listen_ = UniqueFd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!sink.listen_) return sysError("socket(AF_UNIX, SOCK_SEQPACKET)", path);
  ::unlink(path.c_str());
  if (::bind(sink.listen_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    return sysError("bind", path);
  if (::listen(sink.listen_.get(), 1) != 0) return sysError("listen", path);
  sink.path_ = path;
  return sink;
}

Result<> MonitorSink::accept(std::chrono::steady_clock::time_point deadline) {
  UniqueFd conn(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!conn) return sysError("accept", path_);
  // Only runsc itself, which runs as the supervisor's user: the socket sits in the sandbox's
  // private scratch directory, but check.
  ucred peer{};
  socklen_t len = sizeof peer;
  if (::getsockopt(conn.get(), SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 ||
      peer.uid != ::geteuid())
    return fail("the monitoring socket was reached by a process that is not runsc's", path_);
  int size = kReceiveBuffer;
  (void)::setsockopt(conn.get(), SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size);
  // Its Handshake {1: version}; ours says version 1, the only one there is.
  char buf[256];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return fail("runsc's monitoring handshake did not come in time");
    pollfd p{conn.get(), POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sysError("poll", path_);
    if (n == 1) break;
  }
  ssize_t got = ::recv(conn.get(), buf, sizeof buf, 0);
  if (got <= 0) return sysError("recv(handshake)", path_);
  uint64_t version = 0;
  bool ok = walk(std::string_view(buf, static_cast<size_t>(got)),
                 [&](uint32_t f, uint64_t v, std::string_view) {
                   if (f == 1) version = v;
                   return true;
                 });
  if (!ok || version < 1)
    return fail("runsc's monitoring handshake is not one this backend knows (version " +
                std::to_string(version) + ")");
  static constexpr char kReply[] = {0x08, 0x01};
  if (::send(conn.get(), kReply, sizeof kReply, MSG_NOSIGNAL) != sizeof kReply)
    return sysError("send(handshake)", path_);
  conn_ = std::move(conn);
  listen_.reset();
  ::unlink(path_.c_str());  // nothing else may connect
  return {};
}

Result<> MonitorSink::read(const std::function<void(const airlock_sandbox_event_v1&)>& emit) {
  if (!conn_) return {};
  std::string buf(kMaxPacket, '\0');
  for (;;) {
    ssize_t n = ::recv(conn_.get(), buf.data(), buf.size(), MSG_DONTWAIT | MSG_TRUNC);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return {};
    if (n < 0) return sysError("recv", "gVisor monitoring");
    if (n == 0) return {};  // runsc closed it: the sandbox ended
    // Larger than any event airlock reads (its fields would be cut), or not decodable: lost.
    auto record = static_cast<size_t>(n) > buf.size()
                      ? Result<MonitorRecord>(fail("monitoring packet too large"))
                      : decodeRecord(std::string_view(buf.data(), static_cast<size_t>(n)));
    if (!record) {
      airlock_sandbox_event_v1 e{};
      e.struct_size = sizeof e;
      e.kind = AIRLOCK_SANDBOX_EVENT_LOST;
      e.lost = 1;
      emit(e);
      continue;
    }
    // The sink's running count of what it could not send (the socket was full).
    const uint32_t lost = record->dropped_total - dropped_seen_;
    dropped_seen_ = record->dropped_total;
    emitRecord(*record, lost, emit);
  }
}

void MonitorSink::emitRecord(const MonitorRecord& r, uint32_t lost,
                             const std::function<void(const airlock_sandbox_event_v1&)>& emit) {
  airlock_sandbox_event_v1 e{};
  e.struct_size = sizeof e;
  e.kind = AIRLOCK_SANDBOX_EVENT_LOST;
  e.lost = lost;
  e.time_ns = static_cast<uint64_t>(r.time_ns);
  e.pid = static_cast<uint32_t>(r.tgid);
  e.uid = r.euid;
  e.comm = r.comm.c_str();
  const bool succeeded = r.exit && r.errno_value == 0;
  if (static_cast<MessageType>(r.type) == MessageType::kSocket) {
    if (!succeeded || r.result < 0 || (r.domain != AF_INET && r.domain != AF_INET6)) {
      if (lost > 0) emit(e);
      return;
    }
    if (sockets_.size() >= kMaxTrackedSockets) sockets_.clear();  // forget, never grow unbounded
    const int type = r.sock_type & 0xf;
    sockets_[{r.tgid, r.result}] = type == SOCK_STREAM ? 6 : type == SOCK_DGRAM ? 17 : 0;
    if (lost > 0) emit(e);
    return;
  }
  std::vector<const char*> argv;
  if (static_cast<MessageType>(r.type) == MessageType::kExecve && succeeded) {
    // A successful exec: the program as the caller named it (execveat: its fd's path).
    e.kind = AIRLOCK_SANDBOX_EVENT_EXEC;
    e.path = r.pathname.empty() ? r.fd_path.c_str() : r.pathname.c_str();
    for (const auto& a : r.argv) argv.push_back(a.c_str());
    e.argv = argv.data();
    e.argc = r.argc;
    // The exec replaced the process image: the fds it kept are still the same sockets.
  } else if (static_cast<MessageType>(r.type) == MessageType::kConnect && r.exit &&
             decodeInetAddress(r.address, e.family, e.address, e.port)) {
    e.kind = AIRLOCK_SANDBOX_EVENT_CONNECT;
    auto it = sockets_.find({r.tgid, r.fd});
    // A socket opened by another process (inherited) is unknown here: TCP is the likely one.
    e.protocol = it != sockets_.end() ? it->second : 6;
    e.result_errno = static_cast<int32_t>(r.errno_value);
  } else if (lost == 0) {
    return;
  }
  emit(e);
}

}  // namespace airlock::isolation::gvisor
