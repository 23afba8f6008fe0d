// One process started in a served sandbox: a foreground command streamed to its caller, or a
// background command whose output is kept (bounded by the agent's caps) until someone attaches.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "airlock/protocol/messages.h"
#include "supervisor/sandbox/agent/connection.h"
#include "supervisor/sandbox/agent/encoding.h"
#include "supervisor/sandbox/agent/event_queue.h"
#include "supervisor/sandbox/service.h"

namespace airlock::sandbox {

class Command : public std::enable_shared_from_this<Command> {
 public:
  // Sends the Exec and waits until the agent reports the process started (or why it could not).
  static SResult<std::shared_ptr<Command>> start(std::shared_ptr<AgentConnection> conn,
                                                 protocol::Exec exec, CommandInfo info,
                                                 std::string stdin_data);
  // A command the dead supervisor of an adopted sandbox had started: already exited, known only
  // by what the agent reported (docs/api.md "When the supervisor dies").
  static std::shared_ptr<Command> endedByRestart(std::shared_ptr<AgentConnection> conn,
                                                 const protocol::EndedExecution& ended);
  // A command the dead supervisor of an adopted sandbox had started, still running (or ended
  // while no supervisor was there): `note` is what start() told the agent. Its events continue
  // from a "supervisor_restart" event that says what the agent held and dropped meanwhile; it
  // is attachable like a background command, since the client that started it is gone.
  static std::shared_ptr<Command> adopt(std::shared_ptr<AgentConnection> conn,
                                        const protocol::LiveExecution& live, const Json& note);
  ~Command();

  // Foreground: the only stream, from the start event on; destroying it early kills the process.
  std::unique_ptr<EventStream> foregroundStream();
  // Background: everything kept so far, then live events.
  std::unique_ptr<EventStream> attach();

  SResult<> sendStdin(std::string data, bool eof);
  SResult<> signal(int signo);
  CommandInfo info() const;
  bool running() const;

 private:
  Command(std::shared_ptr<AgentConnection> conn, CommandInfo info)
      : conn_(std::move(conn)), info_(std::move(info)) {}
  bool onFrame(const protocol::FrameHeader& h, std::string_view payload);
  void deliver(Json event, bool last);

  std::shared_ptr<AgentConnection> conn_;
  uint32_t request_id_ = 0;
  int64_t started_ms_ = 0;
  Clock::time_point started_{};

  mutable std::mutex mu_;
  std::condition_variable started_cv_;
  CommandInfo info_;
  bool start_answered_ = false;
  std::string start_error_;
  bool exited_ = false;
  OutputEncoder out_enc_, err_enc_;
  std::shared_ptr<EventQueue> foreground_;  // foreground commands
  std::vector<Json> kept_;                  // background commands: every event so far
  std::vector<std::weak_ptr<EventQueue>> attached_;
};

}  // namespace airlock::sandbox
