// One-shot programs for API callers (POST /v1/runs): what `airlock run` does, served.
//
// The caller's tenant, profile, limits and quotas are checked before anything starts (4xx, no
// sandbox). runProgram takes host paths, so the request's program and files are written to a
// private scratch directory (<state_dir>/runs/<random>, 0700, removed at the end). The run is
// Manager::runProgram on a thread of its own: its output becomes API events as it arrives, its
// result one last event carrying the `airlock run --json` record and the files copied out.
#include <fcntl.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>

#include "airlock/unique_fd.h"
#include "supervisor/encoding/base64.h"
#include "supervisor/sandbox/agent/encoding.h"
#include "supervisor/sandbox/agent/event_queue.h"
#include "supervisor/sandbox/live_sandbox.h"
#include "supervisor/sandbox/manager.h"
#include "supervisor/sandbox/paths.h"

namespace airlock::sandbox {

namespace {

Result<> writeScratch(const std::string& path, std::string_view data) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd) return sysError("open", path);
  while (!data.empty()) {
    ssize_t n = write(fd.get(), data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sysError("write", path);
    data.remove_prefix(static_cast<size_t>(n));
  }
  return {};
}

// The file's bytes when it has at most `limit` of them; nullopt past it.
Result<std::optional<std::string>> readFileUpTo(const std::string& path, uint64_t limit) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return sysError("open", path);
  std::string data;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sysError("read", path);
    if (n == 0) return std::optional<std::string>(std::move(data));
    if (data.size() + static_cast<size_t>(n) > limit) return std::optional<std::string>();
    data.append(buf, static_cast<size_t>(n));
  }
}

void replaceAll(std::string& s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
    s.replace(pos, from.size(), to);
}

// Removes the scratch directories of supervisors that died (<pid>-XXXXXX, pid not alive);
// supervisors sharing the state directory keep theirs.
void reclaimScratch(const std::string& parent) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(parent, ec)) {
    const std::string name = e.path().filename().string();
    pid_t pid = static_cast<pid_t>(std::atol(name.c_str()));
    if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) std::filesystem::remove_all(e.path(), ec);
  }
}

