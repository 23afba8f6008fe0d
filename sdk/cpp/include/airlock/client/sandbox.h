// The airlock C++ client SDK: sandboxes of a running `airlock serve`, driven the way the Python
// and TypeScript SDKs drive them (E2B Code Interpreter's shape).
//
//   auto sb = airlock::sdk::Sandbox::create({.language = "python"});
//   if (!sb) return fail(sb.error().message());
//   auto ex = sb->runCode("x = 41\nx + 1");   // ex->text() == "42"
//   sb->files().write("/home/user/a.txt", "hi");
//   auto r = sb->commands().run("cat /home/user/a.txt");
//
// Every call returns Result<T> (error.h). A Sandbox made by create() owns its sandbox and
// destroys it when it goes out of scope, unless detach() was called; one from connect() does not.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/client/commands.h"
#include "airlock/client/error.h"
#include "airlock/client/execution.h"
#include "airlock/client/files.h"
#include "airlock/client/transfers.h"

namespace airlock::sdk {

class Http;

// Where the supervisor is: empty fields fall back to AIRLOCK_URL / AIRLOCK_TOKEN.
struct ConnectionOptions {
  std::string url;  // unix:///run/airlock/airlock.sock or http://127.0.0.1:PORT
  std::string token;
};

// A host directory the operator declared ([transfer] roots), shown inside the sandbox
// (docs/transfer.md, Mounts).
struct Mount {
  std::string source;     // hostdir:ROOT or hostdir:ROOT/sub/dir
  std::string path;       // under /mnt; "" at create = /mnt/ROOT[/sub/dir]
  bool writable = false;  // only for a root in [transfer] writable_roots
};

struct SandboxOptions {
  std::string profile;   // "" = the policy's default profile
  std::string language;  // default language for runCode
  std::string name;      // unique per tenant; the sandbox can be addressed by it
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> metadata;
  std::optional<int> keep_alive_s;  // idle time before it is destroyed
  std::optional<int> lifetime_s;    // hard end
  bool persistent = false;          // keep /home/user under `name` (docs/api.md)
  // Host directories to show inside, at most 16: a bad source or path is kBadRequest, a root or
  // write the profile forbids kForbidden.
  std::vector<Mount> mounts;
  std::string isolation;  // "" = the profile's; else one of its isolation_choices ("gvisor")
  ConnectionOptions connection;
};

struct SandboxInfo {
  std::string id;
  std::string node;  // the fleet node holding it (docs/deploy.md); "" on a single host
  std::string name;
  std::string tenant;
  std::string profile;
  std::string language;
  std::string isolation;  // the backend it runs on: namespaces, gvisor
  std::string state;      // running, stopping, stopped
  std::map<std::string, std::string> metadata;
  bool persistent = false;
  std::vector<Mount> mounts;  // each with its path filled in
  int64_t created_at = 0;     // Unix ms
  int64_t last_active_at = 0;
  int keep_alive_s = 0;
  int64_t idle_expires_at = 0;
  int lifetime_s = 0;
  int64_t ends_at = 0;
  int commands_running = 0;
  int contexts = 0;
  // What runs now, the longest-running one: a command (id its command_id) or a code run (id "").
  struct Execution {
    std::string kind;  // command, code
    std::string id;
    int64_t started_at = 0;  // Unix ms
  };
  std::optional<Execution> current_execution;     // none when idle
  std::map<std::string, int64_t> recent_denials;  // refusals since it started, by cause: review
};

// One sandbox's resource use, read from its cgroup and workspace when asked (GET
// /v1/sandboxes/{sb}/metrics; docs/api.md, "One sandbox's resource use"). An absent limit is
// unlimited, or not measurable (the disk of a gVisor or microVM sandbox).
struct SandboxMetrics {
  std::string sandbox_id;
  double cpu_seconds = 0;
  uint64_t memory_bytes = 0;
  uint64_t memory_peak_bytes = 0;
  std::optional<uint64_t> memory_limit_bytes;
  uint64_t pids = 0;
  std::optional<uint64_t> pids_limit;
  uint64_t disk_bytes = 0;
  std::optional<uint64_t> disk_limit_bytes;
  uint64_t oom_kills = 0;
  uint64_t executions = 0;  // commands and code runs started in it
  double uptime_s = 0;
  std::string sampled_at;  // RFC 3339, UTC
};

class Sandbox {
 public:
  static Result<Sandbox> create(const SandboxOptions& options = {});
  // An existing sandbox by id or name; not owned (not destroyed with this object).
  static Result<Sandbox> connect(const std::string& id_or_name,
                                 const ConnectionOptions& connection = {});
  // The caller's sandboxes whose metadata has every given key=value. Behind a fleet's proxy,
  // which lists per node (docs/deploy.md), every node it names in turn; `node` asks one.
  static Result<std::vector<SandboxInfo>> list(
      const std::map<std::string, std::string>& metadata = {},
      const ConnectionOptions& connection = {}, const std::string& node = "");

