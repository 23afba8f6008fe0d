// The sandbox manager: the one owner of every sandbox, whichever front end asks.
//
// `airlock serve` is this manager behind the HTTP API (the Service interface, service.h);
// `airlock run` is the same manager driving one one-shot program in-process (runProgram). It
// creates sandboxes (quotas first, warm or cold), passes every execution through the review
// gate, runs commands, code contexts and one-shot programs, moves files, audits, sets up
// networks, ends sandboxes when asked, idle or at the end of their lifetime, journals them and
// adopts those of a supervisor that died. It destroys all of them when it is destroyed itself.
//
// Its parts live one concern a file: manager.cc (start, policy, lookup), lifecycle.cc,
// pool.cc, executions.cc, one_shot.cc, files.cc, review_gate.cc, network_rules.cc,
// recovery.cc, metrics.cc; one sandbox's host resources are host/, the agent connection agent/.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string_view>
#include <thread>
#include <tuple>

#include "airlock/policy/policy.h"
#include "airlock/result.h"
#include "supervisor/audit/audit_log.h"
#include "supervisor/audit/webhook_sink.h"
#include "supervisor/plugin/registry.h"
#include "supervisor/review/approval_queue.h"
#include "supervisor/review/chain.h"
#include "supervisor/sandbox/agent/code_context.h"
#include "supervisor/sandbox/agent/connection.h"
#include "supervisor/sandbox/host/sandbox.h"
#include "supervisor/sandbox/metrics.h"
#include "supervisor/sandbox/one_shot.h"
#include "supervisor/sandbox/service.h"
#include "supervisor/sandbox/workspace_store.h"

namespace airlock::sandbox {

struct ManagerOptions {
  policy::Policy policy;
  std::string plugin_dir;
  std::string agent_path;
  std::string state_dir = "/run/airlock";  // runtime state: locks, uid leases, scratch
  // Persistent workspace images (workspace_store.h); on disk: the policy's server.state_dir.
  std::string workspace_dir = "/var/lib/airlock/workspaces";
  // This supervisor's name in a fleet (policy server.node or `serve --node`): set, it begins
  // every sandbox id, port link and review id ("<node>_..."), so a proxy routes by id alone.
  // Fixed at start: a reload does not rename a node.
  std::string node;

  enum class Mode {
    // `airlock serve`: a thread reads every agent channel; the reaper and the warm pools run;
    // sandboxes outlive a crash for adoption; the audit engine and every review chain load at
    // start, so problems show at once.
    kServe,
    // `airlock run`: one caller thread does everything (the hub is pumped inline); what the
    // run does not need (audit engine, network host, review chains) loads on first use; stale
    // leftovers of killed runs are reclaimed before the first sandbox.
    kOneShot,
  };
  Mode mode = Mode::kServe;
  // kOneShot: readable when the run is to stop (a signal's self-pipe). Every wait then ends and
  // the sandboxes are torn down. The manager never reads from it.
  int cancel_fd = -1;
};

struct LiveSandbox;
struct Prestarted;
enum class PrestartKind;

class Manager final : public Service {
 public:
  static Result<std::unique_ptr<Manager>> start(ManagerOptions options);
  ~Manager() override;

  // New sandboxes (and warm pools) use this policy from now on; running sandboxes keep the
  // profile they were created with.
  void reloadPolicy(policy::Policy policy);
  std::shared_ptr<const policy::Policy> currentPolicy();

  // Refuses new sandboxes from now on (503); running ones keep working.
  void drain();
  // Destroys every sandbox; used on shutdown.
  void destroyAll();
  size_t sandboxCount();
  size_t warmCount();  // ready sandboxes in the warm pools
  // Pre-started interpreters waiting in the pools ([profiles.X.lifetime] prestart).
  size_t prestartedCount();

