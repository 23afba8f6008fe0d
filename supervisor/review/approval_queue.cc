#include "supervisor/review/approval_queue.h"

#include <algorithm>
#include <cstdio>
#include <random>

#include "supervisor/sandbox/run_result.h"

namespace airlock::review {

namespace {

constexpr size_t kPreviewBytes = 200;

int64_t unixMs(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

std::string randomId() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard lock(mu);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

}  // namespace

nlohmann::json PendingReview::toJson() const {
  return {{"review_id", review_id},
          {"sandbox_id", sandbox_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(sandbox_id)},
          {"tenant", tenant},
          {"kind", kindName(kind)},
          {"language", language},
          {"code_sha256", code_sha256},
          {"preview", preview},
          {"reviewer", reviewer},
          {"rule", rule},
          {"reason", reason},
          {"requested_at", requested_at},
          {"deadline_at", deadline_at}};
}

ApprovalQueue::~ApprovalQueue() {
  cancelAll("the approval queue is shutting down");
  // Waiters hold the lock only briefly after waking; wait until every one has left.
  std::unique_lock lock(mu_);
  changed_.wait(lock, [&] { return waiting_.empty(); });
}

Verdict ApprovalQueue::await(const Subject& subject, const Verdict& hold, SteadyTime deadline,
                             const std::function<void(const std::string&)>& on_queued) {
  const auto started = std::chrono::steady_clock::now();
  auto waiter = std::make_shared<Waiter>();
  PendingReview& item = waiter->item;
  item.sandbox_id = subject.sandbox_id;
  item.tenant = subject.tenant;
  item.profile = subject.profile;
  item.kind = subject.kind;
  item.language = subject.language;
  item.code_sha256 = subject.sha256();
  std::string preview = subject.text.substr(0, kPreviewBytes);
  // Do not cut a UTF-8 sequence in half.
  while (!preview.empty() && preview.size() == kPreviewBytes &&
         (static_cast<unsigned char>(preview.back()) & 0xc0) == 0x80) {
    preview.pop_back();
  }
  if (!preview.empty() && static_cast<unsigned char>(preview.back()) >= 0xc0) preview.pop_back();
  item.preview = sandbox::toValidUtf8(preview);
  item.reviewer = hold.reviewer;
  item.rule = hold.rule;
  item.reason = hold.reason;
  const auto now_wall = std::chrono::system_clock::now();
  item.requested_at = unixMs(now_wall);
  item.deadline_at = unixMs(now_wall) + std::chrono::duration_cast<std::chrono::milliseconds>(
                                            deadline - std::chrono::steady_clock::now())
                                            .count();
  {
    std::lock_guard lock(mu_);
    do {
      item.review_id = id_prefix_ + randomId();
    } while (waiting_.contains(item.review_id));
    waiter->order = next_order_++;
    waiting_.emplace(item.review_id, waiter);
  }
  if (on_queued) on_queued(item.review_id);

  std::unique_lock lock(mu_);
  changed_.wait_until(lock, deadline, [&] { return waiter->outcome != Outcome::kWaiting; });
  waiting_.erase(item.review_id);
  Outcome outcome = waiter->outcome;
  std::string reason = waiter->reason;
  // Notified under the lock: the destructor, waiting for waiting_ to empty, cannot return (and
  // destroy changed_) before this thread is done with it.
  changed_.notify_all();
  lock.unlock();

  Verdict v;
  v.reviewer = hold.reviewer;
  v.duration_ms =
      hold.duration_ms +
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  switch (outcome) {
    case Outcome::kApproved:
      v.decision = Decision::kAllow;
      v.rule = "operator";
      v.reason = reason.empty() ? "approved by an operator" : "approved by an operator: " + reason;
      break;
    case Outcome::kRejected:
      v.decision = Decision::kDeny;
      v.rule = "operator";
      v.reason = reason.empty() ? "rejected by an operator" : "rejected by an operator: " + reason;
      break;
    case Outcome::kCancelled:
      v.decision = Decision::kDeny;
      v.rule = "cancelled";
      v.reason = "the held request was cancelled: " + reason;
      break;
    case Outcome::kWaiting:
      v.decision = Decision::kDeny;
      v.rule = "deadline";
      v.reason =
          "held for approval (" + hold.reason + ") and no operator decided before the deadline";
      break;
  }
  return v;
}

std::vector<PendingReview> ApprovalQueue::pending(const std::string& tenant) const {
  std::vector<std::pair<uint64_t, PendingReview>> items;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, w] : waiting_) {
      if (w->outcome != Outcome::kWaiting) continue;
      if (!tenant.empty() && w->item.tenant != tenant) continue;
      items.emplace_back(w->order, w->item);
    }
  }
  std::ranges::sort(items, {}, &std::pair<uint64_t, PendingReview>::first);
  std::vector<PendingReview> out;
  for (auto& [order, item] : items) out.push_back(std::move(item));
  return out;
}

Result<> ApprovalQueue::settle(const std::string& review_id, Outcome outcome,
                               const std::string& reason) {
  {
    std::lock_guard lock(mu_);
    auto it = waiting_.find(review_id);
    if (it == waiting_.end() || it->second->outcome != Outcome::kWaiting) {
      return fail("no held request with id '" + review_id + "' is waiting");
    }
    it->second->outcome = outcome;
    it->second->reason = reason;
  }
  changed_.notify_all();
  return {};
}

Result<> ApprovalQueue::approve(const std::string& review_id, const std::string& reason) {
  return settle(review_id, Outcome::kApproved, reason);
}

Result<> ApprovalQueue::reject(const std::string& review_id, const std::string& reason) {
  return settle(review_id, Outcome::kRejected, reason);
}

Result<> ApprovalQueue::cancel(const std::string& review_id, const std::string& reason) {
  return settle(review_id, Outcome::kCancelled, reason);
}

void ApprovalQueue::cancelAll(const std::string& reason) {
  {
    std::lock_guard lock(mu_);
    for (auto& [id, w] : waiting_) {
      if (w->outcome == Outcome::kWaiting) {
        w->outcome = Outcome::kCancelled;
        w->reason = reason;
      }
    }
  }
  changed_.notify_all();
}

}  // namespace airlock::review
