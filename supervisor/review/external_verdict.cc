#include "supervisor/review/external_verdict.h"

#include <nlohmann/json.hpp>

namespace airlock::review {

namespace {

constexpr size_t kMaxRule = 128;
constexpr size_t kMaxReason = 1024;

std::string excerpt(std::string_view s) {
  std::string out(s.substr(0, 200));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  return "'" + out + (s.size() > 200 ? "...'" : "'");
}

}  // namespace

Result<Verdict> parseExternalVerdict(std::string_view answer) {
  if (answer.size() > kMaxExternalAnswer) {
    return fail("answer is " + std::to_string(answer.size()) + " bytes, above the limit of " +
                std::to_string(kMaxExternalAnswer));
  }
  auto j = nlohmann::json::parse(answer, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return fail("answer is not a JSON object: " + excerpt(answer));
  }
  Verdict v;
  auto verdict = j.find("verdict");
  if (verdict == j.end() || !verdict->is_string()) {
    return fail("answer has no \"verdict\" string: " + excerpt(answer));
  }
  const std::string& d = verdict->get_ref<const std::string&>();
  if (d == "allow") {
    v.decision = Decision::kAllow;
  } else if (d == "deny") {
    v.decision = Decision::kDeny;
  } else if (d == "hold") {
    v.decision = Decision::kHold;
  } else {
    return fail("answer has \"verdict\": " + excerpt(d) + "; expected allow, deny or hold");
  }
  for (auto [key, target, cap] :
       {std::tuple{"rule", &v.rule, kMaxRule}, std::tuple{"reason", &v.reason, kMaxReason}}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_string()) return fail(std::string("answer's \"") + key + "\" is not a string");
    *target = it->get<std::string>().substr(0, cap);
  }
  return v;
}

}  // namespace airlock::review
