#include "supervisor/review/verdict.h"

#include "airlock/policy/keys.h"
#include "supervisor/sandbox/run_result.h"

namespace airlock::review {

std::string_view decisionName(Decision decision) {
  switch (decision) {
    case Decision::kAllow:
      return "allow";
    case Decision::kDeny:
      return "deny";
    case Decision::kHold:
      return "hold";
  }
  return "deny";
}

std::string_view kindName(SubjectKind kind) {
  switch (kind) {
    case SubjectKind::kCode:
      return "code";
    case SubjectKind::kCommand:
      return "command";
    case SubjectKind::kTransfer:
      return "transfer";
  }
  return "code";
}

namespace {

// A word as POSIX sh reads it back: bare when it is plainly safe, else single-quoted.
std::string shellQuote(const std::string& word) {
  bool bare = !word.empty() && word.find_first_not_of(
                                   "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ"
                                   "RSTUVWXYZ0123456789_-./=:,+@%") == std::string::npos;
  if (bare) return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

nlohmann::json nameOrNull(const std::string& s) {
  return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
}

}  // namespace

Subject Subject::code(std::string language, std::string code) {
  Subject s;
  s.kind = SubjectKind::kCode;
  s.language = std::move(language);
  s.text = std::move(code);
  return s;
}

Subject Subject::commandArgv(std::vector<std::string> argv) {
  Subject s;
  s.kind = SubjectKind::kCommand;
  s.language = "shell";
  for (const auto& a : argv) s.text += (s.text.empty() ? "" : " ") + shellQuote(a);
  s.argv = std::move(argv);
  return s;
}

Subject Subject::commandLine(std::string cmd) {
  Subject s;
  s.kind = SubjectKind::kCommand;
  s.language = "shell";
  s.text = std::move(cmd);
  return s;
}

std::string Subject::sha256() const {
  std::string material(kindName(kind));
  material += '\0';
  material += language;
  material += '\0';
  material += text;
  return policy::sha256Hex(material);
}

nlohmann::json Subject::toJson() const {
  // Text that is not UTF-8 cannot be a JSON string; reviewers get each bad byte as U+FFFD.
  nlohmann::json j = {{"kind", kindName(kind)},
                      {"language", language},
                      {"code", sandbox::toValidUtf8(text)},
                      {"argv", argv.empty() ? nlohmann::json(nullptr) : nlohmann::json(argv)},
                      {"profile", profile},
                      {"tenant", tenant},
                      {"sandbox_id", nameOrNull(sandbox_id)},
                      {"code_sha256", sha256()}};
  if (kind == SubjectKind::kTransfer) j["transfer"] = details;
  return j;
}

nlohmann::json Verdict::toJson() const {
  return {{"verdict", decisionName(decision)}, {"reviewer", nameOrNull(reviewer)},
          {"rule", nameOrNull(rule)},          {"reason", nameOrNull(reason)},
          {"duration_ms", duration_ms},        {"cached", cached}};
}

std::string Verdict::message() const {
  std::string m = decision == Decision::kAllow  ? "allowed"
                  : decision == Decision::kHold ? "held for approval"
                                                : "denied";
  if (!reviewer.empty()) m += " by reviewer '" + reviewer + "'";
  if (!rule.empty()) m += ", rule '" + rule + "'";
  if (!reason.empty()) m += ": " + reason;
  return m;
}

}  // namespace airlock::review
