// Pre-started interpreters: single-use sandboxes whose interpreter was started ahead of its
// program, importing the profile's `preload` modules, and waits on stdin for exactly one
// one-shot program (one_shot.cc sends it). Each runs one program and is destroyed after: no
// state, memory or address-space layout is shared between programs (no fork from a zygote).
#include <cstdio>

#include "supervisor/sandbox/environment.h"
#include "supervisor/sandbox/live_sandbox.h"
#include "supervisor/sandbox/manager.h"
#include "supervisor/sandbox/paths.h"

namespace airlock::sandbox {

SResult<std::shared_ptr<Prestarted>> Manager::startPrestarted(const policy::Profile& profile,
                                                              const std::string& language) {
  auto lang = this->language(language);
  if (!lang) return std::unexpected(lang.error());
  auto command = (*lang)->buildPrestart(profile.lifetime.preload);
  if (!command) {
    int e = command.error().errnum();
    if (e == ENOTSUP || e == EINVAL) {  // shell, or a plugin older than ABI 1.4: never again
      std::lock_guard lock(mu_);
      cannot_prestart_.insert(language);
    }
    return serviceError(ErrorCode::kInternal,
                        "language '" + language + "': " + command.error().message());
  }
  auto live = startBox(profile);
  if (!live) return std::unexpected(live.error());
  protocol::Exec exec;
  exec.argv = command->argv;
  exec.env = executionEnvironment(command->env, profile.env, {});
  exec.cwd = kWorkspace;
  exec.timeout_ms = 0;  // it waits in the pool; the program's limit is kept by one_shot.cc
  exec.stdout_cap = exec.stderr_cap = profile.limits.output_bytes;
  exec.stdin_pipe = true;
  auto run = ProgramRun::start(*(*live)->conn, exec);
  if (!run) {
    destroyLive(*live, "prestart");
    return serviceError(ErrorCode::kInternal,
                        "starting the " + language + " interpreter: " + run.error().message());
  }
  auto p = std::make_shared<Prestarted>();
  p->live = std::move(*live);
  p->language = (*lang)->name();
  p->run = std::move(*run);
  return p;
}

std::shared_ptr<Prestarted> Manager::takePrestarted(const std::string& profile,
                                                    const std::string& language) {
  for (;;) {
    std::shared_ptr<Prestarted> p;
    {
      std::lock_guard lock(mu_);
      auto it = prestarted_.find({profile, language});
      if (it == prestarted_.end() || it->second.empty()) return nullptr;
      p = it->second.front();
      it->second.pop_front();
    }
    pool_cv_.notify_all();  // refill
    // Anything it said while waiting (nothing, normally) is dropped; one that ended in the pool
    // (killed, crashed, OOM while preloading) is replaced by the next one.
    if (p->run->drain()) return p;
    std::fprintf(stderr, "airlock: a pre-started %s interpreter of '%s' had ended; dropped\n",
                 language.c_str(), profile.c_str());
    p->run.reset();
    destroyLive(p->live, "prestart");
  }
}

size_t Manager::prestartedCount() {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [key, q] : prestarted_) n += q.size();
  return n;
}

}  // namespace airlock::sandbox
