#include "supervisor/sandbox/service.h"

#include "supervisor/sandbox/agent/port_stream.h"

namespace airlock::sandbox {

int httpStatus(ErrorCode code) {
  switch (code) {
    case ErrorCode::kBadRequest:
      return 400;
    case ErrorCode::kUnauthorized:
      return 401;
    case ErrorCode::kForbidden:
    case ErrorCode::kDeniedByReview:
      return 403;
    case ErrorCode::kNotFound:
      return 404;
    case ErrorCode::kMethodNotAllowed:
      return 405;
    case ErrorCode::kConflict:
      return 409;
    case ErrorCode::kPayloadTooLarge:
      return 413;
    case ErrorCode::kTooManyRequests:
      return 429;
    case ErrorCode::kInternal:
      return 500;
    case ErrorCode::kBadGateway:
      return 502;
    case ErrorCode::kUnavailable:
      return 503;
  }
  return 500;
}

const char* errorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kBadRequest:
      return "bad_request";
    case ErrorCode::kUnauthorized:
      return "unauthorized";
    case ErrorCode::kForbidden:
      return "forbidden";
    case ErrorCode::kDeniedByReview:
      return "denied_by_review";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kMethodNotAllowed:
      return "method_not_allowed";
    case ErrorCode::kConflict:
      return "conflict";
    case ErrorCode::kPayloadTooLarge:
      return "payload_too_large";
    case ErrorCode::kTooManyRequests:
      return "too_many_requests";
    case ErrorCode::kInternal:
      return "internal";
    case ErrorCode::kBadGateway:
      return "bad_gateway";
    case ErrorCode::kUnavailable:
      return "unavailable";
  }
  return "internal";
}

SResult<std::unique_ptr<PortStream>> Service::openPort(const Caller&, const std::string& sb,
                                                       uint16_t) {
  return serviceError(ErrorCode::kNotFound, "sandbox '" + sb + "': no ports here");
}

SResult<std::string> Service::createPortLink(const Caller&, const std::string& sb, uint16_t) {
  return serviceError(ErrorCode::kNotFound, "sandbox '" + sb + "': no ports here");
}

SResult<PortLinkTarget> Service::resolvePortLink(const std::string&) {
  return serviceError(ErrorCode::kNotFound, "no such port link");
}

}  // namespace airlock::sandbox
