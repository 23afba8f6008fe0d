#include "supervisor/run/one_shot.h"

#include "supervisor/audit/engine.h"
#include "supervisor/audit/review_record.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "airlock/policy/policy.h"
#include "supervisor/plugin/registry.h"
#include "supervisor/review/chain.h"
#include "supervisor/run/environment.h"
#include "supervisor/run/sandbox_review.h"
#include "supervisor/sandbox/orphans.h"
#include "supervisor/sandbox/rootfs_view.h"
#include "supervisor/sandbox/sandbox.h"

namespace airlock::run {

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// Grace beyond the policy timeout before the supervisor stops trusting the agent to report.
constexpr auto kAgentGrace = std::chrono::seconds(5);
constexpr auto kFileTimeout = std::chrono::seconds(60);

void writeAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the reader went away; keep running, output is still collected
    data.remove_prefix(static_cast<size_t>(n));
  }
}

// The program file's bytes, as the review chain sees them.
Result<std::string> readProgram(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return sysError("open", path);
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sysError("read", path);
    if (n == 0) return text;
    text.append(buf, static_cast<size_t>(n));
  }
}

std::string parentOf(const std::string& path) {
  return std::filesystem::path(path).parent_path().string();
}

}  // namespace

Result<std::string> sandboxPath(const std::string& p) {
  if (p.empty()) return fail("empty sandbox path");
  if (p.find('\0') != std::string::npos) return fail("sandbox path contains a NUL byte");
  std::string abs = p.front() == '/' ? p : "/home/user/" + p;
  return std::filesystem::path(abs).lexically_normal().string();
}

