// One-shot programs: the manager's whole path for `airlock run` and reviewers' checker programs.
// policy → language → review → sandbox → files in → program → audit → files out → teardown.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "airlock/policy/relaxation_summary.h"
#include "supervisor/audit/engine.h"
#include "supervisor/log/log.h"
#include "supervisor/review/python_ast_reviewer.h"
#include "supervisor/sandbox/agent/file_ops.h"
#include "supervisor/sandbox/agent/program.h"
#include "supervisor/sandbox/environment.h"
#include "supervisor/sandbox/host/orphans.h"
#include "supervisor/sandbox/host/rootfs_view.h"
#include "supervisor/sandbox/live_sandbox.h"
#include "supervisor/sandbox/manager.h"
#include "supervisor/sandbox/package_access.h"
#include "supervisor/sandbox/paths.h"
#include "supervisor/sandbox/transfer_job.h"

namespace airlock::sandbox {

std::string archiveFormatOf(const std::string& name) {
  for (const auto& [ext, format] :
       std::initializer_list<std::pair<const char*, const char*>>{{".tar.gz", "tar.gz"},
                                                                  {".tgz", "tar.gz"},
                                                                  {".tar.zst", "tar.zst"},
                                                                  {".tzst", "tar.zst"},
                                                                  {".tar", "tar"},
                                                                  {".zip", "zip"}})
    if (name.ends_with(ext)) return format;
  return "";
}

bool namesTransfer(const std::string& dest) {
  const size_t colon = dest.find(':');
  return colon != std::string::npos && colon > 0 &&
         dest.substr(0, colon).find('/') == std::string::npos;
}

namespace {

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// Grace beyond the policy timeout before the supervisor stops trusting the agent to report.
constexpr auto kAgentGrace = std::chrono::seconds(5);

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

ByteSource fdSource(int fd, const std::string& what) {
  return [fd, what](char* buf, size_t cap) -> SResult<size_t> {
    for (;;) {
      ssize_t n = read(fd, buf, cap);
      if (n >= 0) return static_cast<size_t>(n);
      if (errno != EINTR)
        return serviceError(ErrorCode::kInternal, "read " + what + ": " + Error::errnoName(errno));
    }
  };
}

ByteSource stringSource(const std::string& data) {
  size_t off = 0;
  return [&data, off](char* buf, size_t cap) mutable -> SResult<size_t> {
    size_t n = std::min(cap, data.size() - off);
    std::memcpy(buf, data.data() + off, n);
    off += n;
    return n;
  };
}

// Applies `airlock run`'s --timeout, --memory and --isolation to the profile.
void applyOverrides(policy::Profile& profile, const RunRequest& req) {
  if (req.timeout_s) profile.limits.timeout_s = *req.timeout_s;
  if (req.isolation) profile.isolation = *req.isolation;
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
}

}  // namespace

Result<RunResult> Manager::runProgram(const RunRequest& req) {
  auto t0 = Clock::now();
  RunResult res;
  // req.on_destroyed, exactly once: here on every way out, unless a retired sandbox took it.
  struct DestroyedOnce {
    std::function<void()> f;
    ~DestroyedOnce() {
      if (f) f();
    }
  } destroyed{req.on_destroyed};

  auto pol = currentPolicy();
  res.policy_source = pol->source;
  res.policy_hash = pol->hash;
  auto base = pol->profile(req.profile.empty() ? pol->default_profile : req.profile);
  if (!base) return Unexpected(base.error());
  policy::Profile profile = **base;
  res.profile = profile.name;
  applyOverrides(profile, req);
  if (auto v = policy::validate(profile); !v)
    return Unexpected(std::move(v.error()).wrap("with the command-line overrides"));
  res.relaxations = policy::relaxations(profile);
  if (req.log_fd >= 0) {
    // Operators must never loosen a sandbox silently: every relaxation is said on each run.
    if (req.summarize_relaxations && !res.relaxations.empty())
      writeAll(req.log_fd,
               "airlock: " + policy::relaxationSummary(res.relaxations) + "; -v for details\n");
    else
      for (const auto& r : res.relaxations)
        writeAll(req.log_fd, "airlock: policy relaxation: " + r + "\n");
  }

  // A program run as is (the command reviewer's) has no language: its directory joins the view.
  const bool as_is = !req.argv.empty();
  std::vector<std::string> extra_paths;
  if (as_is) {
    const std::string& program = req.argv.front();
    if (program.empty() || program.front() != '/')
      return fail("the program '" + program + "' must be an absolute path");
    extra_paths.push_back(std::filesystem::path(program).parent_path().string());
  }
  auto lang = as_is ? Result<std::shared_ptr<plugin::Language>>(nullptr)
              : req.language.empty()
                  ? (req.inline_code ? Result<std::shared_ptr<plugin::Language>>(
                                           fail("no language given: pass --lang (python, node, "
                                                "shell) or a script file with a known extension"))
                                     : registry_.languageForFile(req.script))
                  : registry_.language(req.language);
  if (!lang) return Unexpected(lang.error());
  res.language = as_is ? "" : (*lang)->name();

  if (!as_is && std::find(profile.languages.begin(), profile.languages.end(), res.language) ==
                    profile.languages.end()) {
    res.status = Status::kRefused;
    std::string allowed;
    for (const auto& l : profile.languages) allowed += (allowed.empty() ? "" : ", ") + l;
    res.message = "profile '" + profile.name + "' does not allow language '" + res.language +
                  "' (allowed: " + allowed + ")";
    res.total_ms = msSince(t0);
    return res;
  }

  // One sandbox, one execution: the execution id is the sandbox's id, chosen now so that a
  // review record names the execution even when it is denied and no sandbox ever exists.
  const std::string execution_id = newSandboxId();

  // The review chain decides before any sandbox exists.
  if (req.review) {
    ReviewChain rc = chainFor(profile.name);
    if (rc.chain == nullptr && !rc.error.empty()) return fail(rc.error);
    if (rc.chain != nullptr && !rc.chain->empty()) {
      auto text = req.inline_code ? Result<std::string>(req.code) : readProgram(req.script);
      if (!text) return Unexpected(text.error());
      // No sandbox exists yet: the record carries no sandbox id, and a denied run never gets one.
      auto verdict = judge(profile.name, review::Subject::code(res.language, std::move(*text)),
                           {.tenant = req.tenant, .execution = execution_id});
      res.review = verdict;
      if (verdict && !verdict->allowed()) {
        res.status = Status::kRefused;
        res.message = verdict->message();
        res.total_ms = msSince(t0);
        recordRun(req, res, execution_id);
        return res;
      }
    }
  }
  if (cancelled_) return Unexpected(Error("interrupted by a signal", {}, EINTR));
  // Leftovers of runs that were killed with -9 are removed before we add one of our own (a
  // serving manager did that when it started, and its first served run need not again).
  if (options_.mode != ManagerOptions::Mode::kServe) {
    std::call_once(reclaimed_, [&] {
      if (auto r = reclaimOrphans(options_.state_dir); !r)
        log::warn("sandbox.reclaim", {{"error", r.error().message()}});
    });
  }

  // Served from a pre-started interpreter when the pool has one of this profile and language
  // and the request changes nothing it was started with (limits, environment).
  std::shared_ptr<Prestarted> pre;
  if (options_.mode == ManagerOptions::Mode::kServe && !req.memory_mb && !req.isolation &&
      req.env.empty() && !as_is) {
    // Which kind of interpreter the program wants is read off its text (prestart.cc); a file
    // that cannot be read here fails its copy below, with the error that names it.
    std::string text;
    if (!req.inline_code && !profile.lifetime.preload.empty())
      if (auto t = readProgram(req.script); t) text = std::move(*t);
    const bool preload = wantsPreload(req.inline_code ? req.code : text, profile.lifetime.preload);
    if (req.checker && req.inline_code && req.code == review::PythonAstReviewer::checkerScript())
      pre = takePrestarted(profile.name, res.language, {PrestartKind::kChecker});
    else if (req.checker)
      pre = nullptr;  // a checker program no pool was started with
    else if (preload)
      pre = takePrestarted(profile.name, res.language,
                           {PrestartKind::kPreloaded, PrestartKind::kPlain});
    else
      pre = takePrestarted(profile.name, res.language,
                           {PrestartKind::kPlain, PrestartKind::kPreloaded});
  }
  std::unique_ptr<Sandbox> cold;
  std::shared_ptr<AgentConnection> cold_conn;
  if (pre == nullptr) {
    SandboxOptions opts;
    opts.profile = &profile;
    std::vector<std::string> readonly = profile.filesystem.readonly_paths;
    readonly.insert(readonly.end(), extra_paths.begin(), extra_paths.end());
    opts.mounts = composeView(as_is ? std::vector<std::string>{} : (*lang)->image_paths, readonly);
    opts.agent_path = options_.agent_path;
    opts.state_dir = options_.state_dir;
    opts.id = execution_id;
    opts.tenant = req.tenant;
    // The audit engine: opened where an earlier airlock process pinned it (loaded and pinned by
    // the first), attached before PID 1 starts.
    if (req.audit && needsAudit(profile)) opts.audit = auditContext();
    if (needsNetworkLink(profile)) {
      auto host = networkHost();
      if (!host) return Unexpected(host.error());
      opts.network = *host;
    }
    if (auto r = preparePackages(profile, opts); !r) return Unexpected(r.error());
    res.prepare_ms = msSince(t0);
    auto sb = Sandbox::create(registry_, opts);
    if (!sb) return Unexpected(sb.error());
    cold = std::move(*sb);
    auto attached = hub_->attach(cold->agent().channelFd(), cold->id());
    if (!attached) {
      (void)cold->destroy();
      return Unexpected(attached.error());
    }
    cold_conn = std::move(*attached);
    res.create_ms = cold->timings().create_ms;
    res.create_steps = cold->timings().steps;
  } else {
    res.prepare_ms = msSince(t0);
  }
  Sandbox& box = pre ? *pre->live->box : *cold;
  AgentConnection& conn = pre ? *pre->live->conn : *cold_conn;
  res.sandbox_id = box.id();
  // The reviewers' checker sandboxes are the supervisor's own: not in the trail.
  const bool in_trail = !req.checker && req.argv.empty();
  if (in_trail)
    recordSandbox({box.id(), req.tenant, ""}, profile.name, profile.isolation, "create");
  if (pre && box.audit() != nullptr) box.audit()->setTenant(req.tenant);
  // A caller that goes away ends the run: every wait on its connection ends at once.
  bool watching_cancel = false;
  if (req.cancel_fd >= 0) {
    std::shared_ptr<AgentConnection> c = pre ? pre->live->conn : cold_conn;
    watching_cancel = static_cast<bool>(hub_->watch(req.cancel_fd, [c] {
      c->failAll("the caller went away");
      return false;
    }));
  }

  auto finish = [&](RunResult r) -> Result<RunResult> {
    recordRun(req, r, execution_id);
    auto td = Clock::now();
    if (watching_cancel) hub_->unwatch(req.cancel_fd);
    Result<> d;
    if (pre && destroyed.f && options_.mode == ManagerOptions::Mode::kServe) {
      // Single use: destroyed after the answer, off its path.
      pre->run.reset();
      retire(pre->live, std::exchange(destroyed.f, nullptr));
    } else if (pre) {
      pre->run.reset();
      destroyLive(pre->live, "one-shot");  // single use
    } else {
      hub_->detach(cold_conn);
      d = cold->destroy();
    }
    r.teardown_ms = msSince(td);
    r.total_ms = msSince(t0);
    if (in_trail)
      recordSandbox({box.id(), req.tenant, ""}, profile.name, profile.isolation, "destroy",
                    d ? "done" : "error");
    if (!d) return Unexpected(std::move(d.error()).wrap("sandbox teardown"));
    return r;
  };
  auto error = [&](Status s, std::string message) {
    res.status = s;
    res.message = std::move(message);
    return finish(std::move(res));
  };
  auto upload = [&](const std::string& dest, const ByteSource& source) -> SResult<uint64_t> {
    std::string dir = std::filesystem::path(dest).parent_path().string();
    if (dir != kWorkspace && dir != "/tmp") {
      if (auto r = files::mkdir(conn, dir, true); !r) return std::unexpected(r.error());
    }
    auto written = files::write(conn, dest, 0644, source);
    if (!written) return std::unexpected(written.error());
    return written->size;
  };

  for (const auto& f : req.files_in) {
    auto dest = normalizePath(f.sandbox, "sandbox path", Relative::kInWorkspace);
    std::string failure;
    FileOutcome fo{f.sandbox, f.local, 0, {}};
    if (!dest) {
      failure = dest.error().message();
    } else {
      UniqueFd fd(open(f.local.c_str(), O_RDONLY | O_CLOEXEC));
      auto n = fd ? upload(*dest, fdSource(fd.get(), f.local))
                  : SResult<uint64_t>(std::unexpected(ServiceError{
                        ErrorCode::kBadRequest, sysError("open", f.local).error().message()}));
      if (n) {
        fo.sandbox_path = *dest;
        fo.bytes = *n;
      } else {
        failure = n.error().message;
      }
    }
    if (!failure.empty())
      return error(Status::kError, "--file " + f.local + ":" + f.sandbox + ": " + failure);
    res.files_in.push_back(fo);
  }

  // Transfers in: unpacked inside by the agent's helper (transfer_job.h), before the program.
  // Each transfer has its own time: the program's time limit (what a helper may take), plus an
  // http transfer's own (a download may take that long), counted from its start.
  const auto transfer_time = std::chrono::seconds(profile.limits.timeout_s) +
                             std::chrono::seconds(profile.transfer.http.timeout_s) + kAgentGrace;
  // The profile's variables, and the package proxy's when its packages are on.
  const auto profile_env = profileEnvironment(profile, options_.policy.packages.port);
  const auto transfer_env = executionEnvironment({}, profile_env, req.env);
  uint64_t transfer_moved = 0;
  auto transfer = [&](bool in, const std::string& location, const std::string& path) {
    TransferJob job;
    job.in = in;
    job.location = location;
    job.path = path;
    job.remote_caller = req.remote_caller;
    job.tenant = req.tenant;
    job.sandbox_id = box.id();
    job.env = transfer_env;
    job.deadline = Clock::now() + transfer_time;
    if (req.review)
      job.review = [&](review::Subject subject) {
        return judge(profile.name, std::move(subject), {box.id(), req.tenant, execution_id});
      };
    TransferOutcome t = runTransfer(registry_, profile, pol->transfer, conn, job, transfer_moved);
    transfer_moved += t.moved_bytes;
    recordTransfer({box.id(), req.tenant, ""}, t);
    return t;
  };
  for (const auto& a : req.transfers_in) {
    auto dest = normalizePath(a.sandbox, "sandbox path", Relative::kInWorkspace);
    if (!dest) return error(Status::kError, "--in " + a.local + ": " + dest.error().message());
    TransferOutcome t = transfer(true, a.local, *dest);
    res.transfers.push_back(t);
    if (!t.error.empty())
      return error(t.status == "denied" ? Status::kRefused : Status::kError,
                   "--in " + t.location + ":" + *dest + ": " + t.error);
  }

  // The program: inline code on the command line (or in the pre-started interpreter's
  // request) when it fits, otherwise as a file.
  std::string program_path;
  if (!as_is && (!req.inline_code || req.code.size() > (*lang)->max_inline_bytes)) {
    std::string ext = (*lang)->extensions.empty() ? "" : (*lang)->extensions.front();
    program_path = req.inline_code
                       ? "/tmp/airlock-main" + ext
                       : "/home/user/" + std::filesystem::path(req.script).filename().string();
    SResult<uint64_t> n = 0;
    if (req.inline_code) {
      n = upload(program_path, stringSource(req.code));  // large inline code travels as a file
    } else {
      UniqueFd fd(open(req.script.c_str(), O_RDONLY | O_CLOEXEC));
      n = fd ? upload(program_path, fdSource(fd.get(), req.script))
             : SResult<uint64_t>(std::unexpected(ServiceError{
                   ErrorCode::kBadRequest, sysError("open", req.script).error().message()}));
    }
    if (!n)
      return error(Status::kError, "copying the program into the sandbox: " + n.error().message);
  }

  const uint64_t cap = req.output_cap != 0 ? req.output_cap : profile.limits.output_bytes;
  auto on_output = [&](protocol::Stream s, std::string_view data) {
    bool out = s == protocol::Stream::kStdout;
    int live = out ? req.live_stdout_fd : req.live_stderr_fd;
    if (live >= 0) writeAll(live, data);
    std::string& keep = out ? res.stdout_data : res.stderr_data;
    if (req.on_output) req.on_output(s, data);
    if (keep.size() < cap) keep.append(data.substr(0, cap - keep.size()));
  };
  const ProgramInput input{req.stdin_fd, req.stdin_data};
  const auto limit = std::chrono::seconds(profile.limits.timeout_s);
  auto deadline = Clock::now() + limit + kAgentGrace;
  if (req.deadline) deadline = std::min(deadline, *req.deadline);
  if (box.audit() != nullptr && req.audit) box.audit()->beginExecution(execution_id);
  Result<ProgramOutcome> outcome = fail("no program ran");
  auto exec_start = Clock::now();
  if (pre && pre->kind == PrestartKind::kChecker) {
    // The checker program itself waits on stdin, which is all its request.
    Result<> fed = pre->run->feed(input);
    outcome = fed ? pre->run->wait(on_output, deadline, exec_start + limit)
                  : Result<ProgramOutcome>(Unexpected(fed.error()));
  } else if (pre) {
    // The interpreter waits on stdin for one request (docs/plugins.md, "Prestart drivers");
    // everything after it is the program's own stdin. Its time limit is kept here: the
    // interpreter's execution has none while it waits in the pool.
    nlohmann::json request = {{"code", nullptr}, {"path", nullptr}, {"args", req.args}};
    if (profile.lifetime.fast_exit || req.checker) request["fast_exit"] = true;
    if (program_path.empty())
      request["code"] = req.code;
    else
      request["path"] = program_path;
    std::string body = request.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    pre->run->write(std::to_string(body.size()) + "\n" + body, false);
    Result<> fed;
    if (req.stdin_fd >= 0 || req.has_stdin_data)
      fed = pre->run->feed(input);
    else
      pre->run->write({}, true);
    outcome = fed ? pre->run->wait(on_output, deadline, exec_start + limit)
                  : Result<ProgramOutcome>(Unexpected(fed.error()));
  } else {
    std::vector<const char*> arg_ptrs;
    for (const auto& a : req.args) arg_ptrs.push_back(a.c_str());
    arg_ptrs.push_back(nullptr);
    airlock_code_request_v1 code_req{};
    code_req.struct_size = sizeof code_req;
    code_req.args = arg_ptrs.data();
    if (program_path.empty()) {
      code_req.source = AIRLOCK_CODE_INLINE;
      code_req.code = {req.code.data(), req.code.size()};
    } else {
      code_req.source = AIRLOCK_CODE_FILE;
      code_req.path = program_path.c_str();
    }
    auto command = as_is
                       ? Result<plugin::Language::Command>(plugin::Language::Command{req.argv, {}})
                       : (*lang)->build(code_req);
    if (!command) return error(Status::kError, command.error().message());
    protocol::Exec exec;
    exec.argv = command->argv;
    exec.env = executionEnvironment(command->env, profile_env, req.env);
    exec.cwd = kWorkspace;
    exec.timeout_ms = uint64_t{profile.limits.timeout_s} * 1000;
    exec.stdout_cap = exec.stderr_cap = cap;
    exec.stdin_pipe = req.stdin_fd >= 0 || req.has_stdin_data;
    outcome = sandbox::runProgram(conn, exec, on_output, input, deadline);
  }
  const double exec_ms = msSince(exec_start);
  std::optional<audit::AuditSummary> summary;
  if (box.audit() != nullptr && req.audit) {
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
    if (cancelled_) return error(Status::kError, "interrupted by a signal");
    if (req.deadline && Clock::now() >= *req.deadline)
      return error(Status::kTimeout, "the run exceeded its deadline and was stopped");
    // The agent died or went silent: an OOM kill of the agent, a hostile takeover, or a bug.
    if (res.oom_kills > 0)
      return error(Status::kMemoryLimit, "the sandbox hit its memory limit of " +
                                             std::to_string(profile.limits.memory_mb) + " MiB");
    return error(Status::kError, outcome.error().message());
  }
  const auto& x = outcome->exited;
  // A microVM's guest kills inside its own kernel, which its agent counts; the host's cgroup
  // counts the rest.
  res.oom_kills += x.oom_kills;
  res.exit_code = x.exit_code;
  res.signal = x.signal;
  res.stdout_truncated = x.stdout_truncated;
  res.stderr_truncated = x.stderr_truncated;
  res.stdout_bytes = x.stdout_bytes;
  res.stderr_bytes = x.stderr_bytes;
  // A pre-started interpreter's own clock started in the pool: the program's time is ours.
  res.exec_ms = pre ? exec_ms : static_cast<double>(x.wall_us) / 1000.0;
  res.user_us = x.user_us;
  res.sys_us = x.sys_us;
  res.max_rss_kb = x.max_rss_kb;
  if (x.timed_out || outcome->killed_at_limit) {
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
  if (res.status == Status::kTimeout || res.status == Status::kMemoryLimit)
    log::info(res.status == Status::kTimeout ? "execution.timeout" : "execution.oom",
              {{"sandbox", box.id()},
               {"profile", profile.name},
               {"oom_kills", res.oom_kills},
               {"ms", res.exec_ms}});
  // The agent holds at most 4 MiB of stdin the program has not read, and drops the rest: a
  // program that then succeeded worked on part of its input, which must not pass for a success.
  if (outcome->error.starts_with("stdin: ") && res.status == Status::kExited) {
    res.status = Status::kError;
    res.message = "the program's standard input was cut short (" + outcome->error +
                  "); give large inputs as files (--file) or archives (--in)";
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

  // A file larger than this is not copied out (the agent refuses it): the caller's cap when it
  // keeps files in memory (POST /v1/runs), else the workspace's size.
  const uint64_t out_limit =
      req.file_out_limit != 0 ? req.file_out_limit : profile.limits.workspace_mb << 20;
  for (const auto& f : req.files_out) {
    FileOutcome fo{f.sandbox, f.local, 0, {}};
    auto src = normalizePath(f.sandbox, "sandbox path", Relative::kInWorkspace);
    // A transfer's destination, or a directory named with an archive's name: packed and sent
    // through the transfer plugin that takes it (transfer_job.h).
    if (src && (namesTransfer(f.local) || !archiveFormatOf(f.local).empty())) {
      auto st = files::stat(conn, *src);
      if (namesTransfer(f.local) || (st && st->type == "dir")) {
        res.transfers.push_back(transfer(false, f.local, *src));
        continue;
      }
    }
    if (!src) {
      fo.error = src.error().message();
    } else {
      fo.sandbox_path = *src;
      UniqueFd fd(open(f.local.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
      std::string write_error;
      SResult<> n = fd ? files::read(
                             conn, *src, out_limit, [](uint64_t) {},
                             [&](std::string_view chunk) {
                               for (size_t off = 0; off < chunk.size();) {
                                 ssize_t w =
                                     write(fd.get(), chunk.data() + off, chunk.size() - off);
                                 if (w < 0 && errno == EINTR) continue;
                                 if (w < 0) {
                                   write_error = sysError("write", f.local).error().message();
                                   return false;
                                 }
                                 off += static_cast<size_t>(w);
                               }
                               fo.bytes += chunk.size();
                               return true;
                             })
                       : SResult<>(std::unexpected(ServiceError{
                             ErrorCode::kBadRequest, sysError("open", f.local).error().message()}));
      if (n && write_error.empty()) {
        // copied
      } else {
        fo.error = !write_error.empty() ? write_error : n.error().message;
        fo.bytes = 0;
        if (fd) unlink(f.local.c_str());  // no half-written copies
      }
    }
    res.files_out.push_back(fo);
  }
  return finish(std::move(res));
}

}  // namespace airlock::sandbox
