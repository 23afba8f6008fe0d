#include "supervisor/sandbox/agent/event_queue.h"

namespace airlock::sandbox {

namespace {

// Output events waiting for a slow reader merge into one, up to this size: a fast producer then
// costs one event per backlog instead of one per pipe read.
constexpr size_t kMaxMergedData = 1 << 20;

bool mergeInto(Json& last, Json& next) {
  if (!last.is_object() || !next.is_object()) return false;
  auto lt = last.find("type");
  auto nt = next.find("type");
  if (lt == last.end() || nt == next.end() || *lt != *nt) return false;
  if (*lt != "stdout" && *lt != "stderr") return false;
  auto ld = last.find("data");
  auto nd = next.find("data");
  if (ld == last.end() || nd == next.end() || last.size() != 2 || next.size() != 2) return false;
  auto& a = ld->get_ref<std::string&>();
  const auto& b = nd->get_ref<const std::string&>();
  if (a.size() + b.size() > kMaxMergedData) return false;
  a += b;  // both are whole UTF-8 sequences (OutputEncoder), so the sum is too
  return true;
}

}  // namespace

void EventQueue::push(Json event) {
  {
    std::lock_guard lock(mu_);
    if (finished_) return;
    if (events_.empty() || !mergeInto(events_.back(), event)) events_.push_back(std::move(event));
  }
  cv_.notify_all();
}

void EventQueue::finish(Json event) {
  {
    std::lock_guard lock(mu_);
    if (finished_) return;
    events_.push_back(std::move(event));
    finished_ = true;
  }
  cv_.notify_all();
}

std::optional<Json> EventQueue::pop(Clock::time_point deadline) {
  std::unique_lock lock(mu_);
  // After the last event nothing can come: answer at once instead of waiting out the deadline.
  if (!cv_.wait_until(lock, deadline, [&] { return !events_.empty() || finished_; }))
    return std::nullopt;
  if (events_.empty()) return std::nullopt;
  Json e = std::move(events_.front());
  events_.pop_front();
  return e;
}

bool EventQueue::finished() const {
  std::lock_guard lock(mu_);
  return finished_ && events_.empty();
}

QueueStream::~QueueStream() {
  if (!queue_->finished() && on_abandon_) on_abandon_();
}

std::optional<Json> QueueStream::next(Clock::time_point deadline) {
  if (on_next_) on_next_();
  // Wake up at least every 100 ms so timeouts driven by on_next fire on time.
  auto soon = Clock::now() + std::chrono::milliseconds(100);
  while (true) {
    auto e = queue_->pop(std::min(deadline, soon));
    if (e || queue_->finished() || Clock::now() >= deadline) return e;
    if (on_next_) on_next_();
    soon = Clock::now() + std::chrono::milliseconds(100);
  }
}

}  // namespace airlock::sandbox
