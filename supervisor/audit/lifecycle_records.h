// The records of the audit trail that say who ran what, where, and what came of it
// (docs/audit.md): `sandbox` (create, adopt, destroy and why) and the outcome form of
// `execution` (what ran, its sha256, and how it ended). Built here so every caller writes the
// same fields; the callers only say when.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace airlock::audit {

// Nanoseconds since the epoch, now: the `time` of records written as their event happens.
uint64_t wallNowNs();

// "deleted" (the API's DELETE) → "client"; "one-shot" (a run's sandbox, done) → "done"; the
// other reasons (idle, lifetime, shutdown, reload, prestart, error, oom) are kept as they are.
std::string destroyReason(std::string_view internal_reason);

// `sandbox` record fields: event is create | adopt | destroy; reason only for destroy.
nlohmann::json sandboxFields(std::string_view event, std::string_view reason,
                             std::string_view profile, std::string_view backend);

// What one execution ran: kind "code" (language + code), "command" (a shell line or an argv) or
// "run" (airlock run's one-shot program).
struct ExecutionText {
  std::string kind;
  std::string language;           // "" for commands
  std::string text;               // the code, or the shell line
  std::vector<std::string> argv;  // a command given as argv (text empty)
};

// The bytes whose sha256 the record carries: the text, or each argv entry followed by a NUL byte
// (the layout of /proc/PID/cmdline), so an operator can recompute it.
std::string hashedBytes(const ExecutionText& what);

// `execution` record fields: kind, language, sha256, and code (the text, or the argv) only when
// record_code. The outcome is added by executionOutcome.
nlohmann::json executionFields(const ExecutionText& what, bool record_code);

// Adds the outcome read from an execution's final event ("exit" of a command, "end" of a code
// run): exit_code or status, timed_out, oom, denied=false, duration_ms. A null final event: the
// client left before the end, status "abandoned".
void addExecutionOutcome(nlohmann::json& fields, const nlohmann::json* final_event,
                         double duration_ms);

// Adds the outcome of an execution that never reached the sandbox: status "denied" (the review
// refused it) or "error", denied, and why.
void addExecutionRefusal(nlohmann::json& fields, bool denied, std::string_view reason);

// sha256 of bytes that stream past (the file API's reads and writes), as 64 lowercase hex digits.
class Sha256Stream {
 public:
  Sha256Stream();
  ~Sha256Stream();
  Sha256Stream(const Sha256Stream&) = delete;
  Sha256Stream& operator=(const Sha256Stream&) = delete;
  void update(std::string_view bytes);
  std::string hex();  // once, at the end

 private:
  void* ctx_;  // EVP_MD_CTX, kept out of this header
};

}  // namespace airlock::audit
