#include "supervisor/sandbox/transfer_job.h"

#include <unistd.h>

#include "supervisor/sandbox/transfer.h"
#include "supervisor/sandbox/transfer_review.h"
#include "supervisor/sandbox/transfer_rules.h"

namespace airlock::sandbox {
namespace {

using Clock = std::chrono::steady_clock;

Result<> writeAll(int fd, std::string_view bytes, const std::string& what) {
  for (size_t off = 0; off < bytes.size();) {
    const ssize_t w = ::write(fd, bytes.data() + off, bytes.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return sysError("write", what);
    off += static_cast<size_t>(w);
  }
  return {};
}

}  // namespace

void recordSummary(TransferOutcome& out, const TransferSummary& summary) {
  out.files = summary.files;
  out.dirs = summary.dirs;
  out.links = summary.links;
  out.bytes = summary.bytes;
  out.moved_bytes = summary.moved_bytes;
  out.sha256 = summary.sha256;
  out.ms = summary.seconds * 1000;
}

TransferOutcome runTransfer(plugin::Registry& registry, const policy::Profile& profile,
                            const policy::TransferSettings& host, AgentConnection& conn,
                            const TransferJob& job, uint64_t sandbox_moved,
                            const std::function<void(uint64_t)>& progress,
                            TransferControl* control) {
  const auto t0 = Clock::now();
  TransferOutcome out;
  out.direction = job.in ? "in" : "out";
  out.location = job.location;
  out.sandbox_path = job.path;
  auto finish = [&](std::string status, std::string error) {
    out.status = std::move(status);
    out.error = std::move(error);
    out.ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    return out;
  };

  auto plugin = registry.transferFor(job.location);
  if (!plugin) return finish("denied", plugin.error().message());
  out.plugin = (*plugin)->name();
  if (job.remote_caller && (*plugin)->fullName() == "airlock.transfer.archive")
    return finish("denied",
                  "'" + job.location +
                      "': a local path names the supervisor's own files; an API client uploads "
                      "the archive instead (PUT /v1/sandboxes/{id}/archive)");
  auto rules = transferPolicyFor(profile, host, (*plugin)->name(), (*plugin)->fullName());
  if (!rules) return finish("denied", rules.error().message());
  const TransferLimits limits = helperLimits(*rules->limits, sandbox_moved);
  if (limits.max_bytes == 0)
    return finish("denied", "the sandbox's transfers already moved their transfer." +
                                (*plugin)->name() + ".sandbox_max_mb");

  plugin::TransferRequest request;
  request.in = job.in;
  request.location = job.location;
  request.rules_json = rules->rules_json;
  request.max_bytes = limits.max_bytes;
  request.tenant = job.tenant;
  request.sandbox_id = job.sandbox_id;
  auto opened = (*plugin)->open(request);
  if (!opened) return finish("denied", opened.error().message());
  plugin::OpenTransfer& t = **opened;
  out.location = t.display().empty() ? job.location : t.display();
  if (control != nullptr) control->watch(t.fd());

  // The review chain sees the location (credentials removed) before a byte moves, and an
  // archive's listing once it is staged; its verdict goes into the record either way.
  TransferReview reviewed(job.review, out, t.size());
  if (auto r = reviewed(nullptr); !r) return finish("denied", r.error().message());

  TransferHooks hooks;
  uint64_t seen = 0;  // what moved, for the sandbox's cap, even when the transfer fails
  hooks.progress = [&](uint64_t moved) {
    seen = moved;
    if (progress) progress(moved);
  };
  auto unwatch = [control] {
    if (control != nullptr) control->watch(-1);
  };
  if (control != nullptr) hooks.cancelled = [control] { return control->cancelled(); };

  Result<TransferSummary> moved;
  if (job.in) {
    hooks.complete = [&] {
      unwatch();
      return t.finish(true);
    };
    if (job.review)
      hooks.review = [&](const ArchiveListing& listing) { return reviewed(&listing); };
    moved = unpackInto(conn, job.path, fdChunks(t.fd(), out.location), limits, job.env,
                       job.deadline, hooks);
  } else {
    const std::string format = t.format().empty() ? "tar.gz" : t.format();
    moved = packFrom(
        conn, job.path, format,
        [&](std::string_view chunk) { return writeAll(t.fd(), chunk, out.location); }, limits,
        job.env, job.deadline, hooks);
    unwatch();
    if (moved) {
      if (auto done = t.finish(true); !done) moved = Unexpected(done.error());
    }
  }
  unwatch();
  (void)t.finish(false);  // discards whatever did not complete; a no-op after a finish(true)
  if (!moved) {
    out.moved_bytes = seen;
    const bool cancelled = control != nullptr && control->cancelled();
    if (reviewed.denied()) return finish("denied", moved.error().message());
    return finish(cancelled ? "cancelled" : "error",
                  cancelled ? std::string(kTransferCancelled) : moved.error().message());
  }
  recordSummary(out, *moved);
  return finish("ok", "");
}

}  // namespace airlock::sandbox
