// Transfers of served sandboxes (POST /v1/sandboxes/{id}/transfers, PUT and GET .../archive),
// and every transfer's audit record. One transfer runs on a thread of its own, so its request
// thread only relays events; the sandbox counts as busy meanwhile.
#include <algorithm>
#include <thread>

#include "supervisor/audit/audit_log.h"
#include "supervisor/log/log.h"
#include "supervisor/sandbox/agent/event_queue.h"
#include "supervisor/sandbox/environment.h"
#include "supervisor/sandbox/live_sandbox.h"
#include "supervisor/sandbox/manager.h"
#include "supervisor/sandbox/paths.h"
#include "supervisor/sandbox/transfer.h"
#include "supervisor/sandbox/transfer_job.h"
#include "supervisor/sandbox/transfer_review.h"
#include "supervisor/sandbox/transfer_rules.h"

namespace airlock::sandbox {

struct TransferTask {
  std::mutex mu;
  TransferOutcome record;  // status "running" until the thread ends
  TransferControl control;
  std::thread thread;
  bool finished = false;
};

namespace {

constexpr auto kProgressEvery = std::chrono::milliseconds(250);
constexpr size_t kKeptTransfers = 64;  // finished records listed per sandbox

uint64_t wallNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace

void Manager::recordTransfer(const audit::RecordIds& ids, const TransferOutcome& t) {
  if (t.status == "ok") {
    metrics_.transfers_ok++;
  } else {
    metrics_.transfers_failed++;
  }
  if (audit_log_ == nullptr) return;
  nlohmann::json fields = transferJson(t);
  if (auto w = audit_log_->write("transfer", ids, wallNs(), fields); !w)
    log::error("audit.write", {{"error", w.error().message()}});
}

SResult<std::unique_ptr<EventStream>> Manager::startTransfer(const Caller& caller,
                                                             const std::string& sb,
                                                             const TransferSpec& spec) {
  auto s = findRunning(caller, sb);
  if (!s) return std::unexpected(s.error());
  auto path = normalizePath(spec.path, "path", Relative::kInWorkspace);
  if (!path) return serviceError(ErrorCode::kBadRequest, path.error().message());
  if (spec.location.empty())
    return serviceError(ErrorCode::kBadRequest,
                        std::string(spec.in ? "source" : "dest") + ": must not be empty");
  std::shared_ptr<LiveSandbox> box = *s;
  auto task = std::make_shared<TransferTask>();
  {
    std::lock_guard lock(box->mu);
    // Finished transfers past the newest kKeptTransfers are forgotten (their threads joined).
    std::vector<std::string> done;
    for (auto& [id, t] : box->transfers) {
      std::lock_guard tl(t->mu);
      if (t->finished) done.push_back(id);
    }
    for (size_t i = 0; i + kKeptTransfers < done.size(); ++i) {
      auto t = box->transfers[done[i]];
      if (t->thread.joinable()) t->thread.join();
      box->transfers.erase(done[i]);
    }
    task->record.id = "tr-" + std::to_string(box->next_transfer++);
    task->record.direction = spec.in ? "in" : "out";
    task->record.location = spec.location;
    task->record.sandbox_path = *path;
    task->record.status = "running";
    box->transfers[task->record.id] = task;
  }
  metrics_.transfers_started++;

  TransferJob job;
  job.in = spec.in;
  job.location = spec.location;
  job.path = *path;
  job.remote_caller = true;
  job.tenant = caller.tenant;
  job.sandbox_id = box->id;
  job.env = executionEnvironment({}, box->profile.env, box->env);
  job.deadline = Clock::now() + std::chrono::seconds(box->profile.transfer.http.timeout_s) +
                 std::chrono::seconds(box->profile.limits.timeout_s);
  job.review = [this, box, tenant = box->tenant, id = task->record.id](review::Subject subject) {
    return judge(box->profile_name, std::move(subject), {box->id, tenant, id});
  };

  auto queue = std::make_shared<EventQueue>();
  auto pol = currentPolicy();
  ++box->busy;
  task->thread = std::thread([this, box, task, queue, job, pol] {
    const auto t0 = Clock::now();
    auto last = t0 - kProgressEvery;
    auto progress = [&](uint64_t moved) {
      {
        std::lock_guard tl(task->mu);
        task->record.moved_bytes = moved;
      }
      const auto now = Clock::now();
      if (now - last < kProgressEvery) return;
      last = now;
      const double s = std::chrono::duration<double>(now - t0).count();
      queue->push({{"type", "progress"},
                   {"transfer_id", task->record.id},
                   {"bytes", moved},
                   {"rate_bps", s > 0 ? static_cast<uint64_t>(moved / s) : 0}});
    };
    TransferOutcome out = runTransfer(registry_, box->profile, pol->transfer, *box->conn, job,
                                      box->transfer_moved.load(), progress, &task->control);
    box->transfer_moved += out.moved_bytes;
    out.id = task->record.id;
    recordTransfer({box->id, box->tenant, ""}, out);
    {
      std::lock_guard tl(task->mu);
      task->record = out;
      task->finished = true;
    }
    box->last_active_at = nowMs();
    --box->busy;
    nlohmann::json event = transferJson(out);
    event["type"] = "transfer";
    queue->finish(std::move(event));
  });
  return std::make_unique<QueueStream>(
      queue, [] {}, [task] { task->control.cancel(); });
}

SResult<Json> Manager::listTransfers(const Caller& caller, const std::string& sb) {
  auto s = find(caller, sb);
  if (!s) return std::unexpected(s.error());
  Json list = Json::array();
  std::lock_guard lock((*s)->mu);
  for (const auto& [id, t] : (*s)->transfers) {
    std::lock_guard tl(t->mu);
    list.push_back(transferJson(t->record));
  }
  return Json{{"transfers", std::move(list)}};
}

SResult<> Manager::cancelTransfer(const Caller& caller, const std::string& sb,
                                  const std::string& transfer_id) {
  auto s = find(caller, sb);
  if (!s) return std::unexpected(s.error());
  std::shared_ptr<TransferTask> task;
  {
    std::lock_guard lock((*s)->mu);
    auto it = (*s)->transfers.find(transfer_id);
    if (it == (*s)->transfers.end())
      return serviceError(ErrorCode::kNotFound,
                          "sandbox '" + sb + "' has no transfer '" + transfer_id + "'");
    task = it->second;
  }
  {
    std::lock_guard tl(task->mu);
    if (task->finished)
      return serviceError(ErrorCode::kConflict, "transfer '" + transfer_id + "' already ended (" +
                                                    task->record.status + ")");
  }
  task->control.cancel();
  return {};
}

void Manager::endTransfers(LiveSandbox& s) {
  std::map<std::string, std::shared_ptr<TransferTask>> tasks;
  {
    std::lock_guard lock(s.mu);
    tasks.swap(s.transfers);
  }
  for (auto& [id, t] : tasks) t->control.cancel();
  for (auto& [id, t] : tasks)
    if (t->thread.joinable()) t->thread.join();
}

SResult<Json> Manager::uploadArchive(const Caller& caller, const std::string& sb,
                                     const std::string& path, const ByteSource& source) {
  auto s = findRunning(caller, sb);
  if (!s) return std::unexpected(s.error());
  auto dir = normalizePath(path, "path", Relative::kInWorkspace);
  if (!dir) return serviceError(ErrorCode::kBadRequest, dir.error().message());
  LiveSandbox& box = **s;
  const auto& t = box.profile.transfer;
  TransferOutcome out;
  out.direction = "in";
  out.plugin = "upload";
  out.location = "request body";
  out.sandbox_path = *dir;
  if (std::find(t.plugins.begin(), t.plugins.end(), "archive") == t.plugins.end() &&
      std::find(t.plugins.begin(), t.plugins.end(), "airlock.transfer.archive") == t.plugins.end())
    return serviceError(ErrorCode::kForbidden, "profile '" + box.profile.name +
                                                   "': transfer.plugins does not list 'archive', "
                                                   "which archive uploads go through");
  const TransferLimits limits = helperLimits(t.archive, box.transfer_moved.load());
  // Reviewed like any archive coming in: the upload, then its listing once staged.
  const audit::RecordIds ids{box.id, box.tenant, ""};
  TransferReview reviewed(
      [&](review::Subject subject) { return judge(box.profile_name, std::move(subject), ids); },
      out, 0);
  if (auto r = reviewed(nullptr); !r) {
    out.status = "denied";
    out.error = r.error().message();
    recordTransfer(ids, out);
    metrics_.reject("denied_by_review");
    return std::unexpected(ServiceError{ErrorCode::kDeniedByReview, out.error, out.review});
  }
  TransferHooks hooks;
  hooks.review = [&](const ArchiveListing& listing) { return reviewed(&listing); };
  ++box.busy;
  std::string buf(1 << 20, '\0');
  auto moved = unpackInto(
      *box.conn, *dir,
      [&]() -> Result<std::string> {
        auto n = source(buf.data(), buf.size());
        if (!n) return fail(n.error().message);
        return buf.substr(0, *n);
      },
      limits, executionEnvironment({}, box.profile.env, box.env),
      Clock::now() + std::chrono::seconds(box.profile.limits.timeout_s), hooks);
  --box.busy;
  box.last_active_at = nowMs();
  if (moved) {
    recordSummary(out, *moved);
  } else {
    out.status = reviewed.denied() ? "denied" : "error";
    out.error = moved.error().message();
  }
  box.transfer_moved += out.moved_bytes;
  recordTransfer(ids, out);
  if (reviewed.denied()) {
    metrics_.reject("denied_by_review");
    return std::unexpected(ServiceError{ErrorCode::kDeniedByReview, out.error, out.review});
  }
  if (!moved)
    return serviceError(ErrorCode::kBadRequest, "archive into " + *dir + ": " + out.error);
  return transferJson(out);
}

SResult<> Manager::downloadArchive(const Caller& caller, const std::string& sb,
                                   const std::string& path, const std::string& format,
                                   const ByteSink& sink) {
  auto s = findRunning(caller, sb);
  if (!s) return std::unexpected(s.error());
  auto dir = normalizePath(path, "path", Relative::kInWorkspace);
  if (!dir) return serviceError(ErrorCode::kBadRequest, dir.error().message());
  if (format != "tar" && format != "tar.gz" && format != "tar.zst" && format != "zip")
    return serviceError(ErrorCode::kBadRequest,
                        "format '" + format + "': expected tar, tar.gz, tar.zst or zip");
  LiveSandbox& box = **s;
  const TransferLimits limits =
      helperLimits(box.profile.transfer.archive, box.transfer_moved.load());
  ++box.busy;
  auto moved = packFrom(
      *box.conn, *dir, format,
      [&](std::string_view chunk) -> Result<> {
        if (!sink(chunk)) return fail("the client went away");
        return {};
      },
      limits, executionEnvironment({}, box.profile.env, box.env),
      Clock::now() + std::chrono::seconds(box.profile.limits.timeout_s));
  --box.busy;
  box.last_active_at = nowMs();
  TransferOutcome out;
  out.direction = "out";
  out.plugin = "download";
  out.location = "response body";
  out.sandbox_path = *dir;
  if (moved) {
    recordSummary(out, *moved);
  } else {
    out.status = "error";
    out.error = moved.error().message();
  }
  box.transfer_moved += out.moved_bytes;
  recordTransfer({box.id, box.tenant, ""}, out);
  if (!moved) return serviceError(ErrorCode::kBadRequest, "packing " + *dir + ": " + out.error);
  return {};
}

}  // namespace airlock::sandbox
