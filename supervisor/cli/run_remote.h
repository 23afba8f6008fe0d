// `airlock run` through a running `airlock serve` (POST /v1/runs, docs/api.md "Runs"): the same
// live output, exit codes and --json record as a run in this process (run_command.cc), served
// by the supervisor's manager under its policy, tenants and quotas.
#pragma once

#include <optional>
#include <string>

#include "airlock/client/endpoint.h"
#include "airlock/result.h"
#include "supervisor/sandbox/one_shot.h"

namespace airlock::cli {

// The supervisor to send a run to: AIRLOCK_URL, else the default socket, when it accepts a
// connection. nullopt: none does (run in this process); `tried` then says what was tried and
// why it failed. An Error: AIRLOCK_URL is malformed.
Result<std::optional<sdk::Endpoint>> reachableSupervisor(std::string& tried);

struct RemoteRun {
  bool json = false;        // print the record instead of the live output
  bool pass_stdin = false;  // send this process's stdin to the program (read to its end first)
  bool verbose = false;     // each policy relaxation in full, not one summary line
};

// Sends `req` (its code or script path, args, env, limits, files) to the supervisor at
// `endpoint` and prints what `airlock run` prints. Returns the exit code. A supervisor that
// refuses (401, 403, 413, 429, 503, ...) is reported with its message and 125.
int runRemote(const sdk::Endpoint& endpoint, const sandbox::RunRequest& req,
              const RemoteRun& options);

}  // namespace airlock::cli
