// The verdict document external reviewers (the `command` program, the `webhook` service and the
// example plugin) answer with: {"verdict": "allow"|"deny"|"hold", "rule": "...", "reason": "..."}.
// rule and reason are optional strings, bounded in length; anything else is an error.
#pragma once

#include <string_view>

#include "airlock/result.h"
#include "supervisor/review/verdict.h"

namespace airlock::review {

inline constexpr size_t kMaxExternalAnswer = 64 * 1024;  // larger answers are refused, bytes

Result<Verdict> parseExternalVerdict(std::string_view answer);

}  // namespace airlock::review
