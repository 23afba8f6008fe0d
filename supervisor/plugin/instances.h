// Plugin instances: the C++ face of one create()d instance of an isolation or language plugin.
// Each keeps its library loaded, serializes calls into the instance (the ABI allows one thread
// at a time per instance) and turns airlock_error_v1 into Error.
#pragma once

#include <airlock/plugin_abi_v1.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/result.h"
#include "airlock/unique_fd.h"
#include "supervisor/plugin/loader.h"

namespace airlock::plugin {

// The instance and the host table it was given, destroyed together (instance first).
class Instance {
 public:
  static Result<std::unique_ptr<Instance>> create(const PluginHandle& plugin,
                                                  std::string_view config_json);
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  void* get() const { return instance_; }
  const PluginHandle& plugin() const { return plugin_; }
  // A line in the plugin's log, as if the plugin had said it (tagged with its name).
  void log(int level, const std::string& message) const {
    host_.log(host_.ctx, level, message.c_str());
  }

 private:
  explicit Instance(PluginHandle plugin) : plugin_(std::move(plugin)) {}
  PluginHandle plugin_;  // declared first: outlives instance_ and the library it lives in
  airlock_host_v1 host_{};
  void* instance_ = nullptr;
};

class IsolationBackend {
 public:
  explicit IsolationBackend(std::unique_ptr<Instance> instance);

  // Starts a sandbox; the caller owns out.pidfd and must call release() once it is reaped.
  Result<airlock_sandbox_v1> start(const airlock_sandbox_spec_v1& spec);
  void release(airlock_sandbox_v1& sandbox);
  // ABI 1.10: whether the backend hands a waiting agent its new channel itself (its agent is not
  // a host process the supervisor could take fd 3 from), and doing it: out as start() fills it
  // (pid and pidfd set by the caller), the supervisor's end of the new channel returned.
  bool adopts() const { return adopt_ != nullptr; }
  Result<UniqueFd> adopt(const airlock_adopt_spec_v1& spec, airlock_sandbox_v1& out);
  const std::vector<std::string>& extraSyscalls() const { return extra_syscalls_; }
  // AIRLOCK_ISOLATION_NO_REATTACH: its sandboxes cannot be adopted by a later supervisor.
  bool reattachable() const { return (flags_ & AIRLOCK_ISOLATION_NO_REATTACH) == 0; }
  // AIRLOCK_ISOLATION_HOST_IDS: host files the sandbox owns carry its own ids, unshifted.
  bool hostIds() const { return (flags_ & AIRLOCK_ISOLATION_HOST_IDS) != 0; }
  // AIRLOCK_ISOLATION_WORKSPACE_IMAGE: the sandbox mounts a persistent workspace's ext4 image
  // itself (a VM's disk); the host never mounts it while the sandbox runs.
  bool workspaceImage() const { return (flags_ & AIRLOCK_ISOLATION_WORKSPACE_IMAGE) != 0; }
  // AIRLOCK_ISOLATION_OWN_NETSTACK: its network namespace is made and linked before start(), and
  // its network rules are enforced on the link (the host's socket hooks never see them).
  bool ownNetstack() const { return (flags_ & AIRLOCK_ISOLATION_OWN_NETSTACK) != 0; }
  // AIRLOCK_ISOLATION_OWN_AUDIT: the host's hooks see only the backend's processes; the sandbox's
  // execs and connects come from readEvents().
  bool ownAudit() const { return (flags_ & AIRLOCK_ISOLATION_OWN_AUDIT) != 0; }
  // Every event the backend has received from this sandbox so far (ABI 1.6 read_events); fails
  // when its monitoring broke.
  Result<> readEvents(airlock_sandbox_v1& sandbox,
                      const std::function<void(const airlock_sandbox_event_v1&)>& emit);
  // The cgroup limits for a sandbox whose own processes may use `pids` and `memory_bytes`: the
  // backend's cost on the host added (a user-space kernel's threads and memory).
  uint64_t hostPidsLimit(uint64_t pids) const {
    return host_pids_base_ + host_pids_per_process_ * pids;
  }
  uint64_t hostMemoryLimit(uint64_t memory_bytes) const { return memory_bytes + host_memory_base_; }
  const std::string& name() const { return instance_->plugin().shortName(); }
  const std::string& fullName() const { return instance_->plugin().name(); }

 private:
  const airlock_isolation_ops_v1& ops() const;
  std::unique_ptr<Instance> instance_;
  std::vector<std::string> extra_syscalls_;
  uint32_t flags_ = 0;
  uint64_t host_pids_base_ = 0;
  uint64_t host_pids_per_process_ = 1;
  uint64_t host_memory_base_ = 0;
  decltype(airlock_isolation_ops_v1::read_events) read_events_ = nullptr;
  decltype(airlock_isolation_ops_v1::adopt) adopt_ = nullptr;
  std::mutex mu_;
};

class Language {
 public:
  struct Command {
    std::vector<std::string> argv;
    std::vector<std::string> env;
    bool operator==(const Command&) const = default;
  };

  explicit Language(std::unique_ptr<Instance> instance);

  Result<Command> build(const airlock_code_request_v1& request) const;
  Result<Command> buildInline(std::string_view code,
                              const std::vector<std::string>& args = {}) const;
  Result<Command> buildFile(const std::string& path,
                            const std::vector<std::string>& args = {}) const;
  // The command starting this language's session driver (AIRLOCK_CODE_SESSION): run it with a
  // stdin pipe and the control pipe on fd 3 (docs/plugins.md, "Session drivers"). Fails with
  // errnum() ENOTSUP for languages without one (shell), EINVAL for plugins built before ABI 1.1.
  Result<Command> buildSession() const;
  // The command starting a pre-started interpreter that imports `modules`, then waits on stdin
  // for its one program (AIRLOCK_CODE_PRESTART; docs/plugins.md, "Prestart drivers"). ENOTSUP
  // for languages without one, EINVAL for plugins built before ABI 1.4.
  Result<Command> buildPrestart(const std::vector<std::string>& modules) const;

  const std::string& name() const { return instance_->plugin().shortName(); }  // "python"
  const std::string& fullName() const { return instance_->plugin().name(); }

  // Copied from the plugin's ops table when the instance was created.
  std::vector<std::string> aliases;      // "py", "python3"
  std::vector<std::string> extensions;   // ".py"
  std::vector<std::string> image_paths;  // host paths bound read-only at the same place
  size_t max_inline_bytes = 0;           // larger inline programs go through a file

  // True for the full name, the short name or an alias.
  bool answersTo(std::string_view name) const;
  bool handlesExtension(std::string_view extension) const;

 private:
  const airlock_language_ops_v1& ops() const;
  std::unique_ptr<Instance> instance_;
  mutable std::mutex mu_;
};

// Plugins log through the host table to stderr as "[<plugin name>] <level>: <message>". Lines
// below `min_level` (0=debug 1=info 2=warning 3=error) are dropped; the default is 1.
void setPluginLogLevel(int min_level);

// Copies a NULL-terminated C string array; NULL gives an empty vector.
std::vector<std::string> copyStringArray(const char* const* array);

}  // namespace airlock::plugin