  // One program in a sandbox of its own, destroyed afterwards (one_shot.h). An Error only when
  // nothing could be attempted; policy and review refusals, timeouts and OOM kills are results.
  Result<RunResult> runProgram(const RunRequest& request);
  // runProgram for an API caller (POST /v1/runs; run_service.cc): tenant, profile, limits and
  // quotas checked first, files carried in the request and in the result event.
  SResult<std::unique_ptr<EventStream>> runOneShot(const Caller& caller,
                                                   const ProgramSpec& spec) override;

  SResult<SandboxInfo> createSandbox(const Caller& caller, const SandboxSpec& spec) override;
  SResult<std::vector<SandboxInfo>> listSandboxes(
      const Caller& caller, const std::map<std::string, std::string>& metadata) override;
  SResult<SandboxInfo> getSandbox(const Caller& caller, const std::string& sb) override;
  SResult<Json> sandboxMetrics(const Caller& caller, const std::string& sb) override;  // metrics.cc
  SResult<> destroySandbox(const Caller& caller, const std::string& sb) override;
  SResult<SandboxInfo> keepAlive(const Caller& caller, const std::string& sb,
                                 std::optional<int64_t> keep_alive_s,
                                 std::optional<int64_t> lifetime_s) override;

  SResult<Json> getNetwork(const Caller& caller, const std::string& sb) override;
  SResult<Json> setNetwork(const Caller& caller, const std::string& sb,
                           const std::vector<std::string>& rules) override;

  SResult<Json> listReviews(const Caller& caller) override;
  SResult<> decideReview(const Caller& caller, const std::string& review_id, bool approve,
                         const std::string& reason) override;
  SResult<std::unique_ptr<EventStream>> startTransfer(const Caller& caller, const std::string& sb,
                                                      const TransferSpec& spec) override;
  SResult<Json> listTransfers(const Caller& caller, const std::string& sb) override;
  SResult<> cancelTransfer(const Caller& caller, const std::string& sb,
                           const std::string& transfer_id) override;
  SResult<Json> uploadArchive(const Caller& caller, const std::string& sb, const std::string& path,
                              const ByteSource& source) override;
  SResult<> downloadArchive(const Caller& caller, const std::string& sb, const std::string& path,
                            const std::string& format, const ByteSink& sink) override;
  SResult<std::vector<WorkspaceInfo>> listWorkspaces(const Caller& caller) override;
  SResult<> deleteWorkspace(const Caller& caller, const std::string& name) override;

  SResult<std::unique_ptr<EventStream>> runCommand(const Caller& caller, const std::string& sb,
                                                   const CommandSpec& spec) override;
  SResult<std::vector<CommandInfo>> listCommands(const Caller& caller,
                                                 const std::string& sb) override;
  SResult<std::unique_ptr<EventStream>> attachCommand(const Caller& caller, const std::string& sb,
                                                      const std::string& command_id) override;
  SResult<> sendStdin(const Caller& caller, const std::string& sb, const std::string& command_id,
                      std::string data, bool eof) override;
  SResult<> signalCommand(const Caller& caller, const std::string& sb,
                          const std::string& command_id, int signo) override;

  SResult<ContextInfo> createContext(const Caller& caller, const std::string& sb,
                                     const std::string& language,
                                     const std::string& cwd = {}) override;
  SResult<std::vector<ContextInfo>> listContexts(const Caller& caller,
                                                 const std::string& sb) override;
  SResult<ContextInfo> restartContext(const Caller& caller, const std::string& sb,
                                      const std::string& context_id) override;
  SResult<> destroyContext(const Caller& caller, const std::string& sb,
                           const std::string& context_id) override;
  SResult<std::unique_ptr<EventStream>> runCode(const Caller& caller, const std::string& sb,
                                                const CodeSpec& spec) override;
  SResult<std::unique_ptr<EventStream>> attachRun(const Caller& caller, const std::string& sb,
                                                  const std::string& context_id,
                                                  const std::string& run_id) override;

