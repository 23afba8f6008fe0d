#include "supervisor/sandbox/run_result.h"

#include <algorithm>

namespace airlock::sandbox {

const char* statusName(Status s) {
  switch (s) {
    case Status::kExited:
      return "exited";
    case Status::kSignaled:
      return "signaled";
    case Status::kTimeout:
      return "timeout";
    case Status::kMemoryLimit:
      return "memory_limit";
    case Status::kRefused:
      return "refused";
    case Status::kError:
      return "error";
  }
  return "error";
}

int RunResult::processExitCode() const {
  switch (status) {
    case Status::kExited:
      return exit_code;
    case Status::kSignaled:
      return 128 + signal;
    case Status::kTimeout:
      return kExitTimeout;
    case Status::kMemoryLimit:
      return kExitMemoryLimit;
    case Status::kRefused:
      return kExitRefused;
    case Status::kError:
      return kExitAirlockError;
  }
  return kExitAirlockError;
}

int RunResult::airlockExitCode() const {
  const int code = processExitCode();
  if (code != 0) return code;
  const bool out_failed = std::any_of(files_out.begin(), files_out.end(),
                                      [](const auto& f) { return !f.error.empty(); }) ||
                          std::any_of(transfers.begin(), transfers.end(), [](const auto& t) {
                            return t.direction == "out" && !t.error.empty();
                          });
  return out_failed ? kExitAirlockError : 0;
}

nlohmann::json errorRecord(const std::string& message) {
  return {{"schema", RunResult::kSchema},
          {"status", statusName(Status::kError)},
          {"airlock_exit_code", kExitAirlockError},
          {"message", message}};
}

std::string toValidUtf8(const std::string& in) {
  std::string out;
  out.reserve(in.size());
  const auto* s = reinterpret_cast<const unsigned char*>(in.data());
  size_t n = in.size(), i = 0;
  while (i < n) {
    unsigned char c = s[i];
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xE  ? 3
                 : (c >> 3) == 0x1E ? 4
                                    : 0;
    bool ok = len != 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) ok = (s[i + k] & 0xC0) == 0x80;
    if (ok && len > 1) {
      // Reject overlong forms, surrogates and code points past U+10FFFF.
      uint32_t cp = c & (0x7F >> len);
      for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (s[i + k] & 0x3F);
      static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
      ok = cp >= kMin[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    }
    if (ok) {
      out.append(in, i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

nlohmann::json transferJson(const TransferOutcome& t) {
  using nlohmann::json;
  json o = {{"direction", t.direction},
            {"plugin", t.plugin},
            {"location", t.location},
            {"sandbox_path", t.sandbox_path},
            {"files", t.files},
            {"dirs", t.dirs},
            {"links", t.links},
            {"bytes", t.bytes},
            {"archive_bytes", t.moved_bytes},
            {"ms", t.ms},
            {"status", t.status}};
  if (!t.id.empty()) o["id"] = t.id;
  o["sha256"] = t.sha256.empty() ? json(nullptr) : json(t.sha256);
  o["error"] = t.error.empty() ? json(nullptr) : json(t.error);
  o["review"] = t.review;
  return o;
}

nlohmann::json RunResult::toJson() const {
  using nlohmann::json;
  auto createSteps = [this] {
    json o = json::object();
    for (const auto& [step, ms] : create_steps) o[step] = ms;
    return o;
  };
  auto transfersJson = [&] {
    json a = json::array();
    for (const auto& t : transfers) a.push_back(transferJson(t));
    return a;
  };
  auto files = [](const std::vector<FileOutcome>& v) {
    json a = json::array();
    for (const auto& f : v) {
      json o = {{"sandbox_path", f.sandbox_path}, {"local_path", f.local_path}, {"bytes", f.bytes}};
      o["error"] = f.error.empty() ? json(nullptr) : json(f.error);
      a.push_back(o);
    }
    return a;
  };
  json j = {
      {"schema", kSchema},
      {"status", statusName(status)},
      {"exit_code", status == Status::kExited ? json(exit_code) : json(nullptr)},
      {"signal", signal != 0 ? json(signal) : json(nullptr)},
      {"airlock_exit_code", airlockExitCode()},
      {"message", message.empty() ? json(nullptr) : json(message)},
      {"sandbox_id", sandbox_id},
      {"language", language},
      {"profile", profile},
      {"policy", {{"source", policy_source}, {"hash", policy_hash}, {"relaxations", relaxations}}},
      {"stdout", toValidUtf8(stdout_data)},
      {"stderr", toValidUtf8(stderr_data)},
      {"stdout_truncated", stdout_truncated},
      {"stderr_truncated", stderr_truncated},
      {"stdout_bytes", stdout_bytes},
      {"stderr_bytes", stderr_bytes},
      {"timing_ms",
       {{"total", total_ms},
        {"prepare", prepare_ms},
        {"create", create_ms},
        {"create_steps", createSteps()},
        {"exec", exec_ms},
        {"teardown", teardown_ms}}},
      {"usage",
       {{"user_us", user_us},
        {"sys_us", sys_us},
        {"max_rss_kb", max_rss_kb},
        {"memory_peak_bytes", memory_peak_bytes},
        {"oom_kills", oom_kills}}},
      {"files_in", files(files_in)},
      {"files_out", files(files_out)},
      {"transfers", transfersJson()},
      {"review", review ? review->toJson() : json(nullptr)},
      {"audit", audit},
  };
  return j;
}

}  // namespace airlock::sandbox
