// One sandbox as the manager tracks it, and the small rules its parts share.
#pragma once

#include <atomic>
#include <cctype>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "airlock/policy/policy.h"
#include "supervisor/sandbox/agent/code_context.h"
#include "supervisor/sandbox/agent/command.h"
#include "supervisor/sandbox/agent/connection.h"
#include "supervisor/sandbox/agent/program.h"
#include "supervisor/sandbox/host/sandbox.h"

namespace airlock::sandbox {

inline int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline double secondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Sandbox and workspace names: 1 to 63 of A-Z a-z 0-9 . _ -
inline bool validName(const std::string& name) {
  if (name.empty() || name.size() > 63) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'))
      return false;
  return true;
}

struct TransferTask;

struct LiveSandbox {
  std::string id;
  std::string name;
  std::string tenant;
  std::string language;
  policy::Profile profile;
  std::string profile_name;
  bool adopted = false;  // taken over from a supervisor that died (sandbox_journal.h)
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> metadata;
  bool persistent = false;
  std::string workspace_image;    // persistent: the image at /home/user
  std::vector<MountSpec> mounts;  // host directories shown inside (hostdir_mounts.h)
  // Network rules set through the API (resolved), replacing the profile's; journaled so that an
  // adopted sandbox keeps them. nullopt: the profile's rules.
  std::optional<std::vector<std::string>> network_rules;
  int64_t created_at = 0;  // Unix ms
  std::atomic<int64_t> last_active_at{0};
  std::atomic<int64_t> keep_alive_s{0};
  std::atomic<int64_t> ends_at{0};
  std::atomic<int64_t> lifetime_s{0};
  std::atomic<int> busy{0};  // foreground streams and code runs in progress: never idle
  std::atomic<bool> audit_claimed{false};  // an execution holds the audit (execution_audit.h)
  std::atomic<uint64_t> executions{0};     // commands and code runs started (its metrics)
  // For the live view (`airlock top`, /ui): when the oldest code run still going began (Unix ms,
  // 0: none), how many are going, and how many executions the review chain refused.
  std::atomic<int64_t> code_started_at{0};
  std::atomic<int> code_runs{0};
  mutable std::atomic<int64_t> review_denials{0};  // counted by the const review gate

  std::unique_ptr<sandbox::Sandbox> box;
  std::shared_ptr<AgentConnection> conn;

  // Transfers through the API (transfers.cc): running ones hold a thread, joined when they are
  // pruned or the sandbox ends. Bytes moved so far count against transfer.*.sandbox_max_mb.
  std::map<std::string, std::shared_ptr<TransferTask>> transfers;
  int next_transfer = 1;
  std::atomic<uint64_t> transfer_moved{0};

  mutable std::mutex mu;  // state, commands, contexts, transfers
  std::string state = "running";
  std::map<std::string, std::shared_ptr<Command>> commands;
  std::map<std::string, std::shared_ptr<CodeContext>> contexts;
  int next_context = 1;
  // Code contexts a supervisor restart lost (an agent from before session keeping ended their
  // drivers): the next default contexts created say context_restarted on their first run.
  size_t contexts_lost = 0;
  // Port links (docs/api.md, "Ports"): sha256 hex of a link's token → its port. They end with
  // the sandbox because they live in it.
  std::map<std::string, uint16_t> port_links;
};

// The pools of pre-started interpreters a profile may keep, per language.
enum class PrestartKind {
  kPlain,      // lifetime.prestart: nothing imported
  kPreloaded,  // lifetime.prestart with lifetime.preload: those modules imported
  kChecker,    // python_ast's checker program itself (review.python_ast.pool_size), reading stdin
};

// A single-use sandbox from a pool whose interpreter already runs the language's prestart
// driver (docs/plugins.md, "Prestart drivers"), waiting on its stdin for one program.
struct Prestarted {
  std::shared_ptr<LiveSandbox> live;
  std::string language;
  PrestartKind kind = PrestartKind::kPlain;
  std::unique_ptr<ProgramRun> run;  // the interpreter's execution, started with the sandbox
};

// Whether a program wants an interpreter that imported `preload`: its text names the top-level
// package of one of them ("pandas" for "pandas.io", "@scope/pkg" for "@scope/pkg/sub") as a whole
// word. A guess by text, only ever costing time: a program sent to the other kind of
// interpreter imports what it needs itself.
bool wantsPreload(std::string_view program, const std::vector<std::string>& preload);

}  // namespace airlock::sandbox
