// The "review" record of the audit log: one per reviewed execution, allowed or denied, so the log
// answers "who let this run, or why not" next to what it then did (docs/audit.md).
#pragma once

#include "airlock/result.h"
#include "supervisor/audit/audit_log.h"
#include "supervisor/review/verdict.h"

namespace airlock::audit {

// The record's type-specific fields: the final verdict ("verdict", "reviewer", "rule", "reason",
// "duration_ms", "cached") and what was reviewed ("kind", "language", "code_sha256", "profile").
nlohmann::json reviewFields(const review::Verdict& verdict, const review::Subject& subject);

// Appends the record, timed now.
Result<> writeReview(AuditLog& log, const RecordIds& ids, const review::Verdict& verdict,
                     const review::Subject& subject);

}  // namespace airlock::audit
