// Held requests waiting for an operator: a `hold` verdict parks the request in await() until
// approve(), reject() or its deadline (docs/api.md, "Review"). `airlock serve` serves pending()
// as GET /v1/reviews and approve/reject as POST /v1/reviews/{id}/approve|reject. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "airlock/result.h"
#include "supervisor/review/verdict.h"

namespace airlock::review {

// One held request, as GET /v1/reviews lists it.
struct PendingReview {
  std::string review_id;  // 16 hex digits
  std::string sandbox_id, tenant, profile;
  SubjectKind kind = SubjectKind::kCode;
  std::string language;
  std::string code_sha256;
  std::string preview;                 // the first 200 bytes of the text, as valid UTF-8
  std::string reviewer, rule, reason;  // of the hold verdict
  int64_t requested_at = 0;            // Unix ms
  int64_t deadline_at = 0;             // Unix ms

  // {"review_id", "sandbox_id", "tenant", "kind", "language", "code_sha256", "preview",
  //  "reviewer", "rule", "reason", "requested_at", "deadline_at"}
  nlohmann::json toJson() const;
};

class ApprovalQueue {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;

  ApprovalQueue() = default;
  // A fleet node begins every review id with "<node>_", so a proxy routes an approval to it.
  explicit ApprovalQueue(std::string id_prefix) : id_prefix_(std::move(id_prefix)) {}
  ~ApprovalQueue();  // denies every waiter still parked (rule "cancelled")
  ApprovalQueue(const ApprovalQueue&) = delete;
  ApprovalQueue& operator=(const ApprovalQueue&) = delete;

  // Parks the request until an operator decides or `deadline` passes, and returns the final
  // verdict: allow (rule "operator"), deny (rule "operator" when rejected, "deadline" when
  // nobody decided in time, "cancelled" by cancel()). reviewer is the holding reviewer's;
  // duration_ms adds the wait to the hold's. `on_queued` gets the review id before the wait
  // starts (to log it, or to cancel() when the client goes away).
  Verdict await(const Subject& subject, const Verdict& hold, SteadyTime deadline,
                const std::function<void(const std::string&)>& on_queued = {});

  // The requests waiting now, oldest first; only `tenant`'s when it is not empty.
  std::vector<PendingReview> pending(const std::string& tenant = "") const;

  // Decide a waiting request. An error (for a 404) when no request with this id waits.
  Result<> approve(const std::string& review_id, const std::string& reason = "");
  Result<> reject(const std::string& review_id, const std::string& reason = "");
  // Ends a wait with a deny (rule "cancelled"): the caller went away, or the server drains.
  Result<> cancel(const std::string& review_id, const std::string& reason);
  void cancelAll(const std::string& reason);

 private:
  enum class Outcome { kWaiting, kApproved, kRejected, kCancelled };
  struct Waiter {
    PendingReview item;
    Outcome outcome = Outcome::kWaiting;
    std::string reason;
    uint64_t order = 0;
  };
  Result<> settle(const std::string& review_id, Outcome outcome, const std::string& reason);

  const std::string id_prefix_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, std::shared_ptr<Waiter>> waiting_;
  uint64_t next_order_ = 0;
};

}  // namespace airlock::review
