#include "supervisor/sandbox/transfer_review.h"

namespace airlock::sandbox {

review::Subject transferSubject(const TransferOutcome& t, uint64_t size,
                                const ArchiveListing* listing) {
  review::Subject s;
  s.kind = review::SubjectKind::kTransfer;
  s.language = "transfer";
  s.text = t.direction == "in" ? "in " + t.location + " -> " + t.sandbox_path
                               : "out " + t.sandbox_path + " -> " + t.location;
  s.text += '\n';
  nlohmann::json entries = nlohmann::json::array();
  if (listing != nullptr) {
    for (const auto& e : listing->entries) {
      s.text += e.type + " " + std::to_string(e.size) + " " + e.name + "\n";
      entries.push_back({{"type", e.type}, {"size", e.size}, {"name", toValidUtf8(e.name)}});
    }
  }
  s.details = {{"direction", t.direction},
               {"plugin", t.plugin},
               {"location", toValidUtf8(t.location)},
               {"sandbox_path", toValidUtf8(t.sandbox_path)},
               {"size", size},
               {"listed", listing != nullptr},
               {"entries", std::move(entries)},
               {"entries_total", listing != nullptr ? listing->total : 0},
               {"truncated", listing != nullptr && listing->truncated}};
  return s;
}

Result<> TransferReview::operator()(const ArchiveListing* listing) {
  if (!judge_) return {};
  auto verdict = judge_(transferSubject(t_, size_, listing));
  if (!verdict) return {};
  t_.review = verdict->toJson();
  if (verdict->allowed()) return {};
  denied_ = true;
  return fail(verdict->message());
}

}  // namespace airlock::sandbox
