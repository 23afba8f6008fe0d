// What a reviewer looks at (Subject) and what it says about it (Verdict). The JSON forms are the
// contract of docs/api.md ("Review") and of the command and webhook reviewers (docs/review.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace airlock::review {

enum class Decision { kAllow, kDeny, kHold };
// "allow", "deny", "hold"
std::string_view decisionName(Decision decision);

enum class SubjectKind { kCode, kCommand, kTransfer };
std::string_view kindName(SubjectKind kind);  // "code", "command", "transfer"

// One code run, command or transfer, as the reviewers see it.
struct Subject {
  SubjectKind kind = SubjectKind::kCode;
  // "python", "node", "shell"; every command is "shell", every transfer "transfer"
  std::string language;
  // The text reviewed: the code; for a command its `sh -c` string, or its argv shell-quoted and
  // joined with spaces; for a transfer its lines (sandbox/transfer_review.h).
  std::string text;
  std::vector<std::string> argv;  // a command given as argv; empty for code and `sh -c` strings
  std::string profile, tenant, sandbox_id;  // who asks; "" when not known (airlock run)
  nlohmann::json details;  // a transfer: what moves, where, and an archive's entries; else null

  static Subject code(std::string language, std::string code);
  static Subject commandArgv(std::vector<std::string> argv);
  static Subject commandLine(std::string cmd);  // a `/bin/sh -c` string

  // {"kind", "language", "code", "argv", "profile", "tenant", "sandbox_id", "code_sha256"}, and
  // "transfer" (details) for a transfer: what the command and webhook reviewers receive.
  nlohmann::json toJson() const;
  // sha256 hex of kind, language and text: the cache key's code part and the approval id's.
  std::string sha256() const;
};

struct Verdict {
  Decision decision = Decision::kAllow;
  std::string reviewer;  // who decided; "" when every reviewer allowed
  std::string rule;      // the reviewer's rule id ("py-subprocess", "timeout", "operator")
  std::string reason;    // for the caller, one sentence
  double duration_ms = 0;
  bool cached = false;

  bool allowed() const { return decision == Decision::kAllow; }
  // {"verdict", "reviewer", "rule", "reason", "duration_ms", "cached"}; empty names are null.
  nlohmann::json toJson() const;
  // "denied by reviewer 'patterns', rule 'py-subprocess': spawning processes is not allowed"
  std::string message() const;
};

}  // namespace airlock::review
