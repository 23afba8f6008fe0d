// Error and Result<T>: how every fallible airlock function reports failure.
//
// An Error names the operation that failed ("mount(tmpfs)"), the quoted subject it acted on
// ("/home/user"), the errno when the kernel said no, and context added on the way up
// ("sandbox 'abc': stage mounts: mount(tmpfs) '/home/user': EPERM").
#pragma once

#include <cerrno>
#include <cstring>
#include <expected>
#include <string>
#include <string_view>
#include <utility>

namespace airlock {

class Error {
 public:
  Error() = default;
  Error(std::string op, std::string subject = {}, int err = 0)
      : op_(std::move(op)), subject_(std::move(subject)), errno_(err) {}

  const std::string& op() const { return op_; }
  const std::string& subject() const { return subject_; }
  int errnum() const { return errno_; }

  // Prepends context: err.wrap("stage mounts") → "stage mounts: <err>".
  Error&& wrap(std::string_view context) && {
    context_.insert(0, std::string(context) + ": ");
    return std::move(*this);
  }
  Error& wrap(std::string_view context) & {
    context_.insert(0, std::string(context) + ": ");
    return *this;
  }

  std::string message() const {
    std::string m = context_ + op_;
    if (!subject_.empty()) m += " '" + subject_ + "'";
    if (errno_ != 0) {
      m += ": ";
      m += errnoName(errno_);
      m += " (";
      m += std::strerror(errno_);
      m += ")";
    }
    return m;
  }

  static const char* errnoName(int e) {
    const char* name = strerrorname_np(e);
    return name != nullptr ? name : "E?";
  }

 private:
  std::string context_;
  std::string op_;
  std::string subject_;
  int errno_ = 0;
};

template <typename T = void>
using Result = std::expected<T, Error>;

using Unexpected = std::unexpected<Error>;

// A failed libc/syscall call: reads errno now, so call it right after the failure.
inline Unexpected sysError(std::string op, std::string subject = {}) {
  int e = errno;
  return Unexpected(Error(std::move(op), std::move(subject), e));
}

// A failed library call that returns -errno (libseccomp, libbpf).
inline Unexpected kernelError(int negative_ret, std::string op, std::string subject = {}) {
  return Unexpected(Error(std::move(op), std::move(subject), -negative_ret));
}

// A failure with no errno: bad input, protocol violation, policy refusal.
inline Unexpected fail(std::string what, std::string subject = {}) {
  return Unexpected(Error(std::move(what), std::move(subject), 0));
}

}  // namespace airlock

// Propagates an error with context: AIRLOCK_TRY(x, expr, "context"); declares `x`.
#define AIRLOCK_TRY_CTX(var, expr, ctx)                                                         \
  auto var##_result_ = (expr);                                                                  \
  if (!var##_result_) return ::airlock::Unexpected(std::move(var##_result_.error()).wrap(ctx)); \
  auto var = std::move(*var##_result_)
