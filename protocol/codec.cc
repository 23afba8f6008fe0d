// Encoding and strict decoding of every agent channel message (wire format in messages.h).
//
// Field tags (stable: never renumber, only append; docs/protocol.md mirrors this table).
// Kinds: bool = 1 byte 0/1; u32/i32 = 4 bytes; u64 = 8 bytes; text = bytes without NUL;
// bytes = anything; list = the tag repeated, one item per field (at most kMaxListItems).
//
//   message    tag  field                   kind        rule
//   Hello        1  protocol_version        u32         required
//                2  agent_version           text
//                3  agent_pid               u32         required
//   Configure    1  uid                     u32         required
//                2  gid                     u32         required
//                3  keep_caps               u64
//                4  seccomp_bpf             bytes       multiple of 8, at most 4096 insns
//                5  rlimit                  list        20 bytes each: u32 resource, u64 soft,
//                                                       u64 hard; resource < 16, soft <= hard
//                6  writable_path           list text   absolute, < PATH_MAX
//                7  landlock                bool
//                8  max_output_bytes_total  u64
//   Exec         1  argv                    list text   at least 1; argv[0] absolute
//                2  env                     list text   each "K=V"
//                3  cwd                     text        absolute (default /home/user)
//                4  timeout_ms              u64
//                5  stdout_cap              u64
//                6  stderr_cap              u64
//                7  stdin_pipe              bool
//                8  control_pipe            bool
//                9  kill_scope              u8          0 (all) or 1 (session)
//               10  note                    text        <= kMaxNote
//   Stdin        1  data                    bytes       <= kMaxChunk
//                2  eof                     bool
//                3  note                    text        <= kMaxNote; as a Note, before the data
//   Signal       1  signo                   i32         required, 1..64
//   Output       1  stream                  u8          required, 1 (stdout), 2 (stderr) or
//                                                       3 (control)
//                2  data                    bytes       <= kMaxChunk
//   Exited       1  exit_code               i32         required
//                2  signal                  i32         0..64
//                3  timed_out               bool
//                4  stdout_truncated        bool
//                5  stderr_truncated        bool
//                6  stdout_bytes            u64
//                7  stderr_bytes            u64
//                8  wall_us                 u64
//                9  user_us                 u64
//               10  sys_us                  u64
//               11  max_rss_kb              u64
//               12  control_bytes           u64
//               13  control_truncated       bool
//               14  oom_kills               u64
//   Error        1  errnum                  i32
//                2  stage                   text        required
//                3  message                 bytes
//   FileWrite    1  path                    text        required, absolute, < PATH_MAX
//                2  mode                    u32         <= 07777
//                3  data                    bytes       <= kMaxChunk
//                4  first                   bool
//                5  last                    bool
//   FileRead     1  path                    text        required, absolute, < PATH_MAX
//                2  max_bytes               u64
//   FileData     1  data                    bytes       <= kMaxChunk
//                2  last                    bool
//                3  size                    u64
//   Started      1  pid                     u32         required, > 0
//   FileList     1  path                    text        required, absolute, < PATH_MAX
//   FileStat     1  path                    text        required, absolute, < PATH_MAX
//   FileEntries  1  entry                   list        nested fields, below; <= kMaxListItems
//                2  last                    bool
//     entry      1  name                    text        required, 1..PATH_MAX-1 bytes
//                2  type                    u8          required, 1..4 (FileType)
//                3  size                    u64
//                4  mode                    u32         <= 07777
//                5  mtime_ms                i64 (u64)
//   FileMkdir    1  path                    text        required, absolute, < PATH_MAX
//                2  parents                 bool
//                3  mode                    u32         <= 07777
//   FileRemove   1  path                    text        required, absolute, < PATH_MAX
//                2  recursive               bool
//   FileRename   1  from                    text        required, absolute, < PATH_MAX
//                2  to                      text        required, absolute, < PATH_MAX
//   Reattach     1  keep_sessions           bool
//   Reattached   1  last_request_id         u32
//                2  ended                   list        20 bytes each: u32 request_id (> 0),
//                                                       u32 pid, i32 exit_code, i32 signal
//                                                       (0..64), u32 flags (bit 0: code context)
//                3  features                u32         kFeature* bits
//                4  live                    list        nested fields, below; <= kMaxListItems
//     live       1  request_id              u32         required, 1..last_request_id
//                2  pid                     u32
//                3  flags                   u32         bit 0: code context, bit 1: exited
//                4  note                    text        <= kMaxNote
//                5  held_bytes              u64
//                6  dropped_bytes           u64
//   Note         1  note                    text        <= kMaxNote
//   PortOpen     1  port                    u32         required, 1..65535
//   PortData     1  data                    bytes       <= kMaxChunk
//                2  eof                     bool
//   PortCredit   1  bytes                   u32         required, 1..kPortWindow
//   PortClose    1  errnum                  i32         >= 0
//   Shutdown, Resume, Ok: no fields.
#include <climits>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "airlock/protocol/messages.h"

namespace airlock::protocol {
namespace {

constexpr size_t kFieldHeaderSize = 6;
constexpr size_t kMaxBpfInsns = 4096;  // BPF_MAXINSNS
constexpr size_t kBpfInsnSize = 8;     // sizeof(struct sock_filter)
constexpr uint32_t kMaxResource = 16;  // RLIM_NLIMITS
constexpr size_t kRlimitSize = 20;
constexpr size_t kEndedExecutionSize = 20;
constexpr uint32_t kEndedCodeContext = 1;
constexpr uint32_t kLiveCodeContext = 1;
constexpr uint32_t kLiveExited = 2;

void putU16(std::string& out, uint16_t v) {
  out.push_back(static_cast<char>(v & 0xff));
  out.push_back(static_cast<char>(v >> 8));
}
void putU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void putU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint16_t getU16(std::string_view b, size_t at) {
  return static_cast<uint16_t>(static_cast<uint8_t>(b[at]) |
                               (static_cast<uint16_t>(static_cast<uint8_t>(b[at + 1])) << 8));
}
uint32_t getU32(std::string_view b, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(b[at + i]);
  return v;
}
uint64_t getU64(std::string_view b, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(b[at + i]);
  return v;
}

// Appends fields to a buffer.
class FieldWriter {
 public:
  explicit FieldWriter(std::string& out) : out_(out) {}

