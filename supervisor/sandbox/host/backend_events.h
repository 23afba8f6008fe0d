// Events from a backend's own monitoring into the sandbox's audit, for backends whose sandboxes
// the eBPF programs cannot see into (plugin ABI AIRLOCK_ISOLATION_OWN_AUDIT: gVisor's sentry runs
// the sandbox's processes and sockets itself).
//
// A thread waits on the backend's events_fd and moves what arrives into the SandboxAudit; the
// audit also pulls (drain) at the start and end of every execution, so an execution's record
// holds every exec and connect whose syscall had returned, with no race against the thread.
// Connections are decided as the eBPF programs would (audit::decideConnection) with the policy
// the link's filter enforces, so records name the same rules on every backend.
#pragma once

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <thread>

#include <airlock/plugin_abi_v1.h>

#include "airlock/result.h"
#include "airlock/unique_fd.h"
#include "supervisor/audit/engine.h"
#include "supervisor/plugin/instances.h"

namespace airlock::sandbox {

class BackendEvents : public std::enable_shared_from_this<BackendEvents> {
 public:
  struct Options {
    bool exec = true;     // the profile's audit.exec
    bool network = true;  // audit.network
  };
  // Starts the thread; `sandbox` and `audit` must stay valid until stop().
  static Result<std::shared_ptr<BackendEvents>> start(
      std::shared_ptr<plugin::IsolationBackend> backend, airlock_sandbox_v1* sandbox,
      audit::SandboxAudit* audit, Options options);
  ~BackendEvents();
  BackendEvents(const BackendEvents&) = delete;
  BackendEvents& operator=(const BackendEvents&) = delete;

  // Records every event received so far. Idempotent; a no-op after stop().
  void drain();
  // Pulls the last events, ends the thread; no call reaches the backend afterwards.
  void stop();

 private:
  BackendEvents() = default;
  void loop();
  void emit(const airlock_sandbox_event_v1& event);

  std::shared_ptr<plugin::IsolationBackend> backend_;
  airlock_sandbox_v1* sandbox_ = nullptr;
  audit::SandboxAudit* audit_ = nullptr;
  Options options_;
  UniqueFd stop_fd_;  // eventfd: wakes the thread to end
  std::thread thread_;
  std::mutex mu_;  // one reader of the backend at a time; guards the fields below
  bool stopped_ = false;
  bool broken_ = false;  // the monitoring failed once: reported as a loss, not retried
};

}  // namespace airlock::sandbox