  SResult<FileEntry> writeFile(const Caller& caller, const std::string& sb, const std::string& path,
                               uint32_t mode, const ByteSource& source) override;
  SResult<> readFile(const Caller& caller, const std::string& sb, const std::string& path,
                     const std::function<void(uint64_t size)>& on_size,
                     const ByteSink& sink) override;
  SResult<std::vector<FileEntry>> listFiles(const Caller& caller, const std::string& sb,
                                            const std::string& path) override;
  SResult<FileEntry> statFile(const Caller& caller, const std::string& sb,
                              const std::string& path) override;
  SResult<> makeDirectory(const Caller& caller, const std::string& sb, const std::string& path,
                          bool parents) override;
  SResult<> removeFile(const Caller& caller, const std::string& sb, const std::string& path,
                       bool recursive) override;
  SResult<> renameFile(const Caller& caller, const std::string& sb, const std::string& from,
                       const std::string& to) override;

  SResult<std::unique_ptr<PortStream>> openPort(const Caller& caller, const std::string& sb,
                                                uint16_t port) override;
  SResult<std::string> createPortLink(const Caller& caller, const std::string& sb,
                                      uint16_t port) override;
  SResult<PortLinkTarget> resolvePortLink(const std::string& token) override;
  Json health() override;
  Capacity capacity() override;
  const std::string& node() const override { return options_.node; }
  std::string metricsText() override;

