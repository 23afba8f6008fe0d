#include "supervisor/service/event_queue.h"

namespace airlock::service {

void EventQueue::push(Json event) {
  {
    std::lock_guard lock(mu_);
    if (finished_) return;
    events_.push_back(std::move(event));
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

}  // namespace airlock::service
