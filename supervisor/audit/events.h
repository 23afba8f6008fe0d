// Ring-buffer records of bpf/airlock_wire.h, decoded and checked: the kernel side is trusted, but
// a size mismatch (an old skeleton, a new wire header) must be an error, never a misread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "airlock/result.h"

namespace airlock::audit {

struct EventOrigin {
  uint32_t slot = 0;
  uint64_t time_ns = 0;  // CLOCK_MONOTONIC
  uint64_t cgroup_id = 0;
  uint32_t pid = 0;     // host
  uint32_t tid = 0;     // host
  uint32_t ns_pid = 0;  // inside the sandbox's pid namespace; 0 when the hook cannot tell
  uint32_t uid = 0;     // host uid
  std::string comm;
};

struct ExecEvent {
  EventOrigin origin;
  uint32_t ppid = 0;  // host
  uint32_t argc = 0;
  std::string path;
  std::vector<std::string> argv;  // the head that fit in AIRLOCK_ARGV_BYTES
  bool argv_truncated = false;    // fewer arguments (or bytes) than the process got
};

struct NetEvent {
  EventOrigin origin;
  uint8_t hook = 0;  // airlock_net_hook
  bool allowed = false;
  uint32_t rule = 0;       // user rule index or airlock_builtin_rule
  uint8_t generation = 0;  // which rule list (of the two a runtime update alternates) decided
  int family = 4;          // 4 or 6: the family the decision was made in
  uint8_t protocol = 0;
  uint16_t port = 0;
  std::string address;  // text form
};

using Event = std::variant<ExecEvent, NetEvent>;

// Decodes one ring-buffer record. Fails naming the type and sizes when they do not match.
Result<Event> decodeEvent(std::span<const uint8_t> record);

const char* hookName(uint8_t hook);          // "connect4", ...
const char* protocolName(uint8_t protocol);  // "tcp", "udp", "icmp", "icmpv6" or "other"

}  // namespace airlock::audit
