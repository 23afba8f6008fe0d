// service::httpStatus and errorCodeName for building the API tests before supervisor/service/
// is part of airlock_core (tests/unit/api.cmake adds this file only then). Same table as
// docs/api.md.
#include "supervisor/service/service.h"

namespace airlock::service {

int httpStatus(ErrorCode code) {
  static constexpr int kStatus[] = {400, 401, 403, 404, 405, 409, 413, 429, 500, 503};
  return kStatus[static_cast<int>(code)];
}

const char* errorCodeName(ErrorCode code) {
  static constexpr const char* kNames[] = {
      "bad_request", "unauthorized",      "forbidden",         "not_found", "method_not_allowed",
      "conflict",    "payload_too_large", "too_many_requests", "internal",  "unavailable"};
  return kNames[static_cast<int>(code)];
}

}  // namespace airlock::service