  Sandbox(Sandbox&& other) noexcept;
  Sandbox& operator=(Sandbox&& other) noexcept;
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;
  ~Sandbox();

  const std::string& id() const { return info_.id; }
  // As of create/connect/refresh/setTimeout.
  const SandboxInfo& info() const { return info_; }
  Result<SandboxInfo> refresh();
  // Its CPU, memory, pids, disk and OOM kills now.
  Result<SandboxMetrics> metrics() const;

  Result<Execution> runCode(const std::string& code, const RunCodeOptions& options = {}) const;
  // The run of `context_id` that was in flight when the supervisor died, finished under the next
  // one that adopted the sandbox (`run_id`: its id, or "last"); waits for its end. kNotFound when
  // no such run was taken over. Output callbacks in `options` are called as for runCode.
  Result<Execution> recoveredRun(const std::string& context_id, const std::string& run_id = "last",
                                 const RunCodeOptions& options = {}) const;
  const Commands& commands() const { return commands_; }
  const Files& files() const { return files_; }

  // Transfers (docs/transfer.md). A record whose status is not "ok" is an Error of kind
  // kTransferFailed whose code() is that status (error, denied, cancelled) and whose message
  // carries the record's error text.
  //
  // Fetches the archive at `source` (an https:// or http:// URL, or hostdir:NAME/path) and
  // unpacks it into the sandbox directory `path`, inside the sandbox.
  Result<TransferRecord> transferIn(const std::string& source, const std::string& path,
                                    const TransferOptions& options = {}) const;
  // Packs the sandbox directory `path` and sends it to `dest` (a URL, uploaded with PUT, or
  // hostdir:NAME/file.tar.gz).
  Result<TransferRecord> transferOut(const std::string& dest, const std::string& path,
                                     const TransferOptions& options = {}) const;
  // The sandbox's transfers, running and recently ended.
  Result<std::vector<TransferRecord>> listTransfers() const;
  // Cancels a running transfer (what it unpacked is removed); false when it already ended or is
  // unknown.
  Result<bool> cancelTransfer(const std::string& transfer_id) const;
  // Unpacks an archive (tar, tar.gz, tar.zst, zip) into the sandbox directory `path`: bytes in
  // memory, or a local file streamed. An entry that would leave the directory refuses the whole
  // archive (kBadRequest).
  Result<TransferRecord> uploadArchive(const std::string& path, std::string_view archive) const;
  Result<TransferRecord> uploadArchiveFrom(const std::string& local_path,
                                           const std::string& path) const;
  // The sandbox directory `path` packed as `format` (tar, tar.gz, tar.zst or zip): its bytes, or
  // streamed into a local file (renamed into place once complete); the number of bytes.
  Result<std::string> downloadArchive(const std::string& path,
                                      const std::string& format = "tar.gz") const;
  Result<uint64_t> downloadArchiveTo(const std::string& path, const std::string& local_path,
                                     const std::string& format = "tar.gz") const;

  // Resets the idle timer to `keep_alive_s` (within the profile's maximum).
  Result<> setTimeout(int keep_alive_s);
  // Destroys the sandbox now; everything in it is killed and removed.
  Result<> kill();
  // Leaves the sandbox running when this object goes.
  void detach() { owned_ = false; }
  bool owned() const { return owned_; }

 private:
  Sandbox(std::shared_ptr<const Http> http, SandboxInfo info, bool owned);
  std::string target() const;

  std::shared_ptr<const Http> http_;
  SandboxInfo info_;
  bool owned_ = false;
  Commands commands_;
  Files files_;
};

}  // namespace airlock::sdk
