// A bounded-by-construction queue of API events between the hub thread that produces them and
// the request thread that streams them to a client.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

#include "supervisor/sandbox/service.h"

namespace airlock::sandbox {

class EventQueue {
 public:
  void push(Json event);
  // The last event: nothing is pushed after it.
  void finish(Json event);
  std::optional<Json> pop(Clock::time_point deadline);
  bool finished() const;  // finish() was called and everything was popped

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Json> events_;
  bool finished_ = false;
};

// An EventStream over a queue. `on_next` runs before each wait (timeouts are driven from the
// consuming thread); `on_abandon` runs when the stream is destroyed before its last event.
class QueueStream : public EventStream {
 public:
  QueueStream(std::shared_ptr<EventQueue> queue, std::function<void()> on_next,
              std::function<void()> on_abandon)
      : queue_(std::move(queue)),
        on_next_(std::move(on_next)),
        on_abandon_(std::move(on_abandon)) {}
  ~QueueStream() override;
  std::optional<Json> next(Clock::time_point deadline) override;
  bool done() const override { return queue_->finished(); }

 private:
  std::shared_ptr<EventQueue> queue_;
  std::function<void()> on_next_;
  std::function<void()> on_abandon_;
};

}  // namespace airlock::sandbox
