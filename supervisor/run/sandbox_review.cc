#include "supervisor/run/sandbox_review.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "airlock/unique_fd.h"

namespace airlock::run {

Result<review::SandboxJobResult> OneShotSandboxRunner::run(const review::SandboxJob& job) {
  // stdin: a socket, so the writer gets EPIPE (MSG_NOSIGNAL) rather than SIGPIPE if the sandbox
  // ends without reading it all.
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return sysError("socketpair", "review sandbox stdin");
  }
  UniqueFd stdin_read(sv[0]), stdin_write(sv[1]);
  int cancel[2];
  if (::pipe2(cancel, O_CLOEXEC) != 0) return sysError("pipe2", "review sandbox cancel");
  UniqueFd cancel_read(cancel[0]), cancel_write(cancel[1]);

  RunRequest req;
  req.language = job.language;
  req.inline_code = true;
  req.code = job.code;
  req.policy_file = policy_file_;
  req.profile = profile_;
  req.review = false;  // the checker is airlock's own code; reviewing it would recurse
  req.audit = false;   // nor is it the agent's execution: its result is the verdict
  req.timeout_s = static_cast<uint32_t>((job.timeout.count() + 999) / 1000);
  req.stdin_fd = stdin_read.get();
  req.cancel_fd = cancel_read.get();

  std::thread writer([&, data = job.stdin_data, fd = stdin_write.release()] {
    UniqueFd out(fd);
    std::string_view left = data;
    while (!left.empty()) {
      ssize_t n = ::send(out.get(), left.data(), left.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      left.remove_prefix(static_cast<size_t>(n));
    }
  });
  // The deadline: cancels the run (runOnce then tears the sandbox down).
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false, cancelled = false;
  std::thread timer([&] {
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, job.timeout, [&] { return finished; })) {
      cancelled = true;
      (void)!::write(cancel_write.get(), "x", 1);
    }
  });
  auto ran = runOnce(req, paths_);
  {
    std::lock_guard lock(mu);
    finished = true;
  }
  cv.notify_all();
  timer.join();
  stdin_read.reset();  // a writer still blocked gets EPIPE
  writer.join();

  if (!ran) return Unexpected(ran.error());
  review::SandboxJobResult out;
  out.timed_out = cancelled || ran->status == Status::kTimeout;
  out.exit_code = ran->status == Status::kExited ? ran->exit_code : -1;
  out.stdout_data = std::move(ran->stdout_data);
  out.stderr_data = ran->status == Status::kExited || ran->message.empty()
                        ? std::move(ran->stderr_data)
                        : ran->message + "\n" + ran->stderr_data;
  return out;
}

}  // namespace airlock::run