// The host side of one run: its scratch directory, named in messages by what the client sent.
class Scratch {
 public:
  static Result<Scratch> make(const std::string& state_dir) {
    std::string parent = state_dir + "/runs";
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec) return fail("mkdir: " + ec.message(), parent);
    static std::once_flag reclaimed;
    std::call_once(reclaimed, [&] { reclaimScratch(parent); });
    std::string tmpl = parent + "/" + std::to_string(getpid()) + "-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) return sysError("mkdtemp", parent);
    Scratch s(tmpl);
    for (const char* sub : {"/program", "/in", "/out"})
      if (mkdir((tmpl + sub).c_str(), 0700) != 0) return sysError("mkdir", tmpl + sub);
    return s;
  }
  Scratch(Scratch&& o) noexcept : dir_(std::exchange(o.dir_, {})) {}
  Scratch& operator=(Scratch&&) = delete;
  ~Scratch() {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  std::string program(const std::string& name) const { return dir_ + "/program/" + name; }
  std::string in(size_t i) const { return dir_ + "/in/" + std::to_string(i); }
  std::string out(size_t i) const { return dir_ + "/out/" + std::to_string(i); }

  // `text` with the scratch paths replaced by the names the client knows them by.
  std::string redact(std::string text, size_t files_in, size_t files_out) const {
    if (text.find(dir_) == std::string::npos) return text;
    for (size_t i = files_in; i-- > 0;)
      replaceAll(text, in(i), "files_in[" + std::to_string(i) + "]");
    for (size_t i = files_out; i-- > 0;)
      replaceAll(text, out(i), "files_out[" + std::to_string(i) + "]");
    replaceAll(text, dir_ + "/program/", "");
    return text;
  }

 private:
  explicit Scratch(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

// Output and notices of one run, as API events. Everything runs on the run's thread.
class Relay {
 public:
  Relay(std::shared_ptr<EventQueue> queue, int notices_fd)
      : queue_(std::move(queue)), notices_fd_(notices_fd) {}

  void output(protocol::Stream s, std::string_view data) {
    if (s != protocol::Stream::kStdout && s != protocol::Stream::kStderr) return;
    notices();  // they were written before the program started
    const bool out = s == protocol::Stream::kStdout;
    sent_[out ? 0 : 1] += data.size();
    Json event{{"type", out ? "stdout" : "stderr"}};
    if ((out ? out_ : err_).encode(data, event)) queue_->push(std::move(event));
  }

  // What the result kept of a stream but on_output did not deliver (a manager that collects
  // only), then the bytes the encoders still hold.
  void rest(const RunResult& r) {
    if (sent_[0] < r.stdout_data.size())
      output(protocol::Stream::kStdout, std::string_view(r.stdout_data).substr(sent_[0]));
    if (sent_[1] < r.stderr_data.size())
      output(protocol::Stream::kStderr, std::string_view(r.stderr_data).substr(sent_[1]));
    flush();
  }
  void flush() {
    notices();
    for (bool out : {true, false}) {
      Json event{{"type", out ? "stdout" : "stderr"}};
      if ((out ? out_ : err_).flush(event)) queue_->push(std::move(event));
    }
  }

 private:
  // Lines runProgram wrote to its log fd ("airlock: policy relaxation: ..."), as notices.
  void notices() {
    if (notices_fd_ < 0) return;
    char buf[4096];
    for (ssize_t n; (n = read(notices_fd_, buf, sizeof buf)) > 0;)
      pending_.append(buf, static_cast<size_t>(n));
    for (size_t nl; (nl = pending_.find('\n')) != std::string::npos; pending_.erase(0, nl + 1)) {
      std::string line = pending_.substr(0, nl);
      if (line.starts_with("airlock: ")) line.erase(0, 9);
      queue_->push(Json{{"type", "notice"}, {"message", line}});
    }
  }

  std::shared_ptr<EventQueue> queue_;
  int notices_fd_;
  std::string pending_;
  OutputEncoder out_, err_;
  uint64_t sent_[2] = {0, 0};
};

// The events of one run. Destroying it before the result stops the run (RunRequest::cancel_fd)
// and waits for its thread: the run never outlives its stream, nor the manager.
class RunStream final : public EventStream {
 public:
  RunStream(std::shared_ptr<EventQueue> queue, UniqueFd cancel)
      : queue_(std::move(queue)), cancel_(std::move(cancel)) {}
  ~RunStream() override {
    if (!queue_->finished()) {
      uint64_t one = 1;
      (void)!write(cancel_.get(), &one, sizeof one);
    }
    if (worker_.joinable()) worker_.join();
  }
  template <typename Body>
  void start(Body&& body) {
    worker_ = std::thread(std::forward<Body>(body));
  }
  std::optional<Json> next(Clock::time_point deadline) override { return queue_->pop(deadline); }
  bool done() const override { return queue_->finished(); }

 private:
  std::shared_ptr<EventQueue> queue_;
  UniqueFd cancel_;
  std::thread worker_;
};

std::string fieldName(const char* list, size_t i) {
  return std::string("field '") + list + "[" + std::to_string(i) + "].path'";
}

}  // namespace

SResult<std::unique_ptr<EventStream>> Manager::runOneShot(const Caller& caller,
                                                          const ProgramSpec& spec) {
  auto pol = currentPolicy();
  auto tenant = pol->tenant(caller.tenant);
  if (!tenant) return serviceError(ErrorCode::kForbidden, "unknown tenant '" + caller.tenant + "'");
  const std::string profile_name = spec.profile.empty() ? pol->default_profile : spec.profile;
  auto prof = pol->profile(profile_name);
  if (!prof)
    return serviceError(ErrorCode::kBadRequest, "field 'profile': " + prof.error().message());
  if (!(*tenant)->allowsProfile(profile_name)) {
    metrics_.reject("profile_forbidden");
    return serviceError(ErrorCode::kForbidden, "tenant '" + caller.tenant +
                                                   "' may not use profile '" + profile_name + "'");
  }
  // The server's policy is the operator's: a caller may tighten the profile's limits, never
  // loosen them (`airlock run --local` on the host is the way past them).
  const policy::Limits& limits = (*prof)->limits;
  if (spec.timeout_s && *spec.timeout_s > limits.timeout_s)
    return serviceError(ErrorCode::kBadRequest,
                        "field 'timeout_s': " + std::to_string(*spec.timeout_s) +
                            " is over the limit of profile '" + profile_name + "' (" +
                            std::to_string(limits.timeout_s) + " s, limits.timeout_s)");
  if (spec.memory_mb && *spec.memory_mb > limits.memory_mb)
    return serviceError(ErrorCode::kBadRequest,
                        "field 'memory_mb': " + std::to_string(*spec.memory_mb) +
                            " is over the limit of profile '" + profile_name + "' (" +
                            std::to_string(limits.memory_mb) + " MiB, limits.memory_mb)");
  for (size_t i = 0; i < spec.files_in.size(); ++i)
    if (auto p =
            normalizePath(spec.files_in[i].path, fieldName("files_in", i), Relative::kInWorkspace);
        !p)
      return serviceError(ErrorCode::kBadRequest, p.error().message());
  for (size_t i = 0; i < spec.files_out.size(); ++i)
    if (auto p =
            normalizePath(spec.files_out[i], fieldName("files_out", i), Relative::kInWorkspace);
        !p)
      return serviceError(ErrorCode::kBadRequest, p.error().message());
  for (size_t i = 0; i < spec.transfers_in.size(); ++i)
    if (auto p = normalizePath(spec.transfers_in[i].path, fieldName("transfers_in", i),
                               Relative::kInWorkspace);
        !p)
      return serviceError(ErrorCode::kBadRequest, p.error().message());
  for (size_t i = 0; i < spec.transfers_out.size(); ++i) {
    if (auto p = normalizePath(spec.transfers_out[i].path, fieldName("transfers_out", i),
                               Relative::kInWorkspace);
        !p)
      return serviceError(ErrorCode::kBadRequest, p.error().message());
    // Out, the destination must name a plugin: a plain name would be a file of the supervisor.
    if (!namesTransfer(spec.transfers_out[i].location))
      return serviceError(ErrorCode::kBadRequest,
                          fieldName("transfers_out", i) + ".dest '" +
                              spec.transfers_out[i].location +
                              "': a URL or hostdir:ROOT/name.tar.gz (files of the sandbox come "
                              "back with files_out)");
  }

  // Quotas as for a sandbox create; the reservation holds until the sandbox is gone.
  const uint64_t memory = spec.memory_mb.value_or(limits.memory_mb);
  if (auto r = reserve(caller, *pol, **tenant, memory, {}, true); !r)
    return std::unexpected(r.error());
  auto unreserve = [this, tenant_name = caller.tenant, memory] {
    this->unreserve(tenant_name, memory, true);
  };
  auto internal = [&](const Error& e) {
    unreserve();
    return serviceError(ErrorCode::kInternal, "preparing the run: " + e.message());
  };

  auto scratch = Scratch::make(options_.state_dir);
  if (!scratch) return internal(scratch.error());
  RunRequest req;
  req.profile = profile_name;
  req.language = spec.language;
  req.args = spec.args;
  req.env = spec.env;
  req.timeout_s = spec.timeout_s;
  req.memory_mb = spec.memory_mb;
  req.tenant = caller.tenant;
  if (spec.script_name.empty()) {
    req.inline_code = true;
    req.code = spec.code;
  } else {
    req.inline_code = false;
    req.script = scratch->program(spec.script_name);
    if (auto w = writeScratch(req.script, spec.code); !w) return internal(w.error());
  }
  if (spec.stdin_data) {
    req.stdin_data = *spec.stdin_data;
    req.has_stdin_data = true;
  }
  for (size_t i = 0; i < spec.files_in.size(); ++i) {
    req.files_in.push_back({scratch->in(i), spec.files_in[i].path});
    if (auto w = writeScratch(scratch->in(i), spec.files_in[i].content); !w)
      return internal(w.error());
  }
  for (size_t i = 0; i < spec.files_out.size(); ++i)
    req.files_out.push_back({scratch->out(i), spec.files_out[i]});
  // Transfers name no file of the supervisor's (a local path is refused: remote_caller); those
  // out follow the files out, so the files keep their indexes in the result.
  req.remote_caller = true;
  for (const auto& t : spec.transfers_in) req.transfers_in.push_back({t.location, t.path});
  for (const auto& t : spec.transfers_out) req.files_out.push_back({t.location, t.path});

  int notices[2];
  if (pipe2(notices, O_CLOEXEC | O_NONBLOCK) != 0) return internal(sysError("pipe2").error());
  UniqueFd notices_r(notices[0]), notices_w(notices[1]);
  UniqueFd cancel(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!cancel) return internal(sysError("eventfd").error());
  req.log_fd = notices_w.get();
  req.cancel_fd = cancel.get();

  // Files out travel in the result event, which the API sends as one JSON line: each of them,
  // and all of them together, within the JSON body limit.
  const uint64_t files_out_cap = uint64_t{pol->server.max_json_body_kb} << 10;
  req.file_out_limit = files_out_cap;

  metrics_.runs++;
  auto queue = std::make_shared<EventQueue>();
  auto stream = std::make_unique<RunStream>(queue, std::move(cancel));
  stream->start([this, queue, req = std::move(req), scratch = std::move(*scratch), unreserve,
                 notices_r = std::move(notices_r), notices_w = std::move(notices_w), files_out_cap,
                 profile_name, started = Clock::now()]() mutable {
    Relay relay(queue, notices_r.get());
    req.on_output = [&relay](protocol::Stream s, std::string_view d) { relay.output(s, d); };
    // The reservation holds until the sandbox is gone, which for a pre-started one is after
    // this answer; then a client's next request may use the room at once.
    req.on_destroyed = unreserve;
    auto result = runProgram(req);
    const size_t n_in = req.files_in.size(), n_out = req.files_out.size();
    Json event{{"type", "result"}, {"files_out", Json::array()}};
    if (!result) {
      relay.flush();
      event["record"] = errorRecord(scratch.redact(result.error().message(), n_in, n_out));
    } else {
      relay.rest(*result);
      RunResult& r = *result;
      r.message = scratch.redact(r.message, n_in, n_out);
      for (auto& f : r.files_in) f.local_path.clear();
      uint64_t carried = 0;
      for (size_t i = 0; i < r.files_out.size(); ++i) {
        FileOutcome& f = r.files_out[i];
        f.local_path.clear();
        Json file{{"sandbox_path", f.sandbox_path}, {"content_base64", nullptr}};
        if (f.error.empty()) {
          auto bytes = readFileUpTo(scratch.out(i), files_out_cap - carried);
          if (!bytes) {
            f.error = scratch.redact(bytes.error().message(), n_in, n_out);
          } else if (!*bytes) {
            f.error = std::to_string(f.bytes) + " bytes: files out of POST /v1/runs are " +
                      "limited to " + std::to_string(files_out_cap) +
                      " bytes together (server.max_json_body_kb)";
          } else {
            carried += (*bytes)->size();
            file["content_base64"] = encoding::base64Encode(**bytes);
          }
          if (!f.error.empty()) f.bytes = 0;
        } else {
          f.error = scratch.redact(f.error, n_in, n_out);
        }
        event["files_out"].push_back(std::move(file));
      }
      event["record"] = r.toJson();
    }
    const std::string status = event["record"].value("status", "error");
    metrics_.runEnded(status);
    metrics_.executionEnded("run", profile_name, secondsSince(started), status == "timeout",
                            status == "memory_limit" ? 1 : 0, 0);
    queue->finish(std::move(event));
  });
  return std::unique_ptr<EventStream>(std::move(stream));
}

}  // namespace airlock::sandbox
