// A stateful code context: one language session driver process living in a served sandbox
// (plugins/language/*/session_driver.*), fed one run at a time.
//
// The driver reads requests as JSON lines on its stdin and reports on its control pipe (fd 3)
// as JSON lines: ready, then per run result/display/error events and one done. Its stdout and
// stderr are the run's. Everything the driver says is untrusted: lines are bounded and shapes
// checked before they become API events.
#pragma once

#include <memory>
#include <mutex>

#include "airlock/protocol/messages.h"
#include "supervisor/sandbox/agent/connection.h"
#include "supervisor/sandbox/agent/encoding.h"
#include "supervisor/sandbox/agent/event_queue.h"
#include "supervisor/sandbox/service.h"

namespace airlock::sandbox {

struct DriverLaunch {
  protocol::Exec exec;  // argv/env of the driver; the context fills in pipes and scope
  std::string language;
  std::string cwd;          // reported in ContextInfo; exec.cwd is what the agent uses
  uint64_t output_cap = 0;  // stdout and stderr bytes kept per run and stream
};

class CodeContext : public std::enable_shared_from_this<CodeContext> {
 public:
  CodeContext(std::shared_ptr<AgentConnection> conn, std::string id, DriverLaunch launch);
  ~CodeContext();

  // A context whose driver outlived the dead supervisor of an adopted sandbox: `note` is what
  // this class told the agent (noteText()), `launch` what restart() starts. A run that was in
  // flight goes on; its events, from a "supervisor_restart" event on, are for attachRun().
  static std::shared_ptr<CodeContext> adopt(std::shared_ptr<AgentConnection> conn,
                                            const protocol::LiveExecution& live, const Json& note,
                                            DriverLaunch launch);
  // The events of a run that was in flight when the supervisor died ("last": the latest such
  // run), everything so far and then live; kNotFound for other runs, whose events went to the
  // client that started them.
  SResult<std::unique_ptr<EventStream>> attachRun(const std::string& run_id);

  // Starts the driver and waits for its ready line.
  SResult<> start();
  // Stops the driver (if alive) and starts a fresh one.
  SResult<> restart();
  void stop();
  // One run; the stream ends with the "end" event. A busy context answers 409.
  // `env`: variables set for this run only; the driver restores them after it.
  SResult<std::unique_ptr<EventStream>> run(const std::string& code,
                                            const std::map<std::string, std::string>& env,
                                            std::chrono::milliseconds timeout);
  ContextInfo info() const;
  // The next run says context_restarted: this context replaces one a restart lost (an agent
  // from before session keeping ended its driver).
  void replacesALostContext() {
    std::lock_guard lock(mu_);
    restarted_by_timeout_ = true;
  }

 private:
  struct Run;
  bool onFrame(const protocol::FrameHeader& h, std::string_view payload);
  void onControlLine(std::string_view line);
  void handleControlLine(std::string_view line);
  // execution_count: the driver's count for the cell (Jupyter's In [N]); null when unknown.
  void endRun(const std::string& status, Json error = nullptr, Json execution_count = nullptr);
  void checkTimeout();
  void sendSignal(int signo);
  // What the agent keeps for the next supervisor: the context and the run in progress. mu_ held.
  std::string noteText() const;

  std::shared_ptr<AgentConnection> conn_;
  DriverLaunch launch_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  ContextInfo info_;
  uint32_t request_id_ = 0;
  bool alive_ = false;
  bool ready_ = false;
  std::string start_error_;
  std::string control_;  // control bytes not yet ending in a newline
  uint64_t generation_ = 0;
  std::shared_ptr<Run> run_;        // the run in progress
  std::shared_ptr<Run> recovered_;  // the latest run taken over from a dead supervisor
  bool restarted_by_timeout_ = false;
};

}  // namespace airlock::sandbox
