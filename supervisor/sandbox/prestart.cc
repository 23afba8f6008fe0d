// Pre-started interpreters: single-use sandboxes whose interpreter was started ahead of its
// program and waits on stdin for exactly one one-shot program (one_shot.cc sends it). Each runs
// one program and is destroyed after: no state, memory or address-space layout is shared between
// programs (no fork from a zygote).
//
// A profile with `preload` keeps two kinds per language: interpreters that imported the modules
// and interpreters that did not. A program naming none of them gets the lighter one: it starts
// as fast, and its exit does not unmap a hundred megabytes of pandas and matplotlib. A profile
// whose review chain has python_ast also keeps checker interpreters for it, whatever its
// `prestart`: one that parsed hostile code never judges the next.
#include <algorithm>
#include <cstdio>

#include "supervisor/log/log.h"
#include "supervisor/review/python_ast_reviewer.h"
#include "supervisor/sandbox/environment.h"
#include "supervisor/sandbox/live_sandbox.h"
#include "supervisor/sandbox/manager.h"
#include "supervisor/sandbox/paths.h"

namespace airlock::sandbox {

namespace {

bool identifierChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}

// "pandas" of "pandas.io.json", "@scope/pkg" of "@scope/pkg/sub", "lodash" of "lodash/fp".
std::string_view topLevel(std::string_view module) {
  size_t from = 0;
  if (module.starts_with('@')) {
    from = module.find('/');
    if (from == std::string_view::npos) return module;
    ++from;
  }
  return module.substr(0, module.find_first_of("./", from));
}

bool reviewsPythonAst(const policy::Profile& profile) {
  const auto& chain = profile.review.chain;
  return std::find(chain.begin(), chain.end(), "python_ast") != chain.end();
}

}  // namespace

bool wantsPreload(std::string_view program, const std::vector<std::string>& preload) {
  for (const auto& m : preload) {
    std::string_view name = topLevel(m);
    if (name.empty()) continue;
    for (size_t at = program.find(name); at != std::string_view::npos;
         at = program.find(name, at + 1)) {
      size_t end = at + name.size();
      if ((at == 0 || !identifierChar(program[at - 1])) &&
          (end == program.size() || !identifierChar(program[end])))
        return true;
    }
  }
  return false;
}

size_t Manager::prestartTarget(const policy::Profile& profile, const std::string& language,
                               PrestartKind kind) {
  switch (kind) {
    case PrestartKind::kPlain:
      return profile.lifetime.prestart ? profile.lifetime.pool_size : 0;
    case PrestartKind::kPreloaded:
      return profile.lifetime.prestart && !profile.lifetime.preload.empty()
                 ? profile.lifetime.pool_size
                 : 0;
    case PrestartKind::kChecker:
      return language == "python" && reviewsPythonAst(profile) ? profile.review.python_ast.pool_size
                                                               : 0;
  }
  return 0;
}

SResult<std::shared_ptr<Prestarted>> Manager::startPrestarted(const policy::Profile& profile,
                                                              const std::string& language,
                                                              PrestartKind kind) {
  auto lang = this->language(language);
  if (!lang) return std::unexpected(lang.error());
  // A checker is the checker program itself, started as a one-shot program is: it imports and
  // defines what it needs, then blocks reading the code to judge from its stdin.
  if (kind == PrestartKind::kChecker) {
    auto command = (*lang)->buildInline(review::PythonAstReviewer::checkerScript());
    if (!command)
      return serviceError(ErrorCode::kInternal,
                          "language '" + language + "': " + command.error().message());
    return startWaiting(profile, **lang, *command, kind);
  }
  auto command = (*lang)->buildPrestart(
      kind == PrestartKind::kPreloaded ? profile.lifetime.preload : std::vector<std::string>{});
  if (!command) {
    int e = command.error().errnum();
    if (e == ENOTSUP || e == EINVAL) {  // shell, or a plugin older than ABI 1.4: never again
      std::lock_guard lock(mu_);
      cannot_prestart_.insert(language);
    }
    return serviceError(ErrorCode::kInternal,
                        "language '" + language + "': " + command.error().message());
  }
  return startWaiting(profile, **lang, *command, kind);
}

SResult<std::shared_ptr<Prestarted>> Manager::startWaiting(const policy::Profile& profile,
                                                           const plugin::Language& lang,
                                                           const plugin::Language::Command& command,
                                                           PrestartKind kind) {
  const std::string& language = lang.name();
  auto live = startBox(profile);
  if (!live) return std::unexpected(live.error());
  protocol::Exec exec;
  exec.argv = command.argv;
  exec.env = executionEnvironment(command.env, (*live)->profile.env, {});  // with the proxy's
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
  p->language = language;
  p->kind = kind;
  p->run = std::move(*run);
  return p;
}

std::shared_ptr<Prestarted> Manager::takePrestarted(const std::string& profile,
                                                    const std::string& language,
                                                    std::initializer_list<PrestartKind> kinds) {
  for (;;) {
    std::shared_ptr<Prestarted> p;
    {
      std::lock_guard lock(mu_);
      for (PrestartKind kind : kinds) {
        auto it = prestarted_.find({profile, language, kind});
        if (it == prestarted_.end() || it->second.empty()) continue;
        p = it->second.front();
        it->second.pop_front();
        break;
      }
      if (p == nullptr) return nullptr;
    }
    pool_cv_.notify_all();  // refill
    // Anything it said while waiting (nothing, normally) is dropped; one that ended in the pool
    // (killed, crashed, OOM while preloading) is replaced by the next one.
    if (p->run->drain()) return p;
    log::warn("pool.prestart_ended",
              {{"language", language}, {"profile", profile}, {"effect", "dropped"}});
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
