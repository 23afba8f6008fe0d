// The records the guest's exec watcher (guest/exec_watch.cc) writes on the `airlock.events`
// port, and their decoding on the host. Header-only: the static guest init and the plugin share
// it. Every byte comes from the guest and is untrusted: decoding checks every length.
//
// A record: u32 length (little-endian, 1..kMaxRecord) then that many bytes:
//   'E' u64 time_ns u32 pid u32 uid  comm\0 path\0 argv[0]\0 argv[1]\0 ...   an exec
//   'L' u32 lost                                                             events lost
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace airlock::isolation::microvm {

inline constexpr uint32_t kMaxRecord = 64 * 1024;
inline constexpr size_t kMaxArgvBytes = 16 * 1024;  // argv is cut past this, like the host's

struct ExecRecord {
  char kind = 0;  // 'E' or 'L'
  uint64_t time_ns = 0;
  uint32_t pid = 0, uid = 0, lost = 0;
  std::string comm, path;
  std::vector<std::string> argv;
};

inline void putU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
inline void putU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
inline uint64_t getLe(std::string_view s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(s[at + static_cast<size_t>(i)]))
         << (8 * i);
  return v;
}

// The whole record, length prefix included.
inline std::string encodeRecord(const ExecRecord& r) {
  std::string body(1, r.kind);
  if (r.kind == 'L') {
    putU32(body, r.lost);
  } else {
    putU64(body, r.time_ns);
    putU32(body, r.pid);
    putU32(body, r.uid);
    body += r.comm;
    body.push_back('\0');
    body += r.path;
    body.push_back('\0');
    size_t used = 0;
    for (const auto& a : r.argv) {
      if (used + a.size() + 1 > kMaxArgvBytes) break;
      body += a;
      body.push_back('\0');
      used += a.size() + 1;
    }
  }
  if (body.size() > kMaxRecord) body.resize(kMaxRecord);
  std::string out;
  putU32(out, static_cast<uint32_t>(body.size()));
  return out + body;
}

enum class Decoded { kRecord, kNeedMore, kCorrupt };

// Takes one record off the front of `buf` into `r`.
inline Decoded decodeRecord(std::string& buf, ExecRecord& r) {
  if (buf.size() < 4) return Decoded::kNeedMore;
  const uint64_t n = getLe(buf, 0, 4);
  if (n == 0 || n > kMaxRecord) return Decoded::kCorrupt;
  if (buf.size() < 4 + n) return Decoded::kNeedMore;
  std::string_view body(buf.data() + 4, n);
  r = ExecRecord{};
  r.kind = body[0];
  if (r.kind == 'L') {
    if (n != 5) return Decoded::kCorrupt;
    r.lost = static_cast<uint32_t>(getLe(body, 1, 4));
  } else if (r.kind == 'E') {
    if (n < 1 + 16 + 2) return Decoded::kCorrupt;
    r.time_ns = getLe(body, 1, 8);
    r.pid = static_cast<uint32_t>(getLe(body, 9, 4));
    r.uid = static_cast<uint32_t>(getLe(body, 13, 4));
    std::string_view rest = body.substr(17);
    std::vector<std::string> parts;
    while (!rest.empty()) {
      size_t z = rest.find('\0');
      if (z == std::string_view::npos) return Decoded::kCorrupt;  // every string ends in NUL
      parts.emplace_back(rest.substr(0, z));
      rest.remove_prefix(z + 1);
    }
    if (parts.size() < 2) return Decoded::kCorrupt;
    r.comm = std::move(parts[0]);
    r.path = std::move(parts[1]);
    r.argv.assign(std::make_move_iterator(parts.begin() + 2), std::make_move_iterator(parts.end()));
  } else {
    return Decoded::kCorrupt;
  }
  buf.erase(0, 4 + n);
  return Decoded::kRecord;
}

}  // namespace airlock::isolation::microvm
