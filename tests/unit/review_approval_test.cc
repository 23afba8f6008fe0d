// Holds: ApprovalQueue parks a request until an operator approves or rejects it, or its
// deadline passes.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "supervisor/review/approval_queue.h"

namespace airlock::review {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

Verdict holdVerdict() {
  Verdict v;
  v.decision = Decision::kHold;
  v.reviewer = "patterns";
  v.rule = "hold-drop";
  v.reason = "drops a table";
  v.duration_ms = 1.5;
  return v;
}

Subject subject() {
  Subject s = Subject::code("python", "db.execute('DROP TABLE users')");
  s.tenant = "t1";
  s.sandbox_id = "0123456789abcdef";
  s.profile = "default";
  return s;
}

// Starts await() on another thread and returns its future and the id it was queued under.
std::pair<std::future<Verdict>, std::string> park(ApprovalQueue& q, Clock::duration wait = 30s) {
  std::promise<std::string> id;
  auto queued = id.get_future();
  auto verdict = std::async(std::launch::async, [&q, wait, p = std::move(id)]() mutable {
    return q.await(subject(), holdVerdict(), Clock::now() + wait,
                   [&](const std::string& rid) { p.set_value(rid); });
  });
  return {std::move(verdict), queued.get()};
}

TEST(ApprovalQueue, ListsPendingRequests) {
  ApprovalQueue q;
  auto [verdict, id] = park(q);
  auto pending = q.pending();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].review_id, id);
  EXPECT_EQ(id.size(), 16u);
  auto j = pending[0].toJson();
  EXPECT_EQ(j["sandbox_id"], "0123456789abcdef");
  EXPECT_EQ(j["tenant"], "t1");
  EXPECT_EQ(j["kind"], "code");
  EXPECT_EQ(j["language"], "python");
  EXPECT_EQ(j["code_sha256"], subject().sha256());
  EXPECT_EQ(j["preview"], "db.execute('DROP TABLE users')");
  EXPECT_EQ(j["rule"], "hold-drop");
  EXPECT_GT(j["deadline_at"].get<int64_t>(), j["requested_at"].get<int64_t>() + 29000);
  EXPECT_TRUE(q.pending("other-tenant").empty());
  ASSERT_TRUE(q.approve(id, ""));
  verdict.get();
  EXPECT_TRUE(q.pending().empty());
}

TEST(ApprovalQueue, ApproveLetsTheRunGoAhead) {
  ApprovalQueue q;
  auto [verdict, id] = park(q);
  ASSERT_TRUE(q.approve(id, "checked with the DBA"));
  Verdict v = verdict.get();
  EXPECT_EQ(v.decision, Decision::kAllow);
  EXPECT_EQ(v.reviewer, "patterns");
  EXPECT_EQ(v.rule, "operator");
  EXPECT_EQ(v.reason, "approved by an operator: checked with the DBA");
  EXPECT_GE(v.duration_ms, 1.5);
  EXPECT_FALSE(q.approve(id, "")) << "a decided request is no longer waiting";
}

TEST(ApprovalQueue, RejectDenies) {
  ApprovalQueue q;
  auto [verdict, id] = park(q);
  ASSERT_TRUE(q.reject(id, "not today"));
  Verdict v = verdict.get();
  EXPECT_EQ(v.decision, Decision::kDeny);
  EXPECT_EQ(v.rule, "operator");
  EXPECT_EQ(v.reason, "rejected by an operator: not today");
}

TEST(ApprovalQueue, TheDeadlineDenies) {
  ApprovalQueue q;
  auto t0 = Clock::now();
  auto [verdict, id] = park(q, 200ms);
  Verdict v = verdict.get();
  EXPECT_GE(Clock::now() - t0, 200ms);
  EXPECT_LT(Clock::now() - t0, 5s);
  EXPECT_EQ(v.decision, Decision::kDeny);
  EXPECT_EQ(v.rule, "deadline");
  EXPECT_TRUE(q.pending().empty());
  EXPECT_FALSE(q.reject(id, ""));
}

TEST(ApprovalQueue, UnknownIdsAndCancel) {
  ApprovalQueue q;
  EXPECT_FALSE(q.approve("ffffffffffffffff", ""));
  auto [verdict, id] = park(q);
  ASSERT_TRUE(q.cancel(id, "client went away"));
  EXPECT_EQ(verdict.get().rule, "cancelled");
}

TEST(ApprovalQueue, ManyWaitersAreDecidedIndependently) {
  ApprovalQueue q;
  std::vector<std::pair<std::future<Verdict>, std::string>> parked;
  for (int i = 0; i < 6; ++i) parked.push_back(park(q));
  EXPECT_EQ(q.pending().size(), 6u);
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(i % 2 ? q.approve(parked[i].second) : q.reject(parked[i].second));
  }
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(parked[i].first.get().decision, i % 2 ? Decision::kAllow : Decision::kDeny);
  }
}

TEST(ApprovalQueue, DestructionReleasesWaiters) {
  std::future<Verdict> verdict;
  {
    ApprovalQueue q;
    auto parked = park(q);
    verdict = std::move(parked.first);
  }
  EXPECT_EQ(verdict.get().rule, "cancelled");
}

}  // namespace
}  // namespace airlock::review
