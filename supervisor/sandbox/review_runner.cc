#include "supervisor/sandbox/review_runner.h"

#include "supervisor/sandbox/manager.h"

namespace airlock::sandbox {

Result<review::SandboxJobResult> ReviewSandboxRunner::run(const review::SandboxJob& job) {
  RunRequest req;
  req.language = job.language;
  req.inline_code = true;
  req.code = job.code;
  req.argv = job.argv;
  req.profile = profile_;
  req.review = false;
  req.audit = false;
  req.checker = true;
  req.stdin_data = job.stdin_data;
  req.has_stdin_data = true;
  req.timeout_s = static_cast<uint32_t>((job.timeout.count() + 999) / 1000);
  req.deadline = Clock::now() + job.timeout;  // the job's timeout covers everything
  req.output_cap = 1 << 20;
  req.on_destroyed = [] {};  // the verdict need not wait for the checker's sandbox to go
  auto ran = manager_.runProgram(req);
  if (!ran) return Unexpected(std::move(ran.error()).wrap("review sandbox"));
  review::SandboxJobResult out;
  out.timed_out = ran->status == Status::kTimeout || Clock::now() >= req.deadline;
  out.exit_code = ran->status == Status::kExited ? ran->exit_code : -1;
  out.signal = ran->signal;
  out.stdout_data = std::move(ran->stdout_data);
  // What the manager said about the run (a program that could not start, a limit hit) first.
  out.stderr_data =
      ran->message.empty() ? std::move(ran->stderr_data) : ran->message + "\n" + ran->stderr_data;
  return out;
}

StandaloneReviewRunner::StandaloneReviewRunner(policy::Policy policy, std::string profile,
                                               std::string plugin_dir, std::string agent_path)
    : policy_(std::move(policy)),
      profile_(std::move(profile)),
      plugin_dir_(std::move(plugin_dir)),
      agent_path_(std::move(agent_path)) {}

StandaloneReviewRunner::~StandaloneReviewRunner() = default;

Result<review::SandboxJobResult> StandaloneReviewRunner::run(const review::SandboxJob& job) {
  std::lock_guard lock(mu_);  // one job at a time: a one-shot manager has one waiting thread
  if (manager_ == nullptr) {
    ManagerOptions o;
    o.policy = policy_;
    o.plugin_dir = plugin_dir_;
    o.agent_path = agent_path_;
    o.mode = ManagerOptions::Mode::kOneShot;
    auto m = Manager::start(std::move(o));
    if (!m) return Unexpected(std::move(m.error()).wrap("review sandbox"));
    manager_ = std::move(*m);
  }
  return ReviewSandboxRunner(*manager_, profile_).run(job);
}

}  // namespace airlock::sandbox