  void bytes(uint16_t tag, std::string_view v) {
    putU16(out_, tag);
    putU32(out_, static_cast<uint32_t>(v.size()));
    out_.append(v);
  }
  void boolean(uint16_t tag, bool v) { bytes(tag, std::string_view(v ? "\x01" : "\x00", 1)); }
  void u8(uint16_t tag, uint8_t v) {
    char c = static_cast<char>(v);
    bytes(tag, std::string_view(&c, 1));
  }
  void u32(uint16_t tag, uint32_t v) {
    putU16(out_, tag);
    putU32(out_, 4);
    putU32(out_, v);
  }
  void i32(uint16_t tag, int32_t v) { u32(tag, static_cast<uint32_t>(v)); }
  void u64(uint16_t tag, uint64_t v) {
    putU16(out_, tag);
    putU32(out_, 8);
    putU64(out_, v);
  }
  void list(uint16_t tag, const std::vector<std::string>& items) {
    for (const auto& s : items) bytes(tag, s);
  }

 protected:
  std::string& out_;
};

// Appends one frame; the payload length is patched in when the builder goes out of scope.
class FrameBuilder : public FieldWriter {
 public:
  FrameBuilder(std::string& out, MsgType type, uint32_t request_id)
      : FieldWriter(out), start_(out.size()) {
    putU32(out_, 0);
    putU16(out_, static_cast<uint16_t>(type));
    putU16(out_, 0);
    putU32(out_, request_id);
  }
  ~FrameBuilder() {
    uint32_t len = static_cast<uint32_t>(out_.size() - start_ - kHeaderSize);
    for (int i = 0; i < 4; ++i) out_[start_ + i] = static_cast<char>((len >> (8 * i)) & 0xff);
  }
  FrameBuilder(const FrameBuilder&) = delete;
  FrameBuilder& operator=(const FrameBuilder&) = delete;

 private:
  size_t start_;
};

struct Field {
  uint16_t tag;
  std::string_view value;
};

// A payload split into fields, plus the typed accessors every decoder uses. Accessors check the
// size of fixed-width fields, duplicates of single-valued tags, and presence of required ones.
class Fields {
 public:
  explicit Fields(std::string msg) : msg_(std::move(msg)) {}

  Result<> parse(std::string_view payload) {
    if (payload.size() > kMaxPayload)
      return failMsg("payload of " + std::to_string(payload.size()) + " bytes exceeds the " +
                     std::to_string(kMaxPayload) + "-byte limit");
    size_t at = 0;
    while (at < payload.size()) {
      size_t left = payload.size() - at;
      if (left < kFieldHeaderSize)
        return failMsg("truncated field header at offset " + std::to_string(at) + " (" +
                       std::to_string(left) + " bytes left, need 6)");
      uint16_t tag = getU16(payload, at);
      uint32_t len = getU32(payload, at + 2);
      at += kFieldHeaderSize;
      if (len > payload.size() - at)
        return failMsg("field tag " + std::to_string(tag) + " at offset " +
                       std::to_string(at - kFieldHeaderSize) + " claims " + std::to_string(len) +
                       " bytes but only " + std::to_string(payload.size() - at) + " remain");
      fields_.push_back({tag, payload.substr(at, len)});
      at += len;
    }
    return {};
  }

  // The single value of tag, or nullopt when absent; an error when repeated.
  Result<std::optional<std::string_view>> one(uint16_t tag, const char* name) const {
    std::optional<std::string_view> found;
    for (const auto& f : fields_) {
      if (f.tag != tag) continue;
      if (found) return failField(tag, name, "appears more than once");
      found = f.value;
    }
    return found;
  }

  Result<std::optional<std::string_view>> fixed(uint16_t tag, const char* name, size_t size,
                                                bool required) const {
    auto v = one(tag, name);
    if (!v) return Unexpected(v.error());
    if (!*v) {
      if (required) return failField(tag, name, "missing (required)");
      return std::optional<std::string_view>();
    }
    if ((*v)->size() != size)
      return failField(tag, name,
                       std::to_string((*v)->size()) + " bytes, expected " + std::to_string(size));
    return *v;
  }

