// Decoding of ring-buffer records into Event.
#include "supervisor/audit/events.h"

#include <netinet/in.h>

#include <cstring>

#include "airlock_wire.h"
#include "supervisor/audit/net_rules.h"

namespace airlock::audit {

namespace {

// A fixed-size char field up to its first NUL, bounded by `used` when the kernel said how much.
std::string boundedString(const char* data, size_t capacity, size_t used) {
  size_t limit = used > 0 && used < capacity ? used : capacity;
  return std::string(data, strnlen(data, limit));
}

EventOrigin originOf(const airlock_event_header& h) {
  return {.slot = h.slot,
          .time_ns = h.time_ns,
          .cgroup_id = h.cgroup_id,
          .pid = h.pid,
          .tid = h.tid,
          .ns_pid = h.ns_pid,
          .uid = h.uid,
          .comm = boundedString(h.comm, sizeof h.comm, 0)};
}

template <typename T>
Result<T> copyRecord(std::span<const uint8_t> record, const char* name) {
  if (record.size() < sizeof(T)) {
    return fail(std::string("audit: ") + name + " record of " + std::to_string(record.size()) +
                " bytes, expected " + std::to_string(sizeof(T)) +
                " (skeleton and wire header disagree)");
  }
  T out;
  std::memcpy(&out, record.data(), sizeof(T));
  return out;
}

ExecEvent decodeExec(const airlock_exec_event& raw) {
  ExecEvent e;
  e.origin = originOf(raw.header);
  e.ppid = raw.ppid;
  e.argc = raw.argc;
  e.path = boundedString(raw.path, sizeof raw.path, raw.path_len);
  size_t used = std::min<size_t>(raw.argv_len, sizeof raw.argv);
  size_t start = 0;
  for (size_t i = 0; i < used; ++i) {
    if (raw.argv[i] != '\0') continue;
    e.argv.emplace_back(raw.argv + start, i - start);
    start = i + 1;
  }
  // A last argument cut off by the buffer has no NUL: keep what there is.
  if (start < used) e.argv.emplace_back(raw.argv + start, used - start);
  e.argv_truncated = e.argv.size() < raw.argc || start < used;
  return e;
}

NetEvent decodeNet(const airlock_net_event& raw) {
  NetEvent e;
  e.origin = originOf(raw.header);
  e.hook = raw.hook;
  e.allowed = raw.verdict == AIRLOCK_VERDICT_ALLOW;
  e.rule = raw.rule;
  e.generation = raw.generation & 1;
  e.family = raw.family == 10 ? 6 : 4;
  e.protocol = raw.protocol;
  e.port = raw.port;
  e.address = addressText(e.family, raw.addr);
  return e;
}

}  // namespace

Result<Event> decodeEvent(std::span<const uint8_t> record) {
  if (record.size() < sizeof(airlock_event_header)) {
    return fail("audit: record of " + std::to_string(record.size()) +
                " bytes is shorter than an event header");
  }
  uint32_t type = 0;
  std::memcpy(&type, record.data(), sizeof type);
  switch (type) {
    case AIRLOCK_EVENT_EXEC: {
      AIRLOCK_TRY_CTX(raw, copyRecord<airlock_exec_event>(record, "exec"), "decode");
      return decodeExec(raw);
    }
    case AIRLOCK_EVENT_NET: {
      AIRLOCK_TRY_CTX(raw, copyRecord<airlock_net_event>(record, "net"), "decode");
      return decodeNet(raw);
    }
    default:
      return fail("audit: unknown event type " + std::to_string(type));
  }
}

const char* hookName(uint8_t hook) {
  switch (hook) {
    case AIRLOCK_HOOK_CONNECT4:
      return "connect4";
    case AIRLOCK_HOOK_CONNECT6:
      return "connect6";
    case AIRLOCK_HOOK_SENDMSG4:
      return "sendmsg4";
    case AIRLOCK_HOOK_SENDMSG6:
      return "sendmsg6";
    default:
      return "unknown";
  }
}

const char* protocolName(uint8_t protocol) {
  switch (protocol) {
    case IPPROTO_TCP:
      return "tcp";
    case IPPROTO_UDP:
      return "udp";
    case IPPROTO_ICMP:
      return "icmp";
    case IPPROTO_ICMPV6:
      return "icmpv6";
    default:
      return "other";
  }
}

}  // namespace airlock::audit
