#include "airlock/client/error.h"

#include "api_error.h"

namespace airlock::sdk {

namespace {

std::string stringField(const nlohmann::json& doc, const char* key) {
  auto it = doc.find(key);
  return it != doc.end() && it->is_string() ? it->get<std::string>() : std::string();
}

ErrorKind kindOf(unsigned status, const std::string& code) {
  if (code == "denied_by_review") return ErrorKind::kDeniedByReview;
  switch (status) {
    case 400:
      return ErrorKind::kBadRequest;
    case 401:
      return ErrorKind::kUnauthorized;
    case 403:
      return ErrorKind::kForbidden;
    case 404:
      return ErrorKind::kNotFound;
    case 409:
      return ErrorKind::kConflict;
    case 413:
      return ErrorKind::kTooLarge;
    case 429:
      return ErrorKind::kQuota;
    case 503:
      return ErrorKind::kUnavailable;
    default:
      return ErrorKind::kServer;
  }
}

}  // namespace

std::string_view kindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kConnection:
      return "connection";
    case ErrorKind::kInvalidArgument:
      return "invalid_argument";
    case ErrorKind::kBadRequest:
      return "bad_request";
    case ErrorKind::kUnauthorized:
      return "unauthorized";
    case ErrorKind::kForbidden:
      return "forbidden";
    case ErrorKind::kDeniedByReview:
      return "denied_by_review";
    case ErrorKind::kNotFound:
      return "not_found";
    case ErrorKind::kConflict:
      return "conflict";
    case ErrorKind::kTooLarge:
      return "payload_too_large";
    case ErrorKind::kQuota:
      return "too_many_requests";
    case ErrorKind::kTimeout:
      return "timeout";
    case ErrorKind::kUnavailable:
      return "unavailable";
    case ErrorKind::kServer:
      return "server";
    case ErrorKind::kProtocol:
      return "protocol";
    case ErrorKind::kTransferFailed:
      return "transfer_failed";
  }
  return "unknown";
}

Review reviewFromJson(const nlohmann::json& review) {
  Review r;
  if (!review.is_object()) return r;
  r.verdict = stringField(review, "verdict");
  r.reviewer = stringField(review, "reviewer");
  r.rule = stringField(review, "rule");
  r.reason = stringField(review, "reason");
  if (auto it = review.find("duration_ms"); it != review.end() && it->is_number())
    r.duration_ms = it->get<double>();
  if (auto it = review.find("cached"); it != review.end() && it->is_boolean())
    r.cached = it->get<bool>();
  return r;
}

Error errorFromAnswer(unsigned status, std::string_view reason, const std::string& body) {
  auto doc = nlohmann::json::parse(body, nullptr, false);
  if (doc.is_object() && doc.contains("error") && doc["error"].is_object()) {
    const auto& e = doc["error"];
    std::string message = stringField(e, "message");
    if (message.empty()) message = "(no message)";
    std::string code = stringField(e, "code");
    if (code.empty()) code = std::string(reason);
    Error err(kindOf(status, code), message + " (HTTP " + std::to_string(status) + " " + code + ")",
              static_cast<int>(status), code);
    if (auto it = e.find("review"); it != e.end() && it->is_object())
      err.withReview(reviewFromJson(*it));
    return err;
  }
  std::string snippet = body.substr(0, 200);
  while (!snippet.empty() && (snippet.back() == '\n' || snippet.back() == '\r')) snippet.pop_back();
  return Error(kindOf(status, ""),
               "the supervisor answered HTTP " + std::to_string(status) + " " +
                   std::string(reason) + (snippet.empty() ? "" : ": " + snippet),
               static_cast<int>(status));
}

}  // namespace airlock::sdk
