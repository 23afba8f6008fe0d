#include "supervisor/audit/lifecycle_records.h"

#include <openssl/evp.h>
#include <time.h>

#include <type_traits>

#include "airlock/policy/keys.h"

namespace airlock::audit {

uint64_t wallNowNs() {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec);
}

std::string destroyReason(std::string_view internal_reason) {
  if (internal_reason == "deleted") return "client";
  if (internal_reason == "one-shot") return "done";
  return std::string(internal_reason);
}

nlohmann::json sandboxFields(std::string_view event, std::string_view reason,
                             std::string_view profile, std::string_view backend) {
  auto orNull = [](std::string_view s) {
    return s.empty() ? nlohmann::json() : nlohmann::json(std::string(s));
  };
  return {{"event", event},
          {"reason", orNull(reason)},
          {"profile", orNull(profile)},
          {"backend", orNull(backend)}};
}

std::string hashedBytes(const ExecutionText& what) {
  if (what.argv.empty()) return what.text;
  std::string bytes;
  for (const auto& a : what.argv) {
    bytes += a;
    bytes += '\0';
  }
  return bytes;
}

nlohmann::json executionFields(const ExecutionText& what, bool record_code) {
  nlohmann::json fields = {
      {"kind", what.kind},
      {"language", what.language.empty() ? nlohmann::json() : nlohmann::json(what.language)},
      {"sha256", policy::sha256Hex(hashedBytes(what))}};
  if (record_code) {
    fields["code"] = what.argv.empty() ? nlohmann::json(what.text) : nlohmann::json(what.argv);
  }
  return fields;
}

namespace {

// A final event's field, or `fallback` when it is absent, null or of another type: a command
// killed by a signal ends with "exit_code": null, and a record must never fail its request
// (nlohmann's value() throws on a null).
template <class T>
T fieldOr(const nlohmann::json& event, const char* key, T fallback) {
  auto it = event.find(key);
  if (it == event.end()) return fallback;
  if constexpr (std::is_same_v<T, bool>) {
    return it->is_boolean() ? it->get<bool>() : fallback;
  } else if constexpr (std::is_integral_v<T>) {
    return it->is_number_integer() ? it->get<T>() : fallback;
  } else {
    return it->is_string() ? it->get<T>() : fallback;
  }
}

}  // namespace

void addExecutionOutcome(nlohmann::json& fields, const nlohmann::json* end, double duration_ms) {
  static const nlohmann::json kAbandoned = {{"type", "end"}, {"status", "abandoned"}};
  const nlohmann::json& final_event = end != nullptr ? *end : kAbandoned;
  const std::string type = fieldOr<std::string>(final_event, "type", "");
  bool timed_out = fieldOr(final_event, "timed_out", false);
  if (type == "exit") {
    fields["exit_code"] = fieldOr(final_event, "exit_code", -1);
    fields["signal"] = fieldOr(final_event, "signal", 0);
    fields["status"] = final_event.contains("error") ? "error" : timed_out ? "timeout" : "exited";
  } else {
    fields["status"] = fieldOr<std::string>(final_event, "status", "error");
    timed_out = timed_out || fields["status"] == "timeout";
  }
  fields["timed_out"] = timed_out;
  fields["oom"] = fieldOr(final_event, "oom", false) || fieldOr(final_event, "oom_killed", false);
  fields["denied"] = false;
  fields["duration_ms"] = duration_ms;
}

void addExecutionRefusal(nlohmann::json& fields, bool denied, std::string_view reason) {
  fields["status"] = denied ? "denied" : "error";
  fields["timed_out"] = false;
  fields["oom"] = false;
  fields["denied"] = denied;
  fields["reason"] = std::string(reason);
  fields["duration_ms"] = 0;
}

Sha256Stream::Sha256Stream() : ctx_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr);
}

Sha256Stream::~Sha256Stream() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void Sha256Stream::update(std::string_view bytes) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), bytes.data(), bytes.size());
}

std::string Sha256Stream::hex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), digest, &len);
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len; ++i) {
    out += kDigits[digest[i] >> 4];
    out += kDigits[digest[i] & 15];
  }
  return out;
}

}  // namespace airlock::audit
