// Raw frame building for protocol tests: lets a test write exactly the bytes a hostile peer would.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace airlock::protocol::testing {

inline void putLe(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

inline std::string field(uint16_t tag, std::string_view value) {
  std::string f;
  putLe(f, tag, 2);
  putLe(f, value.size(), 4);
  f.append(value);
  return f;
}
inline std::string u32Field(uint16_t tag, uint32_t v) {
  std::string b;
  putLe(b, v, 4);
  return field(tag, b);
}
inline std::string u64Field(uint16_t tag, uint64_t v) {
  std::string b;
  putLe(b, v, 8);
  return field(tag, b);
}
inline std::string header(uint32_t len, uint16_t type, uint32_t request_id, uint16_t flags = 0) {
  std::string h;
  putLe(h, len, 4);
  putLe(h, type, 2);
  putLe(h, flags, 2);
  putLe(h, request_id, 4);
  return h;
}

}  // namespace airlock::protocol::testing
