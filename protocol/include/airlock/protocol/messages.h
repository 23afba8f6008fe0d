// The agent channel: one framed, versioned byte stream between the supervisor and the
// airlock-agent that is PID 1 of each sandbox, whatever the backend (socketpair, stdio,
// virtio-serial).
//
// Trust: the agent side is hostile once sandboxed code has run, so the supervisor validates every
// frame (sizes, tags, counts) before use and never trusts a length it did not bound. The agent
// validates supervisor frames too, to fail loudly on bugs rather than misbehave.
//
// Wire format (all integers little-endian):
//   frame   := header payload
//   header  := u32 payload_len | u16 type | u16 flags | u32 request_id          (12 bytes)
//   payload := field*
//   field   := u16 tag | u32 len | len bytes
// A message is decoded from its fields by tag; unknown tags are skipped (forward compatible),
// a known tag with a wrong size, a missing required field or a payload over kMaxPayload is an
// error. Repeated tags build lists (argv, env).
//
// Type numbers are stable: never renumber, only append.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/result.h"

namespace airlock::protocol {

inline constexpr uint32_t kProtocolVersion = 1;
inline constexpr size_t kHeaderSize = 12;
// Large enough for a 256 KiB output or file chunk plus fields; small enough to bound memory.
inline constexpr uint32_t kMaxPayload = 1u << 20;
inline constexpr size_t kMaxChunk = 256 * 1024;
inline constexpr size_t kMaxListItems = 4096;  // argv/env/rlimit/path entries per message
// Control-pipe bytes relayed per execution; beyond it they are counted and dropped (a session
// driver lives as long as its sandbox, so this is a lifetime bound, not a per-message one).
inline constexpr uint64_t kMaxControlBytes = 1ull << 30;

enum class MsgType : uint16_t {
  kHello = 1,         // agent → supervisor, first frame: versions
  kConfigure = 2,     // supervisor → agent: how every execution is confined; answered by kOk
  kExec = 3,          // supervisor → agent: start a process; answered by kOutput*, kExited
  kStdin = 4,         // supervisor → agent: bytes for an execution's stdin (eof flag closes it)
  kSignal = 5,        // supervisor → agent: signal an execution's process group
  kOutput = 6,        // agent → supervisor: stdout/stderr bytes of an execution
  kExited = 7,        // agent → supervisor: an execution ended; all its processes are gone
  kError = 8,         // agent → supervisor: a request failed (request_id names it)
  kFileWrite = 9,     // supervisor → agent: write a file chunk; last chunk answered by kOk
  kFileRead = 10,     // supervisor → agent: read a file; answered by kFileData* (last flagged)
  kFileData = 11,     // agent → supervisor: a chunk of a file being read
  kShutdown = 12,     // supervisor → agent: kill everything and exit
  kOk = 13,           // agent → supervisor: the request with this id succeeded
  kStarted = 14,      // agent → supervisor: an Exec's process is running (its pid); before output
  kFileList = 15,     // supervisor → agent: list a directory; answered by kFileEntries*
  kFileStat = 16,     // supervisor → agent: lstat one path; answered by one kFileEntries
  kFileEntries = 17,  // agent → supervisor: directory entries (last flagged)
  kFileMkdir = 18,    // supervisor → agent: create a directory; answered by kOk
  kFileRemove = 19,   // supervisor → agent: remove a file or tree; answered by kOk
  kFileRename = 20,   // supervisor → agent: rename within the sandbox; answered by kOk
  kReattach = 21,     // supervisor → agent: a new supervisor took over the channel
  kReattached = 22,  // agent → supervisor: answers Reattach: what the dead supervisor left behind
  kPortOpen = 23,  // supervisor → agent: connect to a port on the sandbox's loopback; kOk/kError
  kPortData = 24,  // both ways: bytes of a port stream (eof flag: that side will send no more)
  kPortCredit = 25,  // both ways: the receiver consumed bytes; the sender may send that many more
  kPortClose = 26,   // both ways: the stream is over (supervisor: abort; agent: ended or failed)
  kNote = 27,    // supervisor → agent: what an execution is, for the next supervisor; no answer
  kResume = 28,  // supervisor → agent: send what was held for the dead one; answered by kOk
  // 29..63 reserved for sessions and stats.
};

const char* msgTypeName(MsgType t);

struct FrameHeader {
  uint32_t payload_len = 0;
  MsgType type{};
  uint16_t flags = 0;
  uint32_t request_id = 0;
};

// What an agent can do beyond protocol_version 1, announced in Hello and Reattached. An agent
// built before a feature says nothing of it (unknown fields are skipped), and the supervisor
// must not send it the feature's messages: an unknown message type closes the channel.
inline constexpr uint32_t kFeatureKeepSessions = 1;  // Note, Resume, Reattach.keep_sessions
inline constexpr uint32_t kAgentFeatures = kFeatureKeepSessions;
// An execution's note (Exec.note, Note): the supervisor's own description of it, kept by the
// agent and handed back to the next supervisor in Reattached.live.
inline constexpr size_t kMaxNote = 4096;
// Frames of live executions the agent holds while no supervisor reads them, all executions
// together; Output beyond it is dropped and counted per execution (Exited, Started and Error
// frames are always kept).
inline constexpr size_t kMaxHeldBytes = 16u << 20;

struct Hello {
  uint32_t protocol_version = kProtocolVersion;
  std::string agent_version;
  uint32_t agent_pid = 0;  // pid as the agent sees itself (1 in a pid namespace)
  uint32_t features = 0;   // kFeature* bits
};

struct Rlimit {
  uint32_t resource = 0;  // RLIMIT_*
  uint64_t soft = 0;
  uint64_t hard = 0;
};

struct Configure {
  uint32_t uid = 1000;  // credentials of every process the agent starts
  uint32_t gid = 1000;
  uint64_t keep_caps = 0;   // bitmask of capabilities kept (0: none)
  std::string seccomp_bpf;  // raw struct sock_filter array, installed last
  std::vector<Rlimit> rlimits;
  std::vector<std::string> writable_paths;  // Landlock: the only paths writable
  bool landlock = true;                     // apply Landlock when the kernel has it
  uint64_t max_output_bytes_total = 0;      // unused by v1 agents; reserved
};

enum class ExecKillScope : uint8_t { kAll = 0, kSession = 1 };

struct Exec {
  std::vector<std::string> argv;  // argv[0] absolute
  std::vector<std::string> env;   // complete environment, "K=V"
  std::string cwd = "/home/user";
  uint64_t timeout_ms = 0;  // 0: none (the supervisor still has its own deadline)
  uint64_t stdout_cap = 0;  // bytes forwarded per stream; the rest is counted, dropped
  uint64_t stderr_cap = 0;
  bool stdin_pipe = false;  // false: stdin is /dev/null
  // The child gets fd 3, the write end of a pipe relayed as Output stream kControl (language
  // session drivers report results there). Before relaying control bytes the agent relays what
  // is already in the execution's stdout and stderr pipes, so a driver that flushes its output
  // before reporting "done" keeps the order. Control bytes are not capped by stdout_cap.
  bool control_pipe = false;
  // Which processes die with the execution: kAll (one execution per sandbox: everything but
  // the agent) or kSession (sandboxes running many executions: the execution's own session).
  ExecKillScope kill_scope = ExecKillScope::kAll;
  std::string note;  // <= kMaxNote; opaque to the agent (kFeatureKeepSessions)
};

struct Stdin {
  std::string data;
  bool eof = false;
  // As a Note, sent with the bytes it describes (a code run's request): one frame, not two.
  std::optional<std::string> note;  // <= kMaxNote (kFeatureKeepSessions)
};

struct Signal {
  int32_t signo = 0;
};

enum class Stream : uint8_t { kStdout = 1, kStderr = 2, kControl = 3 };

struct Started {
  uint32_t pid = 0;  // the execution's process, as the sandbox sees it
};

struct Output {
  Stream stream = Stream::kStdout;
  std::string data;
};

struct Exited {
  int32_t exit_code = -1;  // valid when signal == 0
  int32_t signal = 0;      // terminating signal, or 0
  bool timed_out = false;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  uint64_t stdout_bytes = 0;  // produced, including dropped bytes
  uint64_t stderr_bytes = 0;
  uint64_t wall_us = 0;
  uint64_t user_us = 0;
  uint64_t sys_us = 0;
  uint64_t max_rss_kb = 0;
  uint64_t control_bytes = 0;      // produced on the control pipe, including dropped bytes
  bool control_truncated = false;  // the control pipe passed kMaxControlBytes
  // OOM kills the sandbox's own kernel made while the execution ran (a microVM's guest, whose
  // kills the host's cgroup never counts); 0 where the agent shares the host's kernel.
  uint64_t oom_kills = 0;
};

struct ErrorMsg {
  int32_t errnum = 0;
  std::string stage;    // "exec", "setuid", "seccomp", "file_write", ...
  std::string message;  // human-readable, names the subject
};

struct FileWrite {
  std::string path;  // absolute sandbox path
  uint32_t mode = 0644;
  std::string data;
  bool first = true;  // create/truncate on the first chunk, append afterwards
  bool last = true;
};

struct FileRead {
  std::string path;
  uint64_t max_bytes = 0;  // refuse files larger than this (0: no limit)
};

struct FileData {
  std::string data;
  bool last = true;
  uint64_t size = 0;  // total file size, on the first chunk
};

enum class FileType : uint8_t { kFile = 1, kDir = 2, kSymlink = 3, kOther = 4 };

struct FileList {
  std::string path;  // absolute sandbox path of a directory
};

struct FileStat {
  std::string path;  // absolute sandbox path; symlinks are not followed
};

struct FileEntry {
  std::string name;  // base name (FileList) or the path asked for (FileStat)
  FileType type = FileType::kOther;
  uint64_t size = 0;
  uint32_t mode = 0;  // permission bits (07777)
  int64_t mtime_ms = 0;
};

struct FileEntries {
  std::vector<FileEntry> entries;  // at most kMaxListItems per frame
  bool last = true;
};

// Payload bytes one entry adds to a FileEntries frame; a sender starts a new frame before the
// payload would pass kMaxFileEntriesPayload (long names: 4096 entries may not fit kMaxPayload).
size_t encodedEntrySize(const FileEntry& e);
inline constexpr size_t kMaxFileEntriesPayload = 512 * 1024;

struct FileMkdir {
  std::string path;
  bool parents = false;  // like mkdir -p: missing parents are created, existing is fine
  uint32_t mode = 0755;
};

struct FileRemove {
  std::string path;
  bool recursive = false;  // directories and their contents (never following symlinks)
};

struct FileRename {
  std::string from;
  std::string to;
};

struct Shutdown {};
struct Reattach {
  // The new supervisor takes over live executions: the agent keeps them, reports them in
  // Reattached.live and holds their frames until Resume. Without it (a supervisor built before
  // kFeatureKeepSessions) the agent ends them and reports them in Reattached.ended.
  bool keep_sessions = false;
};

// An execution that outlived the old supervisor (Reattach.keep_sessions).
struct LiveExecution {
  uint32_t request_id = 0;     // the dead supervisor's Exec request id
  uint32_t pid = 0;            // as the sandbox saw it
  bool code_context = false;   // it has a control pipe (a language session driver)
  bool exited = false;         // it ended while no supervisor was there; its Exited is held
  std::string note;            // its latest note (Exec.note or Note), <= kMaxNote
  uint64_t held_bytes = 0;     // bytes of its frames held for Resume
  uint64_t dropped_bytes = 0;  // Output bytes dropped because the held frames reached the bound
};

struct Note {
  std::string note;  // <= kMaxNote
};
struct Resume {};

// One execution that was running when the old supervisor died, ended by the agent then.
struct EndedExecution {
  uint32_t request_id = 0;    // the dead supervisor's Exec request id
  uint32_t pid = 0;           // as the sandbox saw it
  int32_t exit_code = -1;     // valid when signal == 0
  int32_t signal = 0;         // SIGKILL when the agent killed it
  bool code_context = false;  // it had a control pipe (a language session driver)
};

struct Reattached {
  // The highest request id the dead supervisor used: the new one continues above it, so ids
  // that clients still hold (command ids) never name a different execution.
  uint32_t last_request_id = 0;
  std::vector<EndedExecution> ended;  // at most kMaxListItems
  uint32_t features = 0;              // the agent's kFeature* bits
  std::vector<LiveExecution> live;    // at most kMaxListItems
};
struct Ok {};

// ---- port streams (docs/protocol.md, "Ports") ----
// A TCP connection the agent makes to 127.0.0.1:port (or [::1]:port) inside the sandbox's own
// network namespace, relayed over the channel under the PortOpen's request id. Each direction
// has a window of kPortWindow bytes: a side sends PortData only while the peer's credit lasts,
// and the receiver returns credit (PortCredit) as it hands bytes on, so neither side ever
// buffers more than one window per stream.
inline constexpr uint32_t kPortWindow = 256 * 1024;
inline constexpr size_t kMaxPortStreams = 64;  // open at once per sandbox (the agent refuses more)

struct PortOpen {
  uint32_t port = 0;  // 1..65535
};

struct PortData {
  std::string data;  // <= kMaxChunk
  bool eof = false;  // after data: the sender's direction is closed (half-close)
};

struct PortCredit {
  uint32_t bytes = 0;  // 1..kPortWindow
};

struct PortClose {
  int32_t errnum = 0;  // agent → supervisor: why the stream ended (0: both directions closed)
};

// Encoding appends one whole frame (header + payload) to out.
void encode(std::string& out, uint32_t request_id, const Hello& m);
void encode(std::string& out, uint32_t request_id, const Configure& m);
void encode(std::string& out, uint32_t request_id, const Exec& m);
void encode(std::string& out, uint32_t request_id, const Stdin& m);
void encode(std::string& out, uint32_t request_id, const Signal& m);
void encode(std::string& out, uint32_t request_id, const Output& m);
void encode(std::string& out, uint32_t request_id, const Exited& m);
void encode(std::string& out, uint32_t request_id, const ErrorMsg& m);
void encode(std::string& out, uint32_t request_id, const FileWrite& m);
void encode(std::string& out, uint32_t request_id, const FileRead& m);
void encode(std::string& out, uint32_t request_id, const FileData& m);
void encode(std::string& out, uint32_t request_id, const Shutdown& m);
void encode(std::string& out, uint32_t request_id, const Reattach& m);
void encode(std::string& out, uint32_t request_id, const Reattached& m);
void encode(std::string& out, uint32_t request_id, const Ok& m);
void encode(std::string& out, uint32_t request_id, const Started& m);
void encode(std::string& out, uint32_t request_id, const FileList& m);
void encode(std::string& out, uint32_t request_id, const FileStat& m);
void encode(std::string& out, uint32_t request_id, const FileEntries& m);
void encode(std::string& out, uint32_t request_id, const FileMkdir& m);
void encode(std::string& out, uint32_t request_id, const FileRemove& m);
void encode(std::string& out, uint32_t request_id, const FileRename& m);
void encode(std::string& out, uint32_t request_id, const PortOpen& m);
void encode(std::string& out, uint32_t request_id, const PortData& m);
void encode(std::string& out, uint32_t request_id, const PortCredit& m);
void encode(std::string& out, uint32_t request_id, const PortClose& m);
void encode(std::string& out, uint32_t request_id, const Note& m);
void encode(std::string& out, uint32_t request_id, const Resume& m);

// Parses a 12-byte header; rejects unknown types and payloads over kMaxPayload.
Result<FrameHeader> decodeHeader(std::string_view bytes);

// Decoding checks the payload against the message's schema. Errors name the message type, the
// field tag and what was wrong ("Exec: field 'argv' (tag 1): 0 items, need at least 1").
Result<Hello> decodeHello(std::string_view payload);
Result<Configure> decodeConfigure(std::string_view payload);
Result<Exec> decodeExec(std::string_view payload);
Result<Stdin> decodeStdin(std::string_view payload);
Result<Signal> decodeSignal(std::string_view payload);
Result<Output> decodeOutput(std::string_view payload);
Result<Exited> decodeExited(std::string_view payload);
Result<ErrorMsg> decodeError(std::string_view payload);
Result<FileWrite> decodeFileWrite(std::string_view payload);
Result<FileRead> decodeFileRead(std::string_view payload);
Result<FileData> decodeFileData(std::string_view payload);
Result<Started> decodeStarted(std::string_view payload);
Result<FileList> decodeFileList(std::string_view payload);
Result<FileStat> decodeFileStat(std::string_view payload);
Result<FileEntries> decodeFileEntries(std::string_view payload);
Result<FileMkdir> decodeFileMkdir(std::string_view payload);
Result<FileRemove> decodeFileRemove(std::string_view payload);
Result<FileRename> decodeFileRename(std::string_view payload);
Result<Reattached> decodeReattached(std::string_view payload);
Result<PortOpen> decodePortOpen(std::string_view payload);
Result<PortData> decodePortData(std::string_view payload);
Result<PortCredit> decodePortCredit(std::string_view payload);
Result<PortClose> decodePortClose(std::string_view payload);
Result<Reattach> decodeReattach(std::string_view payload);
Result<Note> decodeNote(std::string_view payload);

// Accumulates bytes read from the channel and yields whole frames. Never buffers more than
// one frame beyond kMaxPayload; a bad header poisons the reader (the channel must be closed).
class FrameReader {
 public:
  void feed(std::string_view bytes);
  // A whole frame is available: returns its header and payload; std::nullopt when more bytes
  // are needed; an error when the stream is corrupt.
  Result<std::optional<std::pair<FrameHeader, std::string>>> next();
  size_t buffered() const { return buf_.size() - pos_; }

 private:
  std::string buf_;
  size_t pos_ = 0;
  bool poisoned_ = false;
};

}  // namespace airlock::protocol