 private:
  explicit Manager(ManagerOptions options);
  SResult<std::shared_ptr<LiveSandbox>> find(const Caller& caller, const std::string& sb);
  SResult<std::shared_ptr<LiveSandbox>> findRunning(const Caller& caller, const std::string& sb);
  // findRunning, refused when the sandbox's profile turned ports off (ports.cc).
  SResult<std::shared_ptr<LiveSandbox>> findWithPorts(const Caller& caller, const std::string& sb);
  SandboxInfo infoOf(const LiveSandbox& s);
  void destroyLive(const std::shared_ptr<LiveSandbox>& s, const char* reason);
  // Cancels the sandbox's running transfers and joins their threads (transfers.cc).
  void endTransfers(LiveSandbox& s);
  // Counts a transfer and writes its "transfer" record to the audit log (transfers.cc).
  void recordTransfer(const audit::RecordIds& ids, const TransferOutcome& t);
  // The audit trail's `sandbox` and `execution` records (docs/audit.md; audit_trail.cc), also
  // handed to the lifecycle webhooks through the log.
  void recordSandbox(const LiveSandbox& s, std::string_view event, std::string_view reason = {});
  void recordSandbox(const audit::RecordIds& ids, std::string_view profile,
                     std::string_view backend, std::string_view event,
                     std::string_view reason = {});
  void recordExecution(const audit::RecordIds& ids, nlohmann::json fields);
  // An execution the review (or a broken chain) refused: its record, and `why` to return.
  ServiceError refusedExecution(const audit::RecordIds& ids, nlohmann::json fields,
                                const ServiceError& why);
  // What writes an execution's record with its outcome when its stream ends (executions.cc).
  std::function<void(const nlohmann::json*)> executionRecorder(const audit::RecordIds& ids,
                                                               nlohmann::json fields);
  // The `execution` record of an airlock run / POST /v1/runs (one_shot.cc).
  void recordRun(const RunRequest& req, const RunResult& r, const std::string& execution_id);
  // The transfer record of a file API write ("in") or read ("out") (files.cc); none when the
  // sandbox was not found (nothing moved).
  void recordFileTransfer(const Caller& caller, const std::string& sb, std::string_view direction,
                          const std::string& path, uint64_t bytes, std::string sha256,
                          const std::string& error, Clock::time_point t0);
  // Stops the webhooks, delivering what waits within their shutdown deadline.
  void stopWebhooks();
  // Destroys `s` on the reaper thread, then calls `done`.
  void retire(std::shared_ptr<LiveSandbox> s, std::function<void()> done);
  void reaperLoop();
  void poolLoop();
  // A fresh sandbox of the profile, not yet owned by anyone.
  // workspace_image: a persistent workspace to mount at /home/user, or empty.
  // Takes over the sandboxes of a supervisor that died, from their journals; the ones that
  // cannot be adopted are left to reclaimOrphans. Before any thread starts.
  void adoptOrphans();
  // How a context of `language` starts in `box` (its session driver's command); `short_name`
  // gets the language's own name.
  SResult<DriverLaunch> driverLaunch(const LiveSandbox& box, const std::string& language,
                                     const std::string& cwd, std::string& short_name);
  // An adopted sandbox's executions that outlived the dead supervisor (Reattached.live): its
  // commands and code contexts go on under their ids; then the agent sends what it held.
  void adoptExecutions(LiveSandbox& s);
  // createContext, or (as_default) the language's default context, named after it.
  SResult<ContextInfo> startContext(const Caller& caller, const std::string& sb,
                                    const std::string& language, bool as_default,
                                    const std::string& cwd = {});
  struct ReviewChain {
    std::shared_ptr<const review::Chain> chain;  // null: `error` says why it could not be built
    std::string error;
  };
  // The review chain of every profile of `pol`; a chain that cannot be built denies everything
  // of its profile (fails closed) and says why. Called with mu_ held.
  void buildChains(const policy::Policy& pol);
  ReviewChain buildChain(const policy::Policy& pol, const policy::Profile& profile);
  // The chain of a profile of the current policy, built on first use in kOneShot.
  ReviewChain chainFor(const std::string& profile);
  // Runs the profile's review chain. A hold waits for an operator in kServe; in kOneShot there
  // is none to ask, so it denies (kHoldNeedsServe). nullopt: the profile reviews nothing.
  // Every reviewed execution, allowed or not, gets a "review" record in the audit log under
  // `ids`.
  std::optional<review::Verdict> judge(const std::string& profile, review::Subject subject,
                                       const audit::RecordIds& ids);
  // judge() for a served sandbox: the allow verdict's JSON for the run's last event, null when
  // the profile reviews nothing, or denied_by_review.
  SResult<Json> reviewGate(const Caller& caller, const LiveSandbox& box, review::Subject subject,
                           const std::string& execution_id);
  // Opens the [audit] log; in kServe also loads the eBPF audit engine (start()).
  Result<> startAudit();
  // The audit engine and log: loaded at start in kServe, on the first audited sandbox in
  // kOneShot (whose ring is then read from the inline hub, not a thread).
  std::shared_ptr<const AuditContext> auditContext();
  // The host side of sandbox networks (docs/network.md), and what a dead supervisor left of it.
  Result<> startNetwork();
  Result<std::shared_ptr<net::NetworkHost>> networkHost();
  // The package proxy (docs/packages.md), started with the first sandbox whose profile installs
  // packages; [packages] of the policy at start. Its downloads are "package" audit records.
  Result<std::shared_ptr<packages::Proxy>> packageProxy();
  // Options for a sandbox of this profile: the proxy and its port when its packages are on.
  Result<> preparePackages(const policy::Profile& profile, sandbox::SandboxOptions& opts);
  // Ends every wait of a kOneShot manager: cancel_fd became readable.
  void cancelAll();
  void reclaimNetworkLeftovers();
  // Puts the network rules an adopted sandbox had been given through the API back in force.
  void restoreNetworkRules(LiveSandbox& s, const std::vector<std::string>& rules);
  void journal(const LiveSandbox& s);
  // tenant: for the audit records of its creation; "" for warm sandboxes (told when claimed).
  SResult<std::shared_ptr<LiveSandbox>> startBox(const policy::Profile& profile,
                                                 const std::string& workspace_image = {},
                                                 const std::string& tenant = {},
                                                 const std::vector<HostMount>& host_mounts = {});
  // Checks the host's and the tenant's quotas for one more sandbox of `memory` MiB and holds
  // its place until unreserve() (a create until the sandbox is registered, a one-shot run until
  // its sandbox is gone). A `name` must not name another sandbox of the tenant. `run`: the place
  // is a one-shot run's (counted in the metrics as running, not starting).
  SResult<> reserve(const Caller& caller, const policy::Policy& pol, const policy::Tenant& tenant,
                    uint64_t memory, const std::string& name, bool run);
  void unreserve(const std::string& tenant, uint64_t memory, bool run);
  std::shared_ptr<LiveSandbox> takeWarm(const std::string& profile);
  // A sandbox of the profile whose `language` interpreter already runs and waits for its
  // one-shot program (prestart.cc), started by the pool loop.
  SResult<std::shared_ptr<Prestarted>> startPrestarted(const policy::Profile& profile,
                                                       const std::string& language,
                                                       PrestartKind kind);
  // The sandbox and its interpreter running `command`, waiting on stdin.
  SResult<std::shared_ptr<Prestarted>> startWaiting(const policy::Profile& profile,
                                                    const plugin::Language& lang,
                                                    const plugin::Language::Command& command,
                                                    PrestartKind kind);
  // How many interpreters of each kind the pool loop keeps for the profile and language.
  static size_t prestartTarget(const policy::Profile& profile, const std::string& language,
                               PrestartKind kind);
  // A waiting one of the pool, checked still alive, of the first of `kinds` that has one;
  // null when none has.
  std::shared_ptr<Prestarted> takePrestarted(const std::string& profile,
                                             const std::string& language,
                                             std::initializer_list<PrestartKind> kinds);
  SResult<std::shared_ptr<plugin::Language>> language(const std::string& name);
  template <typename Op>
  auto fileOp(const Caller& caller, const std::string& sb, const std::string& path, Op&& op)
      -> decltype(op(std::declval<AgentConnection&>(), path));