Result<RunResult> runOnce(const RunRequest& req, const RunPaths& paths) {
  auto t0 = Clock::now();
  RunResult res;

  auto pol = req.policy_file.empty() ? Result<policy::Policy>(policy::builtinDefault())
                                     : policy::loadFile(req.policy_file);
  if (!pol) return Unexpected(pol.error());
  res.policy_source = pol->source;
  res.policy_hash = pol->hash;
  auto base = pol->profile(req.profile.empty() ? pol->default_profile : req.profile);
  if (!base) return Unexpected(base.error());
  policy::Profile profile = **base;
  res.profile = profile.name;
  if (req.timeout_s) profile.limits.timeout_s = *req.timeout_s;
  if (req.memory_mb) {
    // An explicit --memory wins: the tmpfs workspace and /tmp (which count as memory) shrink
    // to fit inside it rather than the run being refused.
    auto& l = profile.limits;
    l.memory_mb = *req.memory_mb;
    if (l.workspace_mb + l.tmp_mb >= l.memory_mb) {
      l.workspace_mb = std::max<uint64_t>(1, std::min(l.workspace_mb, l.memory_mb / 2));
      l.tmp_mb = std::max<uint64_t>(1, std::min(l.tmp_mb, l.memory_mb / 4));
    }
  }
  if (auto v = policy::validate(profile); !v)
    return Unexpected(std::move(v.error()).wrap("with the command-line overrides"));
  res.relaxations = policy::relaxations(profile);
  if (req.log_fd >= 0) {
    // Operators must never loosen a sandbox silently: every relaxation is said on each run.
    for (const auto& r : res.relaxations)
      writeAll(req.log_fd, "airlock: policy relaxation: " + r + "\n");
  }

  auto registry = plugin::Registry::loadDirectory(paths.plugin_dir);
  auto lang = req.language.empty()
                  ? (req.inline_code ? Result<std::shared_ptr<plugin::Language>>(
                                           fail("no language given: pass --lang (python, node, "
                                                "shell) or a script file with a known extension"))
                                     : registry.languageForFile(req.script))
                  : registry.language(req.language);
  if (!lang) return Unexpected(lang.error());
  res.language = (*lang)->name();

  if (std::find(profile.languages.begin(), profile.languages.end(), res.language) ==
      profile.languages.end()) {
    res.status = Status::kRefused;
    std::string allowed;
    for (const auto& l : profile.languages) allowed += (allowed.empty() ? "" : ", ") + l;
    res.message = "profile '" + profile.name + "' does not allow language '" + res.language +
                  "' (allowed: " + allowed + ")";
    res.total_ms = msSince(t0);
    return res;
  }

  // The [audit] log: review verdicts, then the sandbox's events. Declared before the sandbox,
  // so it outlives it.
  std::unique_ptr<audit::AuditLog> audit_log;
  // One sandbox, one execution: the execution id is the sandbox's id, chosen now so that a
  // review record names the execution even when it is denied and no sandbox ever exists.
  const std::string execution_id = sandbox::newSandboxId();
  if (req.audit && !pol->audit.log.empty()) {
    auto log = audit::AuditLog::open({.path = pol->audit.log,
                                      .max_bytes = uint64_t{pol->audit.max_mb} << 20,
                                      .keep = static_cast<int>(pol->audit.keep)});
    if (!log) return Unexpected(std::move(log.error()).wrap("[audit] log"));
    audit_log = std::move(*log);
  }

  // The review chain decides before any sandbox exists.
  if (req.review && !profile.review.chain.empty()) {
    auto text = req.inline_code ? Result<std::string>(req.code) : readProgram(req.script);
    if (!text) return Unexpected(text.error());
    review::ChainOptions options;
    options.policy_hash = pol->hash;
    options.sandbox_runner =
        std::make_shared<OneShotSandboxRunner>(req.policy_file, profile.name, paths);
    options.plugins = &registry;
    auto chain = review::Chain::build(profile, std::move(options));
    if (!chain) return Unexpected(chain.error());
    review::Subject subject = review::Subject::code(res.language, std::move(*text));
    subject.profile = profile.name;
    review::Verdict verdict = (*chain)->review(subject).verdict;
    if (verdict.decision == review::Decision::kHold) {
      verdict.decision = review::Decision::kDeny;
      verdict.reason = std::string(kHoldNeedsServe) + " (" + verdict.reason + ")";
    }
    res.review = verdict;
    if (audit_log) {
      // No sandbox exists yet: the record carries no sandbox id, and a denied run never gets one.
      if (auto w = audit::writeReview(*audit_log, {.execution = execution_id}, verdict, subject);
          !w)
        return Unexpected(std::move(w.error()).wrap("[audit] log"));
    }
    if (!verdict.allowed()) {
      res.status = Status::kRefused;
      res.message = verdict.message();
      res.total_ms = msSince(t0);
      return res;
    }
  }

  // Leftovers of runs that were killed with -9 are removed before we add one of our own.
  if (auto r = sandbox::reclaimOrphans(paths.state_dir); !r)
    std::fprintf(stderr, "airlock: warning: %s\n", r.error().message().c_str());

  sandbox::SandboxOptions opts;
  opts.profile = &profile;
  opts.mounts = sandbox::composeView((*lang)->image_paths, profile.filesystem.readonly_paths);
  opts.agent_path = paths.agent_path;
  opts.state_dir = paths.state_dir;
  opts.id = execution_id;
  // The audit engine: opened where an earlier airlock process pinned it (loaded and pinned by
  // the first), attached before PID 1 starts.
  if (req.audit && sandbox::needsAudit(profile)) {
    auto ctx = std::make_shared<sandbox::AuditContext>();
    // Read from this thread while it waits for the agent (setSideReader below), not a thread.
    auto engine = audit::AuditEngine::load({.ring_bytes = pol->audit.run_ring_kb << 10,
                                            .pin_root = audit::kEnginePinRoot,
                                            .reader_thread = false});
    if (engine) {
      ctx->engine = std::move(*engine);
    } else {
      ctx->load_error = engine.error().message();
    }
    ctx->log = audit_log.get();
    opts.audit = std::move(ctx);
  }
  if (sandbox::needsNetworkLink(profile)) {
    // Shares the nft table and the address ranges with a serve and other runs (lock files).
    auto host = net::NetworkHost::create(sandbox::networkOptionsFor(*pol));
    if (!host) return Unexpected(std::move(host.error()).wrap("[egress]"));
    opts.network = std::move(*host);
  }
  res.prepare_ms = msSince(t0);
  auto sb = sandbox::Sandbox::create(registry, opts);
  if (!sb) return Unexpected(sb.error());
  sandbox::Sandbox& box = **sb;
  box.agent().setCancelFd(req.cancel_fd);
  if (opts.audit && opts.audit->engine) {
    std::shared_ptr<audit::AuditEngine> engine = opts.audit->engine;
    box.agent().setSideReader(engine->readableFd(), [engine] { engine->pump(); });
  }
  res.sandbox_id = box.id();
  res.create_ms = box.timings().create_ms;
  res.create_steps = box.timings().steps;

  auto finish = [&](RunResult r) -> Result<RunResult> {
    auto td = Clock::now();
    auto d = box.destroy();
    r.teardown_ms = msSince(td);
    r.total_ms = msSince(t0);
    if (!d) return Unexpected(std::move(d.error()).wrap("sandbox teardown"));
    return r;
  };
  auto error = [&](Status s, std::string message) {
    res.status = s;
    res.message = std::move(message);
    return finish(std::move(res));
  };

  auto mkdirs = [&](const std::string& dir) -> Result<> {
    if (dir == "/home/user" || dir == "/tmp") return {};
    protocol::Exec mk;
    mk.argv = {"/usr/bin/mkdir", "-p", "--", dir};
    mk.env = {"PATH=/usr/bin:/bin"};
    mk.stdout_cap = mk.stderr_cap = 4096;
    std::string err;
    auto r = box.agent().exec(
        mk, [&](protocol::Stream, std::string_view d) { err.append(d); }, -1,
        Clock::now() + kFileTimeout);
    if (!r) return Unexpected(r.error());
    if (r->exited.exit_code != 0) return fail("mkdir -p: " + err, dir);
    return {};
  };
  auto upload = [&](const std::string& local, const std::string& dest) -> Result<uint64_t> {
    UniqueFd fd(open(local.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return sysError("open", local);
    if (auto r = mkdirs(parentOf(dest)); !r) return Unexpected(r.error());
    return box.agent().writeFile(dest, 0644, fd.get(), Clock::now() + kFileTimeout);
  };

  for (const auto& f : req.files_in) {
    FileOutcome fo{f.sandbox, f.local, 0, {}};
    auto dest = sandboxPath(f.sandbox);
    auto n = dest ? upload(f.local, *dest) : Result<uint64_t>(Unexpected(dest.error()));
    if (!n)
      return error(Status::kError,
                   "--file " + f.local + ":" + f.sandbox + ": " + n.error().message());
    fo.sandbox_path = *dest;
    fo.bytes = *n;
    res.files_in.push_back(fo);
  }

  // The program: inline code on the command line when it fits, otherwise as a file.
  std::vector<const char*> arg_ptrs;
  for (const auto& a : req.args) arg_ptrs.push_back(a.c_str());
  arg_ptrs.push_back(nullptr);
  airlock_code_request_v1 code_req{};
  code_req.struct_size = sizeof code_req;
  code_req.args = arg_ptrs.data();
  std::string program_path;
  if (req.inline_code && req.code.size() <= (*lang)->max_inline_bytes) {
    code_req.source = AIRLOCK_CODE_INLINE;
    code_req.code = {req.code.data(), req.code.size()};
  } else {
    std::string ext = (*lang)->extensions.empty() ? "" : (*lang)->extensions.front();
    program_path = req.inline_code
                       ? "/tmp/airlock-main" + ext
                       : "/home/user/" + std::filesystem::path(req.script).filename().string();
    Result<uint64_t> n = req.inline_code ? [&]() -> Result<uint64_t> {
      // Large inline code travels like a file: through a pipe into the agent.
      int p[2];
      if (pipe2(p, O_CLOEXEC) != 0) return sysError("pipe2", "inline code");
      UniqueFd rd(p[0]), wr(p[1]);
      std::string data = req.code;
      std::thread writer([&] {
        writeAll(wr.get(), data);
        wr.reset();
      });
      auto r = box.agent().writeFile(program_path, 0644, rd.get(), Clock::now() + kFileTimeout);
      writer.join();
      return r;
    }()
        : upload(req.script, program_path);
    if (!n)
      return error(Status::kError, "copying the program into the sandbox: " + n.error().message());
    code_req.source = AIRLOCK_CODE_FILE;
    code_req.path = program_path.c_str();
  }
  auto command = (*lang)->build(code_req);
  if (!command) return error(Status::kError, command.error().message());

  protocol::Exec exec;
  exec.argv = command->argv;
  exec.env = executionEnvironment(command->env, profile.env, req.env);
  exec.cwd = "/home/user";
  exec.timeout_ms = uint64_t{profile.limits.timeout_s} * 1000;
  exec.stdout_cap = exec.stderr_cap = profile.limits.output_bytes;
  exec.stdin_pipe = req.stdin_fd >= 0;

  if (box.audit() != nullptr) box.audit()->beginExecution(execution_id);
  auto deadline = Clock::now() + std::chrono::seconds(profile.limits.timeout_s) + kAgentGrace;
  auto outcome = box.agent().exec(
      exec,
      [&](protocol::Stream s, std::string_view data) {
        bool out = s == protocol::Stream::kStdout;
        int live = out ? req.live_stdout_fd : req.live_stderr_fd;
        if (live >= 0) writeAll(live, data);
        std::string& keep = out ? res.stdout_data : res.stderr_data;
        if (keep.size() < profile.limits.output_bytes)
          keep.append(data.substr(0, profile.limits.output_bytes - keep.size()));
      },
      req.stdin_fd, deadline);
  std::optional<audit::AuditSummary> summary;
  if (box.audit() != nullptr) {
    auto ended = box.audit()->endExecution();
    if (!ended) return error(Status::kError, ended.error().message());
    summary = std::move(*ended);
    res.audit = summary->toJson();
    res.audit["execution"] = execution_id;
  }

  if (auto st = box.cgroupStats(); st) {
    res.memory_peak_bytes = st->memory_peak_bytes;
    res.oom_kills = st->oom_kills;
  }
  if (!outcome) {
    // The agent died or went silent: an OOM kill of the agent, a hostile takeover, or a bug.
    if (res.oom_kills > 0)
      return error(Status::kMemoryLimit, "the sandbox hit its memory limit of " +
                                             std::to_string(profile.limits.memory_mb) + " MiB");
    return error(Status::kError, outcome.error().message());
  }
  const auto& x = outcome->exited;
  res.exit_code = x.exit_code;
  res.signal = x.signal;
  res.stdout_truncated = x.stdout_truncated;
  res.stderr_truncated = x.stderr_truncated;
  res.stdout_bytes = x.stdout_bytes;
  res.stderr_bytes = x.stderr_bytes;
  res.exec_ms = static_cast<double>(x.wall_us) / 1000.0;
  res.user_us = x.user_us;
  res.sys_us = x.sys_us;
  res.max_rss_kb = x.max_rss_kb;
  if (x.timed_out) {
    res.status = Status::kTimeout;
    res.message = "the execution exceeded its time limit of " +
                  std::to_string(profile.limits.timeout_s) + " s and was killed";
  } else if (x.signal == SIGKILL && res.oom_kills > 0) {
    res.status = Status::kMemoryLimit;
    res.message = "the sandbox hit its memory limit of " +
                  std::to_string(profile.limits.memory_mb) + " MiB and the program was killed";
  } else if (x.signal != 0) {
    res.status = Status::kSignaled;
    res.message = std::string("the program was killed by signal ") + sigabbrev_np(x.signal);
  } else {
    res.status = Status::kExited;
    if (!outcome->error.empty()) res.message = outcome->error;
  }
  if (summary && summary->failed()) {
    // Fail closed: the record of what ran is incomplete, so the run does not count as done.
    res.status = Status::kError;
    res.message = "the audit lost " + std::to_string(summary->events_dropped) +
                  " events (ring buffer full) and the profile fails closed (audit.fail_closed): "
                  "the execution's record is incomplete";
  } else if (summary && res.message.empty() && !summary->firstDenial().empty()) {
    // The program sees EPERM; the denial says which rule refused it.
    res.message = "audit: " + summary->firstDenial();
  }

  for (const auto& f : req.files_out) {
    FileOutcome fo{f.sandbox, f.local, 0, {}};
    auto src = sandboxPath(f.sandbox);
    if (!src) {
      fo.error = src.error().message();
    } else {
      fo.sandbox_path = *src;
      UniqueFd fd(open(f.local.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
      auto n = fd ? box.agent().readFile(*src, profile.limits.workspace_mb << 20, fd.get(),
                                         Clock::now() + kFileTimeout)
                  : Result<uint64_t>(sysError("open", f.local));
      if (n) {
        fo.bytes = *n;
      } else {
        fo.error = n.error().message();
        if (fd) unlink(f.local.c_str());  // no half-written copies
      }
    }
    res.files_out.push_back(fo);
  }
  return finish(std::move(res));
}

}  // namespace airlock::run