  Result<> u32(uint16_t tag, const char* name, uint32_t& out, bool required = false) const {
    auto v = fixed(tag, name, 4, required);
    if (!v) return Unexpected(v.error());
    if (*v) out = getU32(**v, 0);
    return {};
  }
  Result<> i32(uint16_t tag, const char* name, int32_t& out, bool required = false) const {
    uint32_t u = static_cast<uint32_t>(out);
    auto r = u32(tag, name, u, required);
    if (!r) return r;
    out = static_cast<int32_t>(u);
    return {};
  }
  Result<> u64(uint16_t tag, const char* name, uint64_t& out, bool required = false) const {
    auto v = fixed(tag, name, 8, required);
    if (!v) return Unexpected(v.error());
    if (*v) out = getU64(**v, 0);
    return {};
  }
  Result<> u8(uint16_t tag, const char* name, uint8_t& out, bool required = false) const {
    auto v = fixed(tag, name, 1, required);
    if (!v) return Unexpected(v.error());
    if (*v) out = static_cast<uint8_t>((**v)[0]);
    return {};
  }
  Result<> boolean(uint16_t tag, const char* name, bool& out) const {
    auto v = fixed(tag, name, 1, false);
    if (!v) return Unexpected(v.error());
    if (!*v) return {};
    uint8_t b = static_cast<uint8_t>((**v)[0]);
    if (b > 1)
      return failField(tag, name, "boolean value " + std::to_string(b) + ", expected 0 or 1");
    out = b == 1;
    return {};
  }
  Result<> bytes(uint16_t tag, const char* name, std::string& out, bool required = false,
                 size_t max = kMaxPayload) const {
    auto v = one(tag, name);
    if (!v) return Unexpected(v.error());
    if (!*v) {
      if (required) return failField(tag, name, "missing (required)");
      return {};
    }
    if ((*v)->size() > max)
      return failField(tag, name,
                       std::to_string((*v)->size()) + " bytes, at most " + std::to_string(max));
    out.assign(**v);
    return {};
  }
  Result<> text(uint16_t tag, const char* name, std::string& out, bool required = false) const {
    auto r = bytes(tag, name, out, required);
    if (!r) return r;
    if (out.find('\0') != std::string::npos) return failField(tag, name, "contains a NUL byte");
    return {};
  }
  // An execution's note (Exec, Stdin, Note, Reattached.live): text of at most kMaxNote bytes.
  Result<> note(uint16_t tag, std::string& out) const {
    if (auto r = text(tag, "note", out); !r) return r;
    if (out.size() > kMaxNote)
      return failField(tag, "note",
                       std::to_string(out.size()) + " bytes, at most " + std::to_string(kMaxNote));
    return {};
  }
  // An absolute path; when absent and optional, out keeps its default.
  Result<> path(uint16_t tag, const char* name, std::string& out, bool required) const {
    auto v = one(tag, name);
    if (!v) return Unexpected(v.error());
    if (!*v) {
      if (required) return failField(tag, name, "missing (required)");
      return {};
    }
    if ((*v)->find('\0') != std::string_view::npos)
      return failField(tag, name, "contains a NUL byte");
    out.assign(**v);
    return checkPath(tag, name, out, "");
  }
  Result<> textList(uint16_t tag, const char* name, std::vector<std::string>& out) const {
    out.clear();
    for (const auto& f : fields_) {
      if (f.tag != tag) continue;
      if (out.size() >= kMaxListItems)
        return failField(tag, name, "more than " + std::to_string(kMaxListItems) + " items");
      if (f.value.find('\0') != std::string_view::npos)
        return failField(tag, name, "item " + std::to_string(out.size()) + " contains a NUL byte");
      out.emplace_back(f.value);
    }
    return {};
  }
  std::vector<std::string_view> all(uint16_t tag) const {
    std::vector<std::string_view> r;
    for (const auto& f : fields_)
      if (f.tag == tag) r.push_back(f.value);
    return r;
  }

  Result<> checkPath(uint16_t tag, const char* name, const std::string& p,
                     const std::string& item) const {
    if (p.empty() || p[0] != '/')
      return failField(tag, name, item + "'" + p + "' is not an absolute path");
    if (p.size() >= PATH_MAX)
      return failField(tag, name,
                       item + "path of " + std::to_string(p.size()) + " bytes, at most " +
                           std::to_string(PATH_MAX - 1));
    return {};
  }

  Unexpected failField(uint16_t tag, const char* name, const std::string& problem) const {
    return fail(msg_ + ": field '" + name + "' (tag " + std::to_string(tag) + "): " + problem);
  }
  Unexpected failMsg(const std::string& problem) const { return fail(msg_ + ": " + problem); }

