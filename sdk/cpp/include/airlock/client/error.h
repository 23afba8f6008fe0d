// How the airlock C++ client SDK reports failure: every call that can fail returns
// `airlock::sdk::Result<T>` (a std::expected, like the rest of airlock's code) whose Error says
// what kind of failure it was, so a service can branch on it without reading messages.
//
// What is NOT an Error: code that raised an exception (Execution::error), a command that exited
// non-zero (CommandResult::exit_code). Those are outcomes of the user's program.
#pragma once

#include <expected>
#include <optional>
#include <string>
#include <string_view>

namespace airlock::sdk {

enum class ErrorKind {
  kConnection,       // the supervisor could not be reached or the connection broke
  kInvalidArgument,  // the caller's input was refused before anything was sent
  kBadRequest,       // 400 bad_request
  kUnauthorized,     // 401: missing or wrong AIRLOCK_TOKEN
  kForbidden,        // 403 forbidden: the tenant may not use this profile
  kDeniedByReview,   // 403 denied_by_review: Error::review() names reviewer, rule and reason
  kNotFound,         // 404: sandbox, command, context or file
  kConflict,         // 409: name taken, sandbox not running, context busy
  kTooLarge,         // 413: body or workspace quota
  kQuota,            // 429: tenant or host quota (sandboxes, memory, connections)
  kTimeout,          // the code run or command hit its timeout (output came through callbacks)
  kUnavailable,      // 503: the supervisor is draining
  kServer,           // 500 and any other answer the SDK does not know
  kProtocol,         // the supervisor's answer did not have the documented shape
  kTransferFailed,   // a transfer's record ended error, denied or cancelled (code() says which)
};

// "not_found", "denied_by_review", ...: stable names for logs and tool results.
std::string_view kindName(ErrorKind kind);

// The outcome of the profile's review chain (docs/api.md, Review).
struct Review {
  std::string verdict;  // allow, deny or hold
  std::string reviewer;
  std::string rule;
  std::string reason;
  double duration_ms = 0;
  bool cached = false;
};

class Error {
 public:
  Error(ErrorKind kind, std::string message, int http_status = 0, std::string code = {})
      : kind_(kind), message_(std::move(message)), status_(http_status), code_(std::move(code)) {}

  ErrorKind kind() const { return kind_; }
  // The whole message, e.g. "sandbox 'web-1' not found (HTTP 404 not_found)".
  const std::string& message() const { return message_; }
  int httpStatus() const { return status_; }         // 0 when no HTTP answer was involved
  const std::string& code() const { return code_; }  // the API's error code, "" without one
  const std::optional<Review>& review() const { return review_; }  // for kDeniedByReview

  Error& withReview(Review review) & {
    review_ = std::move(review);
    return *this;
  }
  // Prepends context: "files put: <message>".
  Error&& wrap(std::string_view context) && {
    message_.insert(0, std::string(context) + ": ");
    return std::move(*this);
  }

 private:
  ErrorKind kind_;
  std::string message_;
  int status_;
  std::string code_;
  std::optional<Review> review_;
};

template <typename T = void>
using Result = std::expected<T, Error>;

inline std::unexpected<Error> failWith(ErrorKind kind, std::string message) {
  return std::unexpected<Error>(Error(kind, std::move(message)));
}

}  // namespace airlock::sdk
