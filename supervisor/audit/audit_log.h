// The audit log: one JSON object per line, schema version on every record, and the sandbox,
// tenant and execution ids on every record (docs/audit.md). Rotated by size: <path> → <path>.1 →
// ... → <path>.<keep>, the oldest dropped. Thread-safe; each record is one write(2) on an
// O_APPEND descriptor, so a reader never sees half a line from us.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "airlock/result.h"
#include "airlock/unique_fd.h"
#include "supervisor/audit/events.h"
#include "supervisor/audit/net_rules.h"

namespace airlock::audit {

inline constexpr int kAuditSchemaVersion = 1;

struct AuditLogOptions {
  std::string path;
  uint64_t max_bytes = 64ull << 20;  // rotate before a record would take the file past this
  int keep = 5;                      // rotated files kept (<path>.1 .. <path>.<keep>)
};

// Who a record belongs to. Empty ids are written as null.
struct RecordIds {
  std::string sandbox;
  std::string tenant;
  std::string execution;
};

class AuditLog {
 public:
  static Result<std::unique_ptr<AuditLog>> open(const AuditLogOptions& options);

  // Appends {"schema":1,"type":type,"time":...,"sandbox":...,"tenant":...,"execution":...} merged
  // with `fields`. wall_ns: nanoseconds since the epoch of the event.
  Result<> write(std::string_view type, const RecordIds& ids, uint64_t wall_ns,
                 const nlohmann::json& fields);

  const std::string& path() const { return options_.path; }

  // Told each record (its type and the whole record) once it is written, or failed to be: the
  // lifecycle webhooks (webhook_sink.h). Must not block. Set before the log is shared.
  using Observer = std::function<void(std::string_view type, const nlohmann::json& record)>;
  void setObserver(Observer observer) { observer_ = std::move(observer); }

 private:
  explicit AuditLog(AuditLogOptions options) : options_(std::move(options)) {}
  Result<> reopen();
  Result<> rotate();
  Result<> append(const std::string& line);

  AuditLogOptions options_;
  std::mutex mu_;
  UniqueFd fd_;
  uint64_t size_ = 0;
  Observer observer_;
};

// The type-specific fields of event records.
nlohmann::json execFields(const ExecEvent& e);
nlohmann::json netFields(const NetEvent& e, const NetPolicy& policy);

// "2025-01-31T12:34:56.123456Z".
std::string rfc3339(uint64_t wall_ns);

}  // namespace airlock::audit
