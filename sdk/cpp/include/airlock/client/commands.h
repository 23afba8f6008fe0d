// Processes in a sandbox (docs/api.md, Commands): foreground runs with live output, background
// commands with a handle to wait on, feed, signal or kill.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/client/audit.h"
#include "airlock/client/error.h"

namespace airlock::sdk {

class Http;

struct CommandOptions {
  std::map<std::string, std::string> env;
  std::string cwd;  // "" = /home/user
  std::optional<std::string> stdin_data;
  std::optional<double> timeout_s;  // "" = the profile's limit
  std::function<void(std::string_view)> on_stdout;
  std::function<void(std::string_view)> on_stderr;
};

struct CommandResult {
  std::string command_id;
  int exit_code = 0;
  int signal = 0;  // the signal that killed it, 0 when it exited
  std::string stdout_text;
  std::string stderr_text;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  double duration_ms = 0;
  std::optional<Review> review;
  std::optional<AuditSummary> audit;  // what the command did; absent when nothing is audited
  // Why the command counts as failed whatever its exit code ("" normally): an audit that lost
  // events under fail_closed.
  std::string error;
};

struct CommandInfo {
  std::string command_id;
  std::vector<std::string> argv;
  int64_t pid = 0;
  std::string state;     // running or exited, as the API says it
  bool running = false;  // state == "running"
  bool background = false;
  int64_t started_at = 0;
  std::optional<int> exit_code;
  std::optional<int> signal;  // the signal that ended it, once it has ended by one
};

// A background command. Copyable; the command keeps running when every handle is gone.
class CommandHandle {
 public:
  CommandHandle(std::shared_ptr<const Http> http, std::string sandbox_target, std::string id,
                int64_t pid);
  const std::string& id() const { return id_; }
  int64_t pid() const { return pid_; }

  // Attaches: the buffered output so far, then live output, until it exits. A command that
  // hit its timeout is an Error of kind kTimeout.
  Result<CommandResult> wait(const std::function<void(std::string_view)>& on_stdout = {},
                             const std::function<void(std::string_view)>& on_stderr = {}) const;
  Result<> sendStdin(std::string_view data, bool eof = false) const;
  Result<> signal(const std::string& name) const;  // "SIGTERM", "9", ...
  Result<> kill() const;                           // SIGKILL to all its processes

 private:
  std::string target() const;
  std::shared_ptr<const Http> http_;
  std::string sandbox_target_;
  std::string id_;
  int64_t pid_;
};

class Commands {
 public:
  Commands(std::shared_ptr<const Http> http, std::string sandbox_target);

  // `/bin/sh -c cmd`, in the foreground: live output through the options' callbacks, the whole
  // output in the result. A non-zero exit is a result, not an Error; a timeout is an Error of
  // kind kTimeout.
  Result<CommandResult> run(const std::string& cmd, const CommandOptions& options = {}) const;
  // argv[0] looked up on PATH, no shell.
  Result<CommandResult> run(const std::vector<std::string>& argv,
                            const CommandOptions& options = {}) const;
  // In the background: answers at once with a handle (callbacks in `options` are not used).
  Result<CommandHandle> start(const std::string& cmd, const CommandOptions& options = {}) const;
  Result<CommandHandle> start(const std::vector<std::string>& argv,
                              const CommandOptions& options = {}) const;
  Result<std::vector<CommandInfo>> list() const;

 private:
  std::shared_ptr<const Http> http_;
  std::string sandbox_target_;
};

}  // namespace airlock::sdk
