#include "supervisor/service/review_sandbox_runner.h"

#include <sys/mman.h>
#include <unistd.h>

#include "airlock/unique_fd.h"
#include "supervisor/run/environment.h"
#include "supervisor/sandbox/rootfs_view.h"
#include "supervisor/sandbox/sandbox.h"

namespace airlock::service {

using Clock = std::chrono::steady_clock;

Result<review::SandboxJobResult> ReviewSandboxRunner::run(const review::SandboxJob& job) {
  auto deadline = Clock::now() + job.timeout;
  auto lang = registry_.language(job.language);
  if (!lang) return Unexpected(std::move(lang.error()).wrap("review sandbox"));
  auto command = (*lang)->buildInline(job.code);
  if (!command) return Unexpected(std::move(command.error()).wrap("review sandbox"));

  sandbox::SandboxOptions opts;
  opts.profile = &profile_;
  opts.mounts = sandbox::composeView((*lang)->image_paths, profile_.filesystem.readonly_paths);
  opts.agent_path = agent_path_;
  opts.state_dir = state_dir_;
  auto box = sandbox::Sandbox::create(registry_, opts);
  if (!box) return Unexpected(std::move(box.error()).wrap("review sandbox"));

  // The request (with the code under review) is stdin: a sealed memory file, whatever its size.
  UniqueFd in(memfd_create("airlock-review-stdin", MFD_CLOEXEC));
  if (!in) return sysError("memfd_create", "review sandbox stdin");
  for (size_t done = 0; done < job.stdin_data.size();) {
    ssize_t n = write(in.get(), job.stdin_data.data() + done, job.stdin_data.size() - done);
    if (n < 0) return sysError("write", "review sandbox stdin");
    done += static_cast<size_t>(n);
  }
  lseek(in.get(), 0, SEEK_SET);

  protocol::Exec exec;
  exec.argv = command->argv;
  exec.env = run::executionEnvironment(command->env, profile_.env, {});
  exec.timeout_ms = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(job.timeout).count());
  exec.stdout_cap = exec.stderr_cap = 1 << 20;
  exec.stdin_pipe = true;
  review::SandboxJobResult result;
  auto outcome = (*box)->agent().exec(
      exec,
      [&](protocol::Stream stream, std::string_view data) {
        (stream == protocol::Stream::kStdout ? result.stdout_data : result.stderr_data)
            .append(data);
      },
      in.get(), deadline);
  (void)(*box)->destroy();
  if (!outcome) {
    result.timed_out = Clock::now() >= deadline;
    if (!result.timed_out) return Unexpected(std::move(outcome.error()).wrap("review sandbox"));
    return result;
  }
  result.timed_out = outcome->exited.timed_out;
  if (!result.timed_out && outcome->exited.signal == 0)
    result.exit_code = outcome->exited.exit_code;
  return result;
}

}  // namespace airlock::service
