// The `webhook` reviewer: POSTs the subject as JSON to a reviewer service (a model acting as
// judge, a human queue, ...) and reads a verdict document (external_verdict.h) from a 200
// answer. Connect, request and answer share one timeout. Any other status, a timeout or a bad
// answer is an Error, so the chain fails closed. Plain HTTP on Boost.Beast.
#pragma once

#include "airlock/policy/review.h"
#include "supervisor/review/reviewer.h"

namespace airlock::review {

class WebhookReviewer final : public Reviewer {
 public:
  // Reads token_file now, so a missing file is a chain-build error, not a failure per request.
  static Result<std::unique_ptr<WebhookReviewer>> create(const policy::ReviewWebhook& webhook);

  const std::string& name() const override { return name_; }
  Result<Verdict> review(const Subject& subject) override;

 private:
  WebhookReviewer() = default;
  policy::WebhookUrl url_;
  uint32_t timeout_ms_ = 0;
  std::string token_;
  std::string name_ = "webhook";
};

}  // namespace airlock::review
