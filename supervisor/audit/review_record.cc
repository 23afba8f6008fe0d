#include "supervisor/audit/review_record.h"

#include <time.h>

namespace airlock::audit {

nlohmann::json reviewFields(const review::Verdict& verdict, const review::Subject& subject) {
  nlohmann::json fields = verdict.toJson();
  fields["kind"] = review::kindName(subject.kind);
  fields["language"] = subject.language;
  fields["code_sha256"] = subject.sha256();
  fields["profile"] =
      subject.profile.empty() ? nlohmann::json(nullptr) : nlohmann::json(subject.profile);
  return fields;
}

Result<> writeReview(AuditLog& log, const RecordIds& ids, const review::Verdict& verdict,
                     const review::Subject& subject) {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  const uint64_t wall_ns =
      static_cast<uint64_t>(now.tv_sec) * 1000000000ull + static_cast<uint64_t>(now.tv_nsec);
  return log.write("review", ids, wall_ns, reviewFields(verdict, subject));
}

}  // namespace airlock::audit
