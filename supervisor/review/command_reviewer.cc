#include "supervisor/review/command_reviewer.h"

#include <string.h>

#include <chrono>

#include "supervisor/review/external_verdict.h"

namespace airlock::review {

namespace {

constexpr size_t kMaxStderr = 4096;

}  // namespace

Result<Verdict> CommandReviewer::review(const Subject& subject) {
  if (command_.argv.empty()) return fail("review.command.argv is empty");
  SandboxJob job;
  job.argv = command_.argv;
  job.stdin_data = subject.toJson().dump() + "\n";
  job.timeout = std::chrono::milliseconds(command_.timeout_ms);
  const std::string who = "review command '" + command_.argv[0] + "'";
  auto ran = runner_->run(job);
  if (!ran) return Unexpected(std::move(ran.error()).wrap(who));
  if (ran->timed_out) {
    return Unexpected(Error(who + " gave no verdict within " + std::to_string(command_.timeout_ms) +
                                " ms and was killed",
                            {}, ETIMEDOUT));
  }
  std::string errors = ran->stderr_data.substr(0, kMaxStderr);
  while (!errors.empty() && errors.back() == '\n') errors.pop_back();
  const std::string said = errors.empty() ? "" : " (stderr: " + errors + ")";
  if (ran->signal != 0) {
    return fail(who + " was killed by signal " + sigabbrev_np(ran->signal) + said);
  }
  if (ran->exit_code != 0) {
    // 127: the agent could not start it (no such file, not executable): its stderr says why.
    return fail(who + " exited with status " + std::to_string(ran->exit_code) + said);
  }
  if (ran->stdout_data.size() > kMaxExternalAnswer) {
    return fail(who + ": its answer is over " + std::to_string(kMaxExternalAnswer) + " bytes");
  }
  auto verdict = parseExternalVerdict(ran->stdout_data);
  if (!verdict) return Unexpected(std::move(verdict.error()).wrap(who));
  return verdict;
}

}  // namespace airlock::review
