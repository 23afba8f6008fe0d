#include "supervisor/audit/log_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <charconv>

#include "airlock/unique_fd.h"
#include "supervisor/audit/audit_log.h"

namespace airlock::audit {

std::vector<std::string> logFiles(const std::string& path) {
  std::vector<std::string> rotated;
  struct stat st {};
  // Rotation numbers are contiguous from 1 (audit_log.cc renames .N-1 to .N).
  for (int i = 1; ::stat((path + "." + std::to_string(i)).c_str(), &st) == 0; ++i) {
    rotated.push_back(path + "." + std::to_string(i));
  }
  std::vector<std::string> out(rotated.rbegin(), rotated.rend());
  if (::stat(path.c_str(), &st) == 0) out.push_back(path);
  return out;
}

bool knownRecordType(std::string_view type) {
  return type == "exec" || type == "net" || type == "connect" || type == "execution" ||
         type == "review" || type == "transfer" || type == "package" || type == "port" ||
         type == "sandbox";
}

namespace {

std::string stringField(const nlohmann::json& record, const char* key) {
  auto it = record.find(key);
  return it != record.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

bool RecordFilter::matches(const nlohmann::json& record) const {
  if (!sandbox.empty() && stringField(record, "sandbox") != sandbox) return false;
  if (!execution.empty() && stringField(record, "execution") != execution) return false;
  if (!type.empty()) {
    const std::string t = stringField(record, "type");
    if (type == "connect") {
      if (t != "net" || !stringField(record, "hook").starts_with("connect")) return false;
    } else if (t != type) {
      return false;
    }
  }
  // Times are RFC 3339 UTC with a fixed layout, so text order is time order.
  if (!since.empty() && stringField(record, "time") < since) return false;
  return true;
}

namespace {

bool digitsAt(std::string_view s, size_t at, size_t count) {
  if (at + count > s.size()) return false;
  for (size_t i = at; i < at + count; ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

// 2025-01-31, 2025-01-31T12:00, 2025-01-31T12:00:00 or 2025-01-31T12:00:00.5 (1 to 9 digits),
// each with an optional Z.
bool isTimePrefix(std::string_view s) {
  if (s.ends_with('Z')) s.remove_suffix(1);
  if (!digitsAt(s, 0, 4) || s.size() < 10 || s[4] != '-' || !digitsAt(s, 5, 2) || s[7] != '-' ||
      !digitsAt(s, 8, 2))
    return false;
  if (s.size() == 10) return true;
  if (s.size() < 16 || s[10] != 'T' || !digitsAt(s, 11, 2) || s[13] != ':' || !digitsAt(s, 14, 2))
    return false;
  if (s.size() == 16) return true;
  if (s.size() < 19 || s[16] != ':' || !digitsAt(s, 17, 2)) return false;
  if (s.size() == 19) return true;
  const size_t fraction = s.size() - 20;
  return s[19] == '.' && fraction >= 1 && fraction <= 9 && digitsAt(s, 20, fraction);
}

}  // namespace

// Matched by hand, not with std::regex: libstdc++'s matcher recurses once per character, and a
// --since of 200,000 digits overflowed the stack (fuzz/audit_log_fuzz.cc found it).
Result<std::string> parseSince(std::string_view text, uint64_t now_ns) {
  const std::string s(text);
  if (s.size() >= 2 && digitsAt(s, 0, s.size() - 1) &&
      std::string_view("smhd").find(s.back()) != std::string_view::npos) {
    const uint64_t unit_s = s.back() == 's'   ? 1
                            : s.back() == 'm' ? 60
                            : s.back() == 'h' ? 3600
                                              : 86400;
    const uint64_t unit_ns = unit_s * 1000000000ull;
    uint64_t n = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size() - 1, n);
    // Longer ago than the epoch is the epoch. (n * unit_ns wrapped around, and a count past 64
    // bits left n at 0, so "99999999999999999999d" meant now; the fuzzer found both.)
    if (ec != std::errc() || n > now_ns / unit_ns) return rfc3339(0);
    return rfc3339(now_ns - n * unit_ns);
  }
  if (isTimePrefix(s)) {
    // A trailing Z would sort after the digits of a longer time: drop it (all times are UTC).
    return s.back() == 'Z' ? s.substr(0, s.size() - 1) : s;
  }
  return fail("--since '" + s +
              "': expected an RFC 3339 UTC time (2025-01-31, 2025-01-31T12:00, "
              "2025-01-31T12:00:00Z) or a duration ago (90s, 15m, 2h, 7d)");
}

Result<uint64_t> scanFile(const std::string& file, uint64_t offset, const RecordFilter& filter,
                          const std::function<void(const nlohmann::json&)>& each,
                          const std::function<void(uint64_t offset)>& bad) {
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return sysError("open audit log", file);
  if (::lseek(fd.get(), static_cast<off_t>(offset), SEEK_SET) < 0) {
    return sysError("lseek audit log", file);
  }
  std::string pending;
  uint64_t line_start = offset;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sysError("read audit log", file);
    if (n == 0) break;
    pending.append(buf, static_cast<size_t>(n));
    size_t from = 0;
    for (size_t nl; (nl = pending.find('\n', from)) != std::string::npos; from = nl + 1) {
      std::string_view line(pending.data() + from, nl - from);
      auto record = nlohmann::json::parse(line, nullptr, false);
      if (record.is_discarded() || !record.is_object()) {
        bad(line_start);
      } else if (filter.matches(record)) {
        each(record);
      }
      line_start += line.size() + 1;
    }
    pending.erase(0, from);
  }
  return line_start;
}

}  // namespace airlock::audit
