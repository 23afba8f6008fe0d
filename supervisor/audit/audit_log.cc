// JSON-lines audit log with size rotation.
#include "supervisor/audit/audit_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>

namespace airlock::audit {

std::string rfc3339(uint64_t wall_ns) {
  time_t secs = static_cast<time_t>(wall_ns / 1000000000ull);
  unsigned micros = static_cast<unsigned>((wall_ns % 1000000000ull) / 1000);
  tm utc{};
  ::gmtime_r(&secs, &utc);
  char buf[80];  // room for any int the compiler imagines in tm's fields
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06uZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, micros);
  return buf;
}

nlohmann::json execFields(const ExecEvent& e) {
  return {{"pid", e.origin.pid},
          {"ns_pid", e.origin.ns_pid},
          {"ppid", e.ppid},
          {"uid", e.origin.uid},
          {"comm", e.origin.comm},
          {"path", e.path},
          {"argv", e.argv},
          {"argc", e.argc},
          {"argv_truncated", e.argv_truncated}};
}

nlohmann::json netFields(const NetEvent& e, const NetPolicy& policy) {
  return {{"pid", e.origin.pid},
          {"uid", e.origin.uid},
          {"comm", e.origin.comm},
          {"hook", hookName(e.hook)},
          {"family", e.family == 6 ? "ipv6" : "ipv4"},
          {"protocol", protocolName(e.protocol)},
          {"address", e.address},
          {"port", e.port},
          {"verdict", e.allowed ? "allow" : "deny"},
          {"rule", ruleId(e.rule)},
          {"rule_text", describeRule(e.rule, policy)}};
}

Result<std::unique_ptr<AuditLog>> AuditLog::open(const AuditLogOptions& options) {
  if (options.path.empty()) return fail("audit log: no path given");
  if (options.max_bytes < 4096) {
    return fail("audit log: max_bytes must be at least 4096", std::to_string(options.max_bytes));
  }
  if (options.keep < 1) return fail("audit log: keep must be at least 1", options.path);
  std::unique_ptr<AuditLog> log(new AuditLog(options));
  if (auto r = log->reopen(); !r) return Unexpected(std::move(r.error()).wrap("audit log"));
  return log;
}

Result<> AuditLog::reopen() {
  // 0640: the log names what sandboxes ran; it is for the operator, not for every local user.
  fd_.reset(::open(options_.path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640));
  if (!fd_) return sysError("open", options_.path);
  struct stat st {};
  if (::fstat(fd_.get(), &st) != 0) return sysError("fstat", options_.path);
  size_ = static_cast<uint64_t>(st.st_size);
  return {};
}

Result<> AuditLog::rotate() {
  fd_.reset();
  auto name = [&](int i) { return options_.path + "." + std::to_string(i); };
  ::unlink(name(options_.keep).c_str());
  for (int i = options_.keep - 1; i >= 1; --i) {
    if (::rename(name(i).c_str(), name(i + 1).c_str()) != 0 && errno != ENOENT) {
      return sysError("rename", name(i));
    }
  }
  if (::rename(options_.path.c_str(), name(1).c_str()) != 0 && errno != ENOENT) {
    return sysError("rename", options_.path);
  }
  return reopen();
}

Result<> AuditLog::write(std::string_view type, const RecordIds& ids, uint64_t wall_ns,
                         const nlohmann::json& fields) {
  auto idOrNull = [](const std::string& s) {
    return s.empty() ? nlohmann::json() : nlohmann::json(s);
  };
  nlohmann::json record = {
      {"schema", kAuditSchemaVersion},  {"type", type},
      {"time", rfc3339(wall_ns)},       {"sandbox", idOrNull(ids.sandbox)},
      {"tenant", idOrNull(ids.tenant)}, {"execution", idOrNull(ids.execution)}};
  record.update(fields);
  // Invalid UTF-8 (argv bytes are whatever the sandbox passed) is replaced, never refused.
  std::string line = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  line += '\n';
  auto written = append(line);
  if (observer_) observer_(type, record);
  return written;
}

Result<> AuditLog::append(const std::string& line) {
  std::lock_guard lock(mu_);
  if (size_ > 0 && size_ + line.size() > options_.max_bytes) {
    if (auto r = rotate(); !r) return Unexpected(std::move(r.error()).wrap("audit log rotation"));
  }
  if (!fd_) {
    if (auto r = reopen(); !r) return r;
  }
  ssize_t n = ::write(fd_.get(), line.data(), line.size());
  if (n < 0) return sysError("write", options_.path);
  if (static_cast<size_t>(n) != line.size()) return fail("short write", options_.path);
  size_ += line.size();
  return {};
}

}  // namespace airlock::audit