 private:
  std::string msg_;
  std::vector<Field> fields_;
};

#define AIRLOCK_CHECK(expr)                                                  \
  do {                                                                       \
    auto check_result_ = (expr);                                             \
    if (!check_result_) return Unexpected(std::move(check_result_.error())); \
  } while (0)

}  // namespace

const char* msgTypeName(MsgType t) {
  switch (t) {
    case MsgType::kHello:
      return "Hello";
    case MsgType::kConfigure:
      return "Configure";
    case MsgType::kExec:
      return "Exec";
    case MsgType::kStdin:
      return "Stdin";
    case MsgType::kSignal:
      return "Signal";
    case MsgType::kOutput:
      return "Output";
    case MsgType::kExited:
      return "Exited";
    case MsgType::kError:
      return "Error";
    case MsgType::kFileWrite:
      return "FileWrite";
    case MsgType::kFileRead:
      return "FileRead";
    case MsgType::kFileData:
      return "FileData";
    case MsgType::kShutdown:
      return "Shutdown";
    case MsgType::kOk:
      return "Ok";
    case MsgType::kStarted:
      return "Started";
    case MsgType::kFileList:
      return "FileList";
    case MsgType::kFileStat:
      return "FileStat";
    case MsgType::kFileEntries:
      return "FileEntries";
    case MsgType::kFileMkdir:
      return "FileMkdir";
    case MsgType::kFileRemove:
      return "FileRemove";
    case MsgType::kFileRename:
      return "FileRename";
    case MsgType::kReattach:
      return "Reattach";
    case MsgType::kReattached:
      return "Reattached";
    case MsgType::kPortOpen:
      return "PortOpen";
    case MsgType::kPortData:
      return "PortData";
    case MsgType::kPortCredit:
      return "PortCredit";
    case MsgType::kPortClose:
      return "PortClose";
    case MsgType::kNote:
      return "Note";
    case MsgType::kResume:
      return "Resume";
  }
  return "unknown";
}

// ---- encoding ----

void encode(std::string& out, uint32_t request_id, const Hello& m) {
  FrameBuilder b(out, MsgType::kHello, request_id);
  b.u32(1, m.protocol_version);
  b.bytes(2, m.agent_version);
  b.u32(3, m.agent_pid);
  b.u32(4, m.features);
}

void encode(std::string& out, uint32_t request_id, const Configure& m) {
  FrameBuilder b(out, MsgType::kConfigure, request_id);
  b.u32(1, m.uid);
  b.u32(2, m.gid);
  b.u64(3, m.keep_caps);
  b.bytes(4, m.seccomp_bpf);
  for (const auto& r : m.rlimits) {
    std::string v;
    putU32(v, r.resource);
    putU64(v, r.soft);
    putU64(v, r.hard);
    b.bytes(5, v);
  }
  b.list(6, m.writable_paths);
  b.boolean(7, m.landlock);
  b.u64(8, m.max_output_bytes_total);
}

void encode(std::string& out, uint32_t request_id, const Exec& m) {
  FrameBuilder b(out, MsgType::kExec, request_id);
  b.list(1, m.argv);
  b.list(2, m.env);
  b.bytes(3, m.cwd);
  b.u64(4, m.timeout_ms);
  b.u64(5, m.stdout_cap);
  b.u64(6, m.stderr_cap);
  b.boolean(7, m.stdin_pipe);
  b.boolean(8, m.control_pipe);
  b.u8(9, static_cast<uint8_t>(m.kill_scope));
  if (!m.note.empty()) b.bytes(10, m.note);
}

void encode(std::string& out, uint32_t request_id, const Stdin& m) {
  FrameBuilder b(out, MsgType::kStdin, request_id);
  b.bytes(1, m.data);
  b.boolean(2, m.eof);
  if (m.note) b.bytes(3, *m.note);
}

void encode(std::string& out, uint32_t request_id, const Signal& m) {
  FrameBuilder b(out, MsgType::kSignal, request_id);
  b.i32(1, m.signo);
}

void encode(std::string& out, uint32_t request_id, const Output& m) {
  FrameBuilder b(out, MsgType::kOutput, request_id);
  b.u8(1, static_cast<uint8_t>(m.stream));
  b.bytes(2, m.data);
}

void encode(std::string& out, uint32_t request_id, const Exited& m) {
  FrameBuilder b(out, MsgType::kExited, request_id);
  b.i32(1, m.exit_code);
  b.i32(2, m.signal);
  b.boolean(3, m.timed_out);
  b.boolean(4, m.stdout_truncated);
  b.boolean(5, m.stderr_truncated);
  b.u64(6, m.stdout_bytes);
  b.u64(7, m.stderr_bytes);
  b.u64(8, m.wall_us);
  b.u64(9, m.user_us);
  b.u64(10, m.sys_us);
  b.u64(11, m.max_rss_kb);
  b.u64(12, m.control_bytes);
  b.boolean(13, m.control_truncated);
  b.u64(14, m.oom_kills);
}

void encode(std::string& out, uint32_t request_id, const ErrorMsg& m) {
  FrameBuilder b(out, MsgType::kError, request_id);
  b.i32(1, m.errnum);
  b.bytes(2, m.stage);
  b.bytes(3, m.message);
}

void encode(std::string& out, uint32_t request_id, const FileWrite& m) {
  FrameBuilder b(out, MsgType::kFileWrite, request_id);
  b.bytes(1, m.path);
  b.u32(2, m.mode);
  b.bytes(3, m.data);
  b.boolean(4, m.first);
  b.boolean(5, m.last);
}

void encode(std::string& out, uint32_t request_id, const FileRead& m) {
  FrameBuilder b(out, MsgType::kFileRead, request_id);
  b.bytes(1, m.path);
  b.u64(2, m.max_bytes);
}

void encode(std::string& out, uint32_t request_id, const FileData& m) {
  FrameBuilder b(out, MsgType::kFileData, request_id);
  b.bytes(1, m.data);
  b.boolean(2, m.last);
  b.u64(3, m.size);
}

void encode(std::string& out, uint32_t request_id, const Started& m) {
  FrameBuilder b(out, MsgType::kStarted, request_id);
  b.u32(1, m.pid);
}

void encode(std::string& out, uint32_t request_id, const FileList& m) {
  FrameBuilder b(out, MsgType::kFileList, request_id);
  b.bytes(1, m.path);
}

void encode(std::string& out, uint32_t request_id, const FileStat& m) {
  FrameBuilder b(out, MsgType::kFileStat, request_id);
  b.bytes(1, m.path);
}

void encode(std::string& out, uint32_t request_id, const FileEntries& m) {
  FrameBuilder b(out, MsgType::kFileEntries, request_id);
  std::string item;
  for (const auto& e : m.entries) {
    item.clear();
    // Each entry is a nested field list, so entries can gain fields like messages do.
    {
      FieldWriter w(item);
      w.bytes(1, e.name);
      w.u8(2, static_cast<uint8_t>(e.type));
      w.u64(3, e.size);
      w.u32(4, e.mode);
      w.u64(5, static_cast<uint64_t>(e.mtime_ms));
    }
    b.bytes(1, item);
  }
  b.boolean(2, m.last);
}

size_t encodedEntrySize(const FileEntry& e) {
  return kFieldHeaderSize + 5 * kFieldHeaderSize + e.name.size() + 1 + 8 + 4 + 8;
}

void encode(std::string& out, uint32_t request_id, const FileMkdir& m) {
  FrameBuilder b(out, MsgType::kFileMkdir, request_id);
  b.bytes(1, m.path);
  b.boolean(2, m.parents);
  b.u32(3, m.mode);
}

void encode(std::string& out, uint32_t request_id, const FileRemove& m) {
  FrameBuilder b(out, MsgType::kFileRemove, request_id);
  b.bytes(1, m.path);
  b.boolean(2, m.recursive);
}

void encode(std::string& out, uint32_t request_id, const FileRename& m) {
  FrameBuilder b(out, MsgType::kFileRename, request_id);
  b.bytes(1, m.from);
  b.bytes(2, m.to);
}

void encode(std::string& out, uint32_t request_id, const Reattach& m) {
  FrameBuilder b(out, MsgType::kReattach, request_id);
  if (m.keep_sessions) b.boolean(1, true);
}

void encode(std::string& out, uint32_t request_id, const Note& m) {
  FrameBuilder b(out, MsgType::kNote, request_id);
  b.bytes(1, m.note);
}

void encode(std::string& out, uint32_t request_id, const Resume&) {
  FrameBuilder b(out, MsgType::kResume, request_id);
}

void encode(std::string& out, uint32_t request_id, const Reattached& m) {
  FrameBuilder b(out, MsgType::kReattached, request_id);
  b.u32(1, m.last_request_id);
  for (const auto& e : m.ended) {
    std::string v;
    putU32(v, e.request_id);
    putU32(v, e.pid);
    putU32(v, static_cast<uint32_t>(e.exit_code));
    putU32(v, static_cast<uint32_t>(e.signal));
    putU32(v, e.code_context ? kEndedCodeContext : 0);
    b.bytes(2, v);
  }
  if (m.features != 0) b.u32(3, m.features);
  std::string item;
  for (const auto& e : m.live) {
    item.clear();
    {
      FieldWriter w(item);
      w.u32(1, e.request_id);
      w.u32(2, e.pid);
      w.u32(3, (e.code_context ? kLiveCodeContext : 0) | (e.exited ? kLiveExited : 0));
      w.bytes(4, e.note);
      w.u64(5, e.held_bytes);
      w.u64(6, e.dropped_bytes);
    }
    b.bytes(4, item);
  }
}

void encode(std::string& out, uint32_t request_id, const PortOpen& m) {
  FrameBuilder b(out, MsgType::kPortOpen, request_id);
  b.u32(1, m.port);
}

void encode(std::string& out, uint32_t request_id, const PortData& m) {
  FrameBuilder b(out, MsgType::kPortData, request_id);
  b.bytes(1, m.data);
  b.boolean(2, m.eof);
}

void encode(std::string& out, uint32_t request_id, const PortCredit& m) {
  FrameBuilder b(out, MsgType::kPortCredit, request_id);
  b.u32(1, m.bytes);
}

void encode(std::string& out, uint32_t request_id, const PortClose& m) {
  FrameBuilder b(out, MsgType::kPortClose, request_id);
  b.i32(1, m.errnum);
}

void encode(std::string& out, uint32_t request_id, const Shutdown&) {
  FrameBuilder b(out, MsgType::kShutdown, request_id);
}

void encode(std::string& out, uint32_t request_id, const Ok&) {
  FrameBuilder b(out, MsgType::kOk, request_id);
}

// ---- decoding ----

Result<FrameHeader> decodeHeader(std::string_view bytes) {
  if (bytes.size() < kHeaderSize)
    return fail("frame header: " + std::to_string(bytes.size()) + " bytes, need " +
                std::to_string(kHeaderSize));
  FrameHeader h;
  h.payload_len = getU32(bytes, 0);
  uint16_t type = getU16(bytes, 4);
  h.flags = getU16(bytes, 6);
  h.request_id = getU32(bytes, 8);
  if (type < static_cast<uint16_t>(MsgType::kHello) ||
      type > static_cast<uint16_t>(MsgType::kResume))
    return fail("frame header: unknown message type " + std::to_string(type));
  h.type = static_cast<MsgType>(type);
  if (h.payload_len > kMaxPayload)
    return fail(std::string("frame header: ") + msgTypeName(h.type) + " payload of " +
                std::to_string(h.payload_len) + " bytes exceeds the " +
                std::to_string(kMaxPayload) + "-byte limit");
  return h;
}

Result<PortOpen> decodePortOpen(std::string_view payload) {
  Fields f("PortOpen");
  AIRLOCK_CHECK(f.parse(payload));
  PortOpen m;
  AIRLOCK_CHECK(f.u32(1, "port", m.port, true));
  if (m.port < 1 || m.port > 65535)
    return f.failField(1, "port", "port " + std::to_string(m.port) + " outside 1..65535");
  return m;
}

Result<PortData> decodePortData(std::string_view payload) {
  Fields f("PortData");
  AIRLOCK_CHECK(f.parse(payload));
  PortData m;
  AIRLOCK_CHECK(f.bytes(1, "data", m.data, false, kMaxChunk));
  AIRLOCK_CHECK(f.boolean(2, "eof", m.eof));
  return m;
}

Result<PortCredit> decodePortCredit(std::string_view payload) {
  Fields f("PortCredit");
  AIRLOCK_CHECK(f.parse(payload));
  PortCredit m;
  AIRLOCK_CHECK(f.u32(1, "bytes", m.bytes, true));
  if (m.bytes < 1 || m.bytes > kPortWindow)
    return f.failField(1, "bytes",
                       std::to_string(m.bytes) + " outside 1.." + std::to_string(kPortWindow));
  return m;
}

Result<PortClose> decodePortClose(std::string_view payload) {
  Fields f("PortClose");
  AIRLOCK_CHECK(f.parse(payload));
  PortClose m;
  AIRLOCK_CHECK(f.i32(1, "errnum", m.errnum));
  if (m.errnum < 0) return f.failField(1, "errnum", "negative errno " + std::to_string(m.errnum));
  return m;
}

Result<Hello> decodeHello(std::string_view payload) {
  Fields f("Hello");
  AIRLOCK_CHECK(f.parse(payload));
  Hello m;
  AIRLOCK_CHECK(f.u32(1, "protocol_version", m.protocol_version, true));
  AIRLOCK_CHECK(f.text(2, "agent_version", m.agent_version));
  AIRLOCK_CHECK(f.u32(3, "agent_pid", m.agent_pid, true));
  AIRLOCK_CHECK(f.u32(4, "features", m.features));
  return m;
}

Result<Configure> decodeConfigure(std::string_view payload) {
  Fields f("Configure");
  AIRLOCK_CHECK(f.parse(payload));
  Configure m;
  AIRLOCK_CHECK(f.u32(1, "uid", m.uid, true));
  AIRLOCK_CHECK(f.u32(2, "gid", m.gid, true));
  AIRLOCK_CHECK(f.u64(3, "keep_caps", m.keep_caps));
  AIRLOCK_CHECK(f.bytes(4, "seccomp_bpf", m.seccomp_bpf, false, kMaxBpfInsns * kBpfInsnSize));
  if (m.seccomp_bpf.size() % kBpfInsnSize != 0)
    return f.failField(4, "seccomp_bpf",
                       std::to_string(m.seccomp_bpf.size()) +
                           " bytes, not a multiple of the 8-byte sock_filter size");
  auto rl = f.all(5);
  if (rl.size() > kMaxListItems)
    return f.failField(5, "rlimit", "more than " + std::to_string(kMaxListItems) + " items");
  for (size_t i = 0; i < rl.size(); ++i) {
    std::string item = "item " + std::to_string(i) + ": ";
    if (rl[i].size() != kRlimitSize)
      return f.failField(
          5, "rlimit",
          item + std::to_string(rl[i].size()) + " bytes, expected " + std::to_string(kRlimitSize));
    Rlimit r{getU32(rl[i], 0), getU64(rl[i], 4), getU64(rl[i], 12)};
    if (r.resource >= kMaxResource)
      return f.failField(5, "rlimit", item + "unknown resource " + std::to_string(r.resource));
    if (r.soft > r.hard)
      return f.failField(5, "rlimit",
                         item + "soft limit " + std::to_string(r.soft) + " above hard limit " +
                             std::to_string(r.hard));
    m.rlimits.push_back(r);
  }
  AIRLOCK_CHECK(f.textList(6, "writable_path", m.writable_paths));
  for (size_t i = 0; i < m.writable_paths.size(); ++i)
    AIRLOCK_CHECK(
        f.checkPath(6, "writable_path", m.writable_paths[i], "item " + std::to_string(i) + ": "));
  AIRLOCK_CHECK(f.boolean(7, "landlock", m.landlock));
  AIRLOCK_CHECK(f.u64(8, "max_output_bytes_total", m.max_output_bytes_total));
  return m;
}

Result<Exec> decodeExec(std::string_view payload) {
  Fields f("Exec");
  AIRLOCK_CHECK(f.parse(payload));
  Exec m;
  AIRLOCK_CHECK(f.textList(1, "argv", m.argv));
  if (m.argv.empty()) return f.failField(1, "argv", "0 items, need at least 1");
  AIRLOCK_CHECK(f.checkPath(1, "argv", m.argv[0], "argv[0] "));
  AIRLOCK_CHECK(f.textList(2, "env", m.env));
  for (size_t i = 0; i < m.env.size(); ++i) {
    size_t eq = m.env[i].find('=');
    if (eq == std::string::npos || eq == 0)
      return f.failField(2, "env", "item " + std::to_string(i) + " is not of the form K=V");
  }
  AIRLOCK_CHECK(f.path(3, "cwd", m.cwd, false));
  AIRLOCK_CHECK(f.u64(4, "timeout_ms", m.timeout_ms));
  AIRLOCK_CHECK(f.u64(5, "stdout_cap", m.stdout_cap));
  AIRLOCK_CHECK(f.u64(6, "stderr_cap", m.stderr_cap));
  AIRLOCK_CHECK(f.boolean(7, "stdin_pipe", m.stdin_pipe));
  AIRLOCK_CHECK(f.boolean(8, "control_pipe", m.control_pipe));
  uint8_t scope = static_cast<uint8_t>(m.kill_scope);
  AIRLOCK_CHECK(f.u8(9, "kill_scope", scope));
  if (scope > static_cast<uint8_t>(ExecKillScope::kSession))
    return f.failField(9, "kill_scope",
                       "scope " + std::to_string(scope) + ", expected 0 (all) or 1 (session)");
  m.kill_scope = static_cast<ExecKillScope>(scope);
  AIRLOCK_CHECK(f.note(10, m.note));
  return m;
}

Result<Stdin> decodeStdin(std::string_view payload) {
  Fields f("Stdin");
  AIRLOCK_CHECK(f.parse(payload));
  Stdin m;
  AIRLOCK_CHECK(f.bytes(1, "data", m.data, false, kMaxChunk));
  AIRLOCK_CHECK(f.boolean(2, "eof", m.eof));
  if (!f.all(3).empty()) {
    std::string note;
    AIRLOCK_CHECK(f.note(3, note));
    m.note = std::move(note);
  }
  return m;
}

Result<Signal> decodeSignal(std::string_view payload) {
  Fields f("Signal");
  AIRLOCK_CHECK(f.parse(payload));
  Signal m;
  AIRLOCK_CHECK(f.i32(1, "signo", m.signo, true));
  if (m.signo < 1 || m.signo > 64)
    return f.failField(1, "signo", "signal " + std::to_string(m.signo) + " outside 1..64");
  return m;
}

Result<Output> decodeOutput(std::string_view payload) {
  Fields f("Output");
  AIRLOCK_CHECK(f.parse(payload));
  Output m;
  uint8_t stream = 0;
  AIRLOCK_CHECK(f.u8(1, "stream", stream, true));
  if (stream < 1 || stream > 3)
    return f.failField(1, "stream", "stream " + std::to_string(stream) + ", expected 1, 2 or 3");
  m.stream = static_cast<Stream>(stream);
  AIRLOCK_CHECK(f.bytes(2, "data", m.data, false, kMaxChunk));
  return m;
}

Result<Exited> decodeExited(std::string_view payload) {
  Fields f("Exited");
  AIRLOCK_CHECK(f.parse(payload));
  Exited m;
  AIRLOCK_CHECK(f.i32(1, "exit_code", m.exit_code, true));
  AIRLOCK_CHECK(f.i32(2, "signal", m.signal));
  if (m.signal < 0 || m.signal > 64)
    return f.failField(2, "signal", "signal " + std::to_string(m.signal) + " outside 0..64");
  AIRLOCK_CHECK(f.boolean(3, "timed_out", m.timed_out));
  AIRLOCK_CHECK(f.boolean(4, "stdout_truncated", m.stdout_truncated));
  AIRLOCK_CHECK(f.boolean(5, "stderr_truncated", m.stderr_truncated));
  AIRLOCK_CHECK(f.u64(6, "stdout_bytes", m.stdout_bytes));
  AIRLOCK_CHECK(f.u64(7, "stderr_bytes", m.stderr_bytes));
  AIRLOCK_CHECK(f.u64(8, "wall_us", m.wall_us));
  AIRLOCK_CHECK(f.u64(9, "user_us", m.user_us));
  AIRLOCK_CHECK(f.u64(10, "sys_us", m.sys_us));
  AIRLOCK_CHECK(f.u64(11, "max_rss_kb", m.max_rss_kb));
  AIRLOCK_CHECK(f.u64(12, "control_bytes", m.control_bytes));
  AIRLOCK_CHECK(f.boolean(13, "control_truncated", m.control_truncated));
  AIRLOCK_CHECK(f.u64(14, "oom_kills", m.oom_kills));
  return m;
}

Result<ErrorMsg> decodeError(std::string_view payload) {
  Fields f("Error");
  AIRLOCK_CHECK(f.parse(payload));
  ErrorMsg m;
  AIRLOCK_CHECK(f.i32(1, "errnum", m.errnum));
  AIRLOCK_CHECK(f.text(2, "stage", m.stage, true));
  AIRLOCK_CHECK(f.bytes(3, "message", m.message));
  return m;
}

Result<FileWrite> decodeFileWrite(std::string_view payload) {
  Fields f("FileWrite");
  AIRLOCK_CHECK(f.parse(payload));
  FileWrite m;
  AIRLOCK_CHECK(f.path(1, "path", m.path, true));
  AIRLOCK_CHECK(f.u32(2, "mode", m.mode));
  if (m.mode > 07777)
    return f.failField(2, "mode", "mode " + std::to_string(m.mode) + " has bits outside 07777");
  AIRLOCK_CHECK(f.bytes(3, "data", m.data, false, kMaxChunk));
  AIRLOCK_CHECK(f.boolean(4, "first", m.first));
  AIRLOCK_CHECK(f.boolean(5, "last", m.last));
  return m;
}

Result<FileRead> decodeFileRead(std::string_view payload) {
  Fields f("FileRead");
  AIRLOCK_CHECK(f.parse(payload));
  FileRead m;
  AIRLOCK_CHECK(f.path(1, "path", m.path, true));
  AIRLOCK_CHECK(f.u64(2, "max_bytes", m.max_bytes));
  return m;
}

Result<FileData> decodeFileData(std::string_view payload) {
  Fields f("FileData");
  AIRLOCK_CHECK(f.parse(payload));
  FileData m;
  AIRLOCK_CHECK(f.bytes(1, "data", m.data, false, kMaxChunk));
  AIRLOCK_CHECK(f.boolean(2, "last", m.last));
  AIRLOCK_CHECK(f.u64(3, "size", m.size));
  return m;
}

Result<Started> decodeStarted(std::string_view payload) {
  Fields f("Started");
  AIRLOCK_CHECK(f.parse(payload));
  Started m;
  AIRLOCK_CHECK(f.u32(1, "pid", m.pid, true));
  if (m.pid == 0) return f.failField(1, "pid", "pid 0, expected a process id");
  return m;
}

Result<Reattached> decodeReattached(std::string_view payload) {
  Fields f("Reattached");
  AIRLOCK_CHECK(f.parse(payload));
  Reattached m;
  AIRLOCK_CHECK(f.u32(1, "last_request_id", m.last_request_id));
  auto ended = f.all(2);
  if (ended.size() > kMaxListItems)
    return f.failField(2, "ended", "more than " + std::to_string(kMaxListItems) + " items");
  for (size_t i = 0; i < ended.size(); ++i) {
    std::string item = "item " + std::to_string(i) + ": ";
    if (ended[i].size() != kEndedExecutionSize)
      return f.failField(2, "ended",
                         item + std::to_string(ended[i].size()) + " bytes, expected " +
                             std::to_string(kEndedExecutionSize));
    EndedExecution e;
    e.request_id = getU32(ended[i], 0);
    e.pid = getU32(ended[i], 4);
    e.exit_code = static_cast<int32_t>(getU32(ended[i], 8));
    e.signal = static_cast<int32_t>(getU32(ended[i], 12));
    uint32_t flags = getU32(ended[i], 16);
    if (e.request_id == 0 || e.request_id > m.last_request_id)
      return f.failField(2, "ended",
                         item + "request id " + std::to_string(e.request_id) +
                             " is not one the old supervisor used (1.." +
                             std::to_string(m.last_request_id) + ")");
    if (e.signal < 0 || e.signal > 64)
      return f.failField(2, "ended", item + "signal " + std::to_string(e.signal) + " out of 0..64");
    if ((flags & ~kEndedCodeContext) != 0)
      return f.failField(2, "ended", item + "unknown flags " + std::to_string(flags));
    e.code_context = (flags & kEndedCodeContext) != 0;
    m.ended.push_back(e);
  }
  AIRLOCK_CHECK(f.u32(3, "features", m.features));
  auto live = f.all(4);
  if (live.size() > kMaxListItems)
    return f.failField(4, "live", "more than " + std::to_string(kMaxListItems) + " items");
  for (size_t i = 0; i < live.size(); ++i) {
    Fields e("Reattached: field 'live' (tag 4): item " + std::to_string(i));
    AIRLOCK_CHECK(e.parse(live[i]));
    LiveExecution x;
    AIRLOCK_CHECK(e.u32(1, "request_id", x.request_id, true));
    if (x.request_id == 0 || x.request_id > m.last_request_id)
      return e.failField(1, "request_id",
                         "request id " + std::to_string(x.request_id) +
                             " is not one the old supervisor used (1.." +
                             std::to_string(m.last_request_id) + ")");
    AIRLOCK_CHECK(e.u32(2, "pid", x.pid));
    uint32_t flags = 0;
    AIRLOCK_CHECK(e.u32(3, "flags", flags));
    if ((flags & ~(kLiveCodeContext | kLiveExited)) != 0)
      return e.failField(3, "flags", "unknown flags " + std::to_string(flags));
    x.code_context = (flags & kLiveCodeContext) != 0;
    x.exited = (flags & kLiveExited) != 0;
    AIRLOCK_CHECK(e.note(4, x.note));
    AIRLOCK_CHECK(e.u64(5, "held_bytes", x.held_bytes));
    AIRLOCK_CHECK(e.u64(6, "dropped_bytes", x.dropped_bytes));
    m.live.push_back(std::move(x));
  }
  return m;
}

Result<Reattach> decodeReattach(std::string_view payload) {
  Fields f("Reattach");
  AIRLOCK_CHECK(f.parse(payload));
  Reattach m;
  AIRLOCK_CHECK(f.boolean(1, "keep_sessions", m.keep_sessions));
  return m;
}

Result<Note> decodeNote(std::string_view payload) {
  Fields f("Note");
  AIRLOCK_CHECK(f.parse(payload));
  Note m;
  AIRLOCK_CHECK(f.note(1, m.note));
  return m;
}

Result<FileList> decodeFileList(std::string_view payload) {
  Fields f("FileList");
  AIRLOCK_CHECK(f.parse(payload));
  FileList m;
  AIRLOCK_CHECK(f.path(1, "path", m.path, true));
  return m;
}

Result<FileStat> decodeFileStat(std::string_view payload) {
  Fields f("FileStat");
  AIRLOCK_CHECK(f.parse(payload));
  FileStat m;
  AIRLOCK_CHECK(f.path(1, "path", m.path, true));
  return m;
}

Result<FileEntries> decodeFileEntries(std::string_view payload) {
  Fields f("FileEntries");
  AIRLOCK_CHECK(f.parse(payload));
  FileEntries m;
  auto items = f.all(1);
  if (items.size() > kMaxListItems)
    return f.failField(1, "entry", "more than " + std::to_string(kMaxListItems) + " items");
  m.entries.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    Fields e("FileEntries: field 'entry' (tag 1): item " + std::to_string(i));
    AIRLOCK_CHECK(e.parse(items[i]));
    FileEntry entry;
    AIRLOCK_CHECK(e.text(1, "name", entry.name, true));
    if (entry.name.empty()) return e.failField(1, "name", "empty");
    if (entry.name.size() >= PATH_MAX)
      return e.failField(
          1, "name",
          std::to_string(entry.name.size()) + " bytes, at most " + std::to_string(PATH_MAX - 1));
    uint8_t type = 0;
    AIRLOCK_CHECK(e.u8(2, "type", type, true));
    if (type < static_cast<uint8_t>(FileType::kFile) ||
        type > static_cast<uint8_t>(FileType::kOther))
      return e.failField(2, "type", "type " + std::to_string(type) + " outside 1..4");
    entry.type = static_cast<FileType>(type);
    AIRLOCK_CHECK(e.u64(3, "size", entry.size));
    AIRLOCK_CHECK(e.u32(4, "mode", entry.mode));
    if (entry.mode > 07777)
      return e.failField(4, "mode",
                         "mode " + std::to_string(entry.mode) + " has bits outside 07777");
    uint64_t mtime = 0;
    AIRLOCK_CHECK(e.u64(5, "mtime_ms", mtime));
    entry.mtime_ms = static_cast<int64_t>(mtime);
    m.entries.push_back(std::move(entry));
  }
  AIRLOCK_CHECK(f.boolean(2, "last", m.last));
  return m;
}

