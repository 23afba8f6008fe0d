// The supervisor service: what `airlock serve` can do, independent of HTTP.
//
// supervisor/api/ turns HTTP requests into these calls and their answers into responses
// (docs/api.md); supervisor/service/ implements them on live sandboxes. Keeping the boundary a
// plain C++ interface lets the API layer be tested against a fake and the service be tested
// without sockets.
//
// Threading: every method may be called from any thread at once. Methods that wait (create,
// streams) block only their caller.
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace airlock::sandbox {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Every failure the API can report. Each maps to one HTTP status (docs/api.md).
enum class ErrorCode {
  kBadRequest,        // 400
  kUnauthorized,      // 401
  kForbidden,         // 403
  kDeniedByReview,    // 403: the review chain or an operator refused (docs/api.md, "Review")
  kNotFound,          // 404
  kMethodNotAllowed,  // 405
  kConflict,          // 409
  kPayloadTooLarge,   // 413
  kTooManyRequests,   // 429
  kInternal,          // 500
  kBadGateway,        // 502: a sandbox port proxied to (docs/api.md, "Ports") did not answer
  kUnavailable,       // 503
};

struct ServiceError {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;  // names the field, value or resource that was wrong
  Json review;          // kDeniedByReview: the verdict object, sent as error.review
};

template <typename T = void>
using SResult = std::expected<T, ServiceError>;

inline std::unexpected<ServiceError> serviceError(ErrorCode code, std::string message) {
  return std::unexpected(ServiceError{code, std::move(message)});
}

int httpStatus(ErrorCode code);
const char* errorCodeName(ErrorCode code);  // "not_found", ...

// Who is asking. The API layer resolves it from the listener and the bearer token.
struct Caller {
  std::string tenant = "default";
};

class PortStream;  // agent/port_stream.h

// What a port link's token opens (docs/api.md, "Ports").
struct PortLinkTarget {
  Caller caller;  // the tenant that made the link
  std::string sandbox;
  uint16_t port = 0;
};

// ---- sandboxes ----

// A host directory shown inside a sandbox (docs/transfer.md, "Mounts").
struct MountSpec {
  std::string source;     // "hostdir:ROOT" or "hostdir:ROOT/sub/dir"
  std::string path;       // where the sandbox sees it, under /mnt; "": /mnt/ROOT[/sub/dir]
  bool writable = false;  // only for a root in [transfer] writable_roots
};

struct SandboxSpec {
  std::string profile;   // "": the policy's default profile
  std::string language;  // "": the profile's first language
  // "": the profile's isolation; else it or one of the profile's isolation_choices.
  std::string isolation;
  std::string name;  // "": anonymous; else unique per tenant, [a-zA-Z0-9._-]{1,63}
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> metadata;
  std::optional<int64_t> keep_alive_s;
  std::optional<int64_t> lifetime_s;
  bool persistent = false;
  std::vector<MountSpec> mounts;  // never from the warm pool
};

struct SandboxInfo {
  std::string id;
  std::string node;  // the fleet node holding it (policy server.node); "" on a single host
  std::string name;
  std::string tenant;
  std::string profile;
  std::string language;
  std::string isolation;  // the backend it runs on
  std::string state;      // "running", "stopping", "stopped"
  std::map<std::string, std::string> metadata;
  bool persistent = false;
  int64_t created_at = 0;  // Unix ms
  int64_t last_active_at = 0;
  int64_t keep_alive_s = 0;
  int64_t idle_expires_at = 0;
  int64_t lifetime_s = 0;
  int64_t ends_at = 0;
  int commands_running = 0;
  int contexts = 0;
  std::vector<MountSpec> mounts;  // as resolved: path filled in
  // What runs now, for the live view: null, or {"kind": "command"|"code", "id", "started_at"}
  // (the longest-running one).
  Json current_execution;
  int64_t review_denials = 0;  // executions the review chain refused since the sandbox started
};

// How much more a node can take, as a fleet's proxy weighs it (docs/deploy.md). `free` is the
// number of sandboxes of the default profile that still fit: under server.max_sandboxes and in
// the memory the kernel reports available.
struct Capacity {
  std::string node;
  bool draining = false;
  uint32_t max_sandboxes = 0;
  uint32_t sandboxes = 0;  // live and being created
  uint64_t memory_available_mb = 0;
  uint64_t sandbox_memory_mb = 0;  // the default profile's limit: the unit of `free`
  uint32_t free = 0;

  // `free` from the rest: what max_sandboxes leaves, and what the available memory holds at
  // sandbox_memory_mb each, whichever is less.
  void computeFree();
  // The agent-check answer HAProxy reads: "up ready P%" (P% of a server weight of 1 is `free`,
  // capped at HAProxy's largest weight, 256), "drain" when full or draining.
  std::string agentCheckLine() const;
};

// A persistent workspace: the files of `persistent: true` sandboxes of one name, kept on disk.
struct WorkspaceInfo {
  std::string name;
  uint64_t size_bytes = 0;  // the quota, fixed when the workspace was made
  uint64_t used_bytes = 0;  // disk space it takes
  int64_t modified_at = 0;  // Unix ms
  bool in_use = false;      // a running sandbox has it mounted
};

// ---- streams of events (commands, code) ----

// A pull stream of NDJSON events, already in their wire shape (docs/api.md). Destroying a stream
// before its last event means the client went away: a foreground command or a code run is then
// stopped; an attached background command keeps running.
class EventStream {
 public:
  virtual ~EventStream() = default;
  // The next event, waiting until `deadline`. nullopt: nothing yet (deadline passed) or the
  // stream has ended (then done() is true).
  virtual std::optional<Json> next(Clock::time_point deadline) = 0;
  virtual bool done() const = 0;
};

// ---- commands ----

struct CommandSpec {
  std::vector<std::string> argv;  // argv[0] looked up on PATH when not absolute
  std::string cmd;                // or a /bin/sh -c string (exactly one of argv, cmd)
  std::map<std::string, std::string> env;
  std::string cwd;  // "": /home/user
  std::string stdin_data;
  std::optional<double> timeout_s;  // capped by the profile's timeout_s
  bool background = false;
};

struct CommandInfo {
  std::string command_id;
  std::vector<std::string> argv;
  int pid = 0;        // inside the sandbox
  std::string state;  // "running", "exited"
  bool background = false;
  int64_t started_at = 0;  // Unix ms
  std::optional<int> exit_code;
  std::optional<int> signal;
  // Why it ended when not on its own: "supervisor_restart" for a command that was running when
  // its supervisor died (the sandbox was adopted by the next one; its output is lost).
  std::string ended_by;
};

// ---- code contexts ----

struct CodeSpec {
  std::string code;
  std::string language;    // "": the sandbox's language
  std::string context_id;  // "": the default context of the language
  std::optional<double> timeout_s;
  // Set for this run only (os.environ in Python, exported in bash) and restored after it.
  std::map<std::string, std::string> env;
};

struct ContextInfo {
  std::string context_id;
  std::string language;
  std::string state;  // "idle", "busy", "starting", "dead"
  int64_t created_at = 0;
  int64_t runs = 0;
  std::string cwd;  // the working directory the driver started in; "": the sandbox's default
};

// ---- files ----

struct FileEntry {
  std::string name;  // base name (list) or the absolute path (stat)
  std::string type;  // "file", "dir", "symlink", "other"
  uint64_t size = 0;
  uint32_t mode = 0;  // permission bits
  int64_t mtime_ms = 0;
};

// ---- one-shot programs (POST /v1/runs) ----

// A file copied into the sandbox before the program runs.
struct ProgramFile {
  std::string path;     // sandbox path; relative paths are under /home/user
  std::string content;  // its bytes
};

// What `airlock run` asks, as a request: one program in a sandbox of its own.
// A run's transfer (docs/transfer.md): a URL or hostdir: location, and the sandbox directory
// unpacked into before the program (in) or packed after it (out).
struct ProgramTransfer {
  std::string location;
  std::string path;
};

struct ProgramSpec {
  std::string profile;      // "": the policy's default profile
  std::string language;     // "": from script_name's extension (required for inline code)
  std::string code;         // the program text: inline code, or the script file's content
  std::string script_name;  // "": `code` is inline; else the program is a file of this base name
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  std::optional<uint32_t> timeout_s;      // at most the profile's limits.timeout_s
  std::optional<uint64_t> memory_mb;      // at most the profile's limits.memory_mb
  std::optional<std::string> stdin_data;  // nullopt: the program's stdin is empty (/dev/null)
  std::vector<ProgramFile> files_in;
  std::vector<std::string> files_out;  // sandbox paths, carried back in the result event
  std::vector<ProgramTransfer> transfers_in, transfers_out;
};

// ---- transfers ----

// POST /v1/sandboxes/{id}/transfers (docs/transfer.md).
struct TransferSpec {
  bool in = true;
  std::string location;  // "source" (in) or "dest" (out): a URL, hostdir:NAME/path
  std::string path;      // the sandbox directory unpacked into or packed
};

// Pulls request-body bytes: returns bytes read into buf (0 at the end), or an error.
using ByteSource = std::function<SResult<size_t>(char* buf, size_t cap)>;
// Receives file bytes as they are read; return false to stop (client gone).
using ByteSink = std::function<bool(std::string_view chunk)>;

class Service {
 public:
  virtual ~Service() = default;

  virtual SResult<SandboxInfo> createSandbox(const Caller& caller, const SandboxSpec& spec) = 0;
  // Only the caller's own sandboxes, each matching every metadata key/value given.
  virtual SResult<std::vector<SandboxInfo>> listSandboxes(
      const Caller& caller, const std::map<std::string, std::string>& metadata) = 0;
  virtual SResult<SandboxInfo> getSandbox(const Caller& caller, const std::string& sb) = 0;
  // The sandbox's resource use now: CPU, memory, pids, disk (docs/api.md, "Metrics").
  virtual SResult<Json> sandboxMetrics(const Caller& caller, const std::string& sb) {
    (void)caller;
    return serviceError(ErrorCode::kNotFound, "no sandbox '" + sb + "'");
  }
  virtual SResult<> destroySandbox(const Caller& caller, const std::string& sb) = 0;
  // Resets the idle timer and changes keep-alive and lifetime within the profile's maxima.
  virtual SResult<SandboxInfo> keepAlive(const Caller& caller, const std::string& sb,
                                         std::optional<int64_t> keep_alive_s,
                                         std::optional<int64_t> lifetime_s) = 0;

  // The sandbox's kernel-enforced network policy: {"mode", "rules"} (docs/api.md "Network").
  // A service or sandbox without enforcement answers 409.
  virtual SResult<Json> getNetwork(const Caller& caller, const std::string& sb) {
    (void)caller;
    return serviceError(ErrorCode::kConflict,
                        "sandbox '" + sb + "': this service enforces no network rules");
  }
  // Replaces the rules (the mode stays the profile's); 400 names a bad rule.
  virtual SResult<Json> setNetwork(const Caller& caller, const std::string& sb,
                                   const std::vector<std::string>& rules) {
    (void)caller;
    (void)rules;
    return serviceError(ErrorCode::kConflict,
                        "sandbox '" + sb + "': this service enforces no network rules");
  }

  // Foreground: a stream of start, stdout/stderr, exit. Background: the stream holds only the
  // start event and has ended; the command keeps running.
  virtual SResult<std::unique_ptr<EventStream>> runCommand(const Caller& caller,
                                                           const std::string& sb,
                                                           const CommandSpec& spec) = 0;
  virtual SResult<std::vector<CommandInfo>> listCommands(const Caller& caller,
                                                         const std::string& sb) = 0;
  // Buffered output so far, then live events until exit.
  virtual SResult<std::unique_ptr<EventStream>> attachCommand(const Caller& caller,
                                                              const std::string& sb,
                                                              const std::string& command_id) = 0;
  virtual SResult<> sendStdin(const Caller& caller, const std::string& sb,
                              const std::string& command_id, std::string data, bool eof) = 0;
  virtual SResult<> signalCommand(const Caller& caller, const std::string& sb,
                                  const std::string& command_id, int signo) = 0;

  // `cwd`: the context's working directory (absolute); "": the home directory.
  virtual SResult<ContextInfo> createContext(const Caller& caller, const std::string& sb,
                                             const std::string& language,
                                             const std::string& cwd = {}) = 0;
  virtual SResult<std::vector<ContextInfo>> listContexts(const Caller& caller,
                                                         const std::string& sb) = 0;
  virtual SResult<ContextInfo> restartContext(const Caller& caller, const std::string& sb,
                                              const std::string& context_id) = 0;
  virtual SResult<> destroyContext(const Caller& caller, const std::string& sb,
                                   const std::string& context_id) = 0;
  // Events: stdout, stderr, result, display, error, end.
  virtual SResult<std::unique_ptr<EventStream>> runCode(const Caller& caller, const std::string& sb,
                                                        const CodeSpec& spec) = 0;
  // The events of a run that was in flight when the supervisor died and that the next one took
  // over (`run_id` "last": the latest): a "supervisor_restart" event, then the run's own events
  // as for runCode, so far and then live.
  virtual SResult<std::unique_ptr<EventStream>> attachRun(const Caller& caller,
                                                          const std::string& sb,
                                                          const std::string& context_id,
                                                          const std::string& run_id) {
    (void)caller, (void)sb, (void)context_id, (void)run_id;
    return serviceError(ErrorCode::kNotFound, "this service keeps no runs across restarts");
  }

  virtual SResult<FileEntry> writeFile(const Caller& caller, const std::string& sb,
                                       const std::string& path, uint32_t mode,
                                       const ByteSource& source) = 0;
  // Calls `on_size` once with the file's size before the first chunk (so the API layer can
  // start its response), then `sink` with each chunk.
  virtual SResult<> readFile(const Caller& caller, const std::string& sb, const std::string& path,
                             const std::function<void(uint64_t size)>& on_size,
                             const ByteSink& sink) = 0;
  virtual SResult<std::vector<FileEntry>> listFiles(const Caller& caller, const std::string& sb,
                                                    const std::string& path) = 0;
  virtual SResult<FileEntry> statFile(const Caller& caller, const std::string& sb,
                                      const std::string& path) = 0;
  virtual SResult<> makeDirectory(const Caller& caller, const std::string& sb,
                                  const std::string& path, bool parents) = 0;
  virtual SResult<> removeFile(const Caller& caller, const std::string& sb, const std::string& path,
                               bool recursive) = 0;
  virtual SResult<> renameFile(const Caller& caller, const std::string& sb, const std::string& from,
                               const std::string& to) = 0;

  // A transfer through a transfer plugin: "progress" events ({"transfer_id", "bytes",
  // "rate_bps"}), then one "transfer" event with the final record (run_result.h,
  // transferJson). Destroying the stream before that event cancels the transfer.
  virtual SResult<std::unique_ptr<EventStream>> startTransfer(const Caller& caller,
                                                              const std::string& sb,
                                                              const TransferSpec& spec) {
    (void)caller;
    (void)spec;
    return serviceError(ErrorCode::kConflict, "sandbox '" + sb + "': no transfers here");
  }
  // The sandbox's transfers, running and done: {"transfers": [record...]}.
  virtual SResult<Json> listTransfers(const Caller& caller, const std::string& sb) {
    (void)caller;
    return serviceError(ErrorCode::kConflict, "sandbox '" + sb + "': no transfers here");
  }
  virtual SResult<> cancelTransfer(const Caller& caller, const std::string& sb,
                                   const std::string& transfer_id) {
    (void)caller;
    (void)transfer_id;
    return serviceError(ErrorCode::kConflict, "sandbox '" + sb + "': no transfers here");
  }
  // An archive in the request body unpacked into `path` (PUT /v1/sandboxes/{id}/archive), or
  // `path` packed as `format` into `sink` (GET); both through the agent's helper, under the
  // profile's transfer.archive limits. The upload's result is its transfer record.
  virtual SResult<Json> uploadArchive(const Caller& caller, const std::string& sb,
                                      const std::string& path, const ByteSource& source) {
    (void)caller;
    (void)path;
    (void)source;
    return serviceError(ErrorCode::kConflict, "sandbox '" + sb + "': no transfers here");
  }
  virtual SResult<> downloadArchive(const Caller& caller, const std::string& sb,
                                    const std::string& path, const std::string& format,
                                    const ByteSink& sink) {
    (void)caller;
    (void)path;
    (void)format;
    (void)sink;
    return serviceError(ErrorCode::kConflict, "sandbox '" + sb + "': no transfers here");
  }

  // The caller's persistent workspaces, and deleting one (409 while a sandbox uses it).
  virtual SResult<std::vector<WorkspaceInfo>> listWorkspaces(const Caller& caller) = 0;
  virtual SResult<> deleteWorkspace(const Caller& caller, const std::string& name) = 0;

  // Held executions waiting for an operator (docs/api.md, "Review"), and deciding one. The API
  // serves these on the Unix socket only.
  virtual SResult<Json> listReviews(const Caller& caller) = 0;  // {"reviews": [...]}
  virtual SResult<> decideReview(const Caller& caller, const std::string& review_id, bool approve,
                                 const std::string& reason) = 0;

  // One program in a sandbox of its own, removed afterwards: what `airlock run` does, counted
  // against the caller's quotas like a sandbox for as long as it runs. Events: "stdout" and
  // "stderr" as the program writes, "notice" lines (policy relaxations), then one "result":
  // {"record": <the `airlock run --json` record>, "files_out": [...]} (docs/api.md, "Runs").
  // Refusals by the policy or a reviewer, timeouts and OOM kills are results, not errors.
  // Destroying the stream before "result" stops the run.
  virtual SResult<std::unique_ptr<EventStream>> runOneShot(const Caller& caller,
                                                           const ProgramSpec& spec) {
    (void)caller;
    (void)spec;
    return serviceError(ErrorCode::kNotFound, "this service runs no one-shot programs");
  }

  // ---- ports (docs/api.md, "Ports") ----
  // A TCP connection to `port` on the sandbox's loopback, made by its agent inside the sandbox.
  // kForbidden when the sandbox's profile has ports = false; kBadGateway when nothing listens.
  virtual SResult<std::unique_ptr<PortStream>> openPort(const Caller& caller, const std::string& sb,
                                                        uint16_t port);
  // A new link token: whoever holds it may open `port` of the sandbox as `caller`, until the
  // sandbox ends. Only its digest is kept.
  virtual SResult<std::string> createPortLink(const Caller& caller, const std::string& sb,
                                              uint16_t port);
  // The link `token` names; kNotFound when it names none (never made, or its sandbox ended).
  virtual SResult<PortLinkTarget> resolvePortLink(const std::string& token);

  // {"status": "ok", "sandboxes": N, "draining": false} (and "node", "capacity" in a fleet)
  virtual Json health() = 0;
  virtual Capacity capacity() { return {}; }
  // The fleet node name (policy server.node); "" on a single host.
  virtual const std::string& node() const {
    static const std::string none;
    return none;
  }
  // Prometheus text exposition of the service's own metrics (sandboxes, executions, ...);
  // the API layer appends its HTTP metrics.
  virtual std::string metricsText() = 0;
};

}  // namespace airlock::sandbox
