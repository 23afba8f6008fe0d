// Reading the audit log back (`airlock audit tail|query`): its rotated files in order and the
// filters operators ask for. The log's format is docs/audit.md's; a line that is not a JSON
// object is reported, not skipped silently.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "airlock/result.h"

namespace airlock::audit {

// The log's files oldest first: <path>.N ... <path>.1, then <path>, those that exist.
std::vector<std::string> logFiles(const std::string& path);

struct RecordFilter {
  std::string sandbox;    // "" any
  std::string execution;  // "" any
  // "" any; "exec", "net", "execution", "review", or "connect" (net records of connect hooks).
  std::string type;
  std::string since;  // "" any; else an RFC 3339 prefix the record's time must not be before

  bool matches(const nlohmann::json& record) const;
};

// The types --type accepts.
bool knownRecordType(std::string_view type);

// Where `airlock audit` looks when neither --log nor a policy names the log: the path the
// reference policy suggests for [audit] log and docs/operations.md uses.
inline constexpr const char* kDefaultAuditLog = "/var/log/airlock/audit.jsonl";

// "2025-01-31", "2025-01-31T12:00", "2025-01-31T12:00:00.5Z" → a prefix comparable with the
// records' times; "90s", "15m", "2h", "7d" → that long before `now_ns`. Errors say the forms.
Result<std::string> parseSince(std::string_view text, uint64_t now_ns);

// Calls `each` with every record of `file` from byte `offset` on that passes `filter`; returns
// the offset after the last complete line (a line still being written is left for later).
// Lines that are not JSON objects go to `bad` with their line's start offset.
Result<uint64_t> scanFile(const std::string& file, uint64_t offset, const RecordFilter& filter,
                          const std::function<void(const nlohmann::json&)>& each,
                          const std::function<void(uint64_t offset)>& bad);

}  // namespace airlock::audit
