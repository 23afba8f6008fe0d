// The sandbox's execs and connects from gVisor's runtime monitoring (docs/gvisor.md, "Audit").
//
// The host's eBPF hooks see only the sentry, so the events come from gVisor itself: runsc reads
// a pod-init config (--pod-init-config) naming a trace session with a few syscall points and a
// "remote" sink, a SOCK_SEQPACKET Unix socket this backend listens on. runsc connects while it
// starts, sends a bare Handshake protobuf ({1: version}) and waits for ours; from then on each
// packet is one event: an 8-byte header {u16 header size, u16 message type, u32 dropped so far}
// (host order) and a protobuf message of gVisor's seccheck schema.
//
// Only the fields airlock maps are decoded, by hand: five messages, a dozen fields, all varints
// and length-delimited. That keeps the plugin free of libprotobuf and of a copy of gVisor's
// .proto files (which no Debian package ships), for less code than the generated classes' glue.
//
// Everything in a packet comes from the sandbox (the sentry writes what the sandboxed program
// passed): lengths are checked, strings capped, unknown fields skipped.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <airlock/plugin_abi_v1.h>
#include <airlock/result.h>
#include <airlock/unique_fd.h>

namespace airlock::isolation::gvisor {

// The pod-init config: the points below, their context, the sink at `endpoint`. A sink that is
// not listening makes runsc fail (ignore_setup_error stays off: never run unmonitored).
std::string podInitConfig(const std::string& endpoint);
// The same session alone, for `runsc trace create --force` on an adopted sandbox: its sink died
// with the supervisor that listened.
std::string traceSessionConfig(const std::string& endpoint);

// gVisor's seccheck message types (pkg/sentry/seccheck/points/common.proto MessageType).
enum class MessageType : uint16_t {
  kConnect = 10,
  kExecve = 11,  // execve and execveat
  kSocket = 12,
};

// One packet, decoded. `exit` is set for the syscall's exit point (the result known).
struct MonitorRecord {
  uint16_t type = 0;
  uint32_t dropped_total = 0;  // the sink's running count (wraps at 2^32)
  // Context.
  int64_t time_ns = 0;  // CLOCK_REALTIME
  int32_t tid = 0, tgid = 0;
  uint32_t euid = 0;
  std::string comm;
  // The syscall's exit.
  bool exit = false;
  int64_t result = 0;
  int64_t errno_value = 0;
  // execve(at).
  int64_t sysno = 0;
  int64_t fd = 0;
  std::string fd_path;
  std::string pathname;
  std::vector<std::string> argv;
  uint32_t argc = 0;  // every argument, also those past the cap
  // connect.
  std::string address;  // the raw sockaddr the program passed
  // socket.
  int32_t domain = 0, sock_type = 0, protocol = 0;
};

// Decodes one packet. Fails naming what was malformed; the caller counts it as a lost event.
Result<MonitorRecord> decodeRecord(std::string_view packet);

// A sockaddr_in/in6 as family (4 or 6), 16 address bytes and port; false for anything else.
bool decodeInetAddress(std::string_view sockaddr, uint32_t& family, uint8_t (&address)[16],
                       uint16_t& port);

// The sink of one sandbox: the listening socket runsc connects to, then its connection.
class MonitorSink {
 public:
  // Binds and listens at `path` (≤ 107 bytes: a sockaddr_un).
  static Result<MonitorSink> listen(const std::string& path);
  int listenFd() const { return listen_.get(); }
  // Accepts runsc's connection (listenFd() is readable) and answers its handshake.
  Result<> accept(std::chrono::steady_clock::time_point deadline);
  bool connected() const { return static_cast<bool>(conn_); }
  // Polls readable while packets wait; hangs up when the sandbox is gone.
  int eventsFd() const { return conn_.get(); }

  // Every packet waiting, without blocking: exec and connect events to `emit` (with the events
  // the sink dropped meanwhile in `lost`); sockets only tracked, to tell TCP from UDP. Fails when
  // the connection broke; EOF (the sandbox ended) is not an error.
  Result<> read(const std::function<void(const airlock_sandbox_event_v1&)>& emit);

 private:
  void emitRecord(const MonitorRecord& r, uint32_t lost,
                  const std::function<void(const airlock_sandbox_event_v1&)>& emit);

  UniqueFd listen_;
  UniqueFd conn_;
  std::string path_;
  uint32_t dropped_seen_ = 0;
  // (thread group, fd) → IP protocol of the sockets the sandbox opened, for connect's decision.
  std::map<std::pair<int32_t, int64_t>, uint8_t> sockets_;
};

}  // namespace airlock::isolation::gvisor