Result<FileMkdir> decodeFileMkdir(std::string_view payload) {
  Fields f("FileMkdir");
  AIRLOCK_CHECK(f.parse(payload));
  FileMkdir m;
  AIRLOCK_CHECK(f.path(1, "path", m.path, true));
  AIRLOCK_CHECK(f.boolean(2, "parents", m.parents));
  AIRLOCK_CHECK(f.u32(3, "mode", m.mode));
  if (m.mode > 07777)
    return f.failField(3, "mode", "mode " + std::to_string(m.mode) + " has bits outside 07777");
  return m;
}

Result<FileRemove> decodeFileRemove(std::string_view payload) {
  Fields f("FileRemove");
  AIRLOCK_CHECK(f.parse(payload));
  FileRemove m;
  AIRLOCK_CHECK(f.path(1, "path", m.path, true));
  AIRLOCK_CHECK(f.boolean(2, "recursive", m.recursive));
  return m;
}

Result<FileRename> decodeFileRename(std::string_view payload) {
  Fields f("FileRename");
  AIRLOCK_CHECK(f.parse(payload));
  FileRename m;
  AIRLOCK_CHECK(f.path(1, "from", m.from, true));
  AIRLOCK_CHECK(f.path(2, "to", m.to, true));
  return m;
}

// ---- FrameReader ----

void FrameReader::feed(std::string_view bytes) {
  if (poisoned_) return;
  // Drop consumed bytes before growing, so the buffer stays near one frame.
  if (pos_ > 0 && (pos_ >= buf_.size() / 2 || pos_ > 64 * 1024)) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(bytes);
}

Result<std::optional<std::pair<FrameHeader, std::string>>> FrameReader::next() {
  if (poisoned_) return fail("agent channel: stream is corrupt after an earlier bad frame header");
  std::string_view avail(buf_.data() + pos_, buf_.size() - pos_);
  if (avail.size() < kHeaderSize) return std::nullopt;
  auto h = decodeHeader(avail.substr(0, kHeaderSize));
  if (!h) {
    poisoned_ = true;
    buf_.clear();
    pos_ = 0;
    return Unexpected(std::move(h.error()).wrap("agent channel"));
  }
  if (avail.size() - kHeaderSize < h->payload_len) return std::nullopt;
  std::string payload(avail.substr(kHeaderSize, h->payload_len));
  pos_ += kHeaderSize + h->payload_len;
  if (pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  }
  return std::make_optional(std::make_pair(*h, std::move(payload)));
}

}  // namespace airlock::protocol
