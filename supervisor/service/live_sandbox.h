// One served sandbox and everything the service tracks about it.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "airlock/policy/policy.h"
#include "supervisor/sandbox/sandbox.h"
#include "supervisor/service/agent_connection.h"
#include "supervisor/service/code_context.h"
#include "supervisor/service/command.h"

namespace airlock::service {

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
  std::string workspace_image;  // persistent: the image at /home/user
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

  std::unique_ptr<sandbox::Sandbox> box;
  std::shared_ptr<AgentConnection> conn;

  mutable std::mutex mu;  // state, commands, contexts
  std::string state = "running";
  std::map<std::string, std::shared_ptr<Command>> commands;
  std::map<std::string, std::shared_ptr<CodeContext>> contexts;
  int next_context = 1;
};

}  // namespace airlock::service