  ManagerOptions options_;  // options_.policy: the policy at start; policy_ is the current one
  // The [audit] log and engine, for the supervisor's life (the policy at start decides them).
  std::unique_ptr<audit::WebhookSink> webhooks_;  // before audit_log_, whose observer uses it
  std::unique_ptr<audit::AuditLog> audit_log_;
  std::atomic<bool> cancelled_{false};  // kOneShot: cancel_fd fired
  std::once_flag reclaimed_;            // kOneShot: stale leftovers reclaimed
  std::mutex lazy_mu_;                  // audit_, network_, packages_ while they load
  std::shared_ptr<const sandbox::AuditContext> audit_;
  std::shared_ptr<net::NetworkHost> network_;
  std::shared_ptr<packages::Proxy> packages_;  // under lazy_mu_; writes to audit_log_
  WorkspaceStore workspaces_{options_.workspace_dir};
  review::ApprovalQueue approvals_;
  std::map<std::string, ReviewChain> chains_;  // by profile name; under mu_
  plugin::Registry registry_;
  std::unique_ptr<ChannelHub> hub_;
  Metrics metrics_;

  std::mutex mu_;  // policy_, sandboxes_, pool_, reserved_*, draining_, stopping_
  std::shared_ptr<const policy::Policy> policy_;
  std::map<std::string, std::shared_ptr<LiveSandbox>> sandboxes_;  // by id
  std::map<std::string, int> reserved_by_tenant_;  // creations in progress, counted in quotas
  std::map<std::string, uint64_t> reserved_memory_by_tenant_;
  int reserved_ = 0;
  bool draining_ = false;

  std::map<std::string, std::deque<std::shared_ptr<LiveSandbox>>> pool_;  // by profile
  // Pre-started interpreters by (profile, language, kind), and languages that cannot pre-start.
  std::map<std::tuple<std::string, std::string, PrestartKind>,
           std::deque<std::shared_ptr<Prestarted>>>
      prestarted_;
  std::set<std::string> cannot_prestart_;

  // Single-use sandboxes whose run has answered, to destroy off the answer's path (retire()).
  std::deque<std::pair<std::shared_ptr<LiveSandbox>, std::function<void()>>> retiring_;
  std::condition_variable reaper_cv_;
  std::condition_variable pool_cv_;
  bool stopping_ = false;
  std::thread reaper_;
  std::thread pool_thread_;
};

}  // namespace airlock::sandbox
