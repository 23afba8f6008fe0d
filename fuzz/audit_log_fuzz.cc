// Reading the audit log back (supervisor/audit/log_reader.cc, `airlock audit tail|query`): the
// log's JSON lines hold text that sandboxed programs chose (paths, argv, host names), a log may be
// cut mid-line by a crash or rotation, and --since is operator text.
//
// Input: line 1 is a --since value, line 2 a --type value, the rest the log file's bytes (put in
// a memfd, since scanFile reads a file as the real reader does).
//
// Invariants checked: scanFile returns the offset just past the last complete line; with no
// filter every complete line is either a record or reported bad, once, at its own offset; a
// filtered scan sees a subset; a relative --since is that long before now, or the epoch.
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "airlock/unique_fd.h"
#include "supervisor/audit/audit_log.h"
#include "supervisor/audit/log_reader.h"
#include "support/fuzz_check.h"

namespace audit = airlock::audit;

namespace {

// A fixed "now" (2025-06-01T00:00:00Z), so runs are reproducible.
constexpr uint64_t kNowNs = 1748736000ull * 1000000000ull;

std::string_view takeLine(std::string_view& rest) {
  const size_t nl = rest.find('\n');
  const std::string_view line = rest.substr(0, nl);
  rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
  return line;
}

// What a relative --since ("90s", "7d") must give: that long before now, or the epoch when that
// is longer ago than the epoch. nullopt for any other text.
std::optional<std::string> relativeSince(std::string_view text) {
  if (text.size() < 2) return std::nullopt;
  const std::string_view digits = text.substr(0, text.size() - 1);
  const size_t unit = std::string_view("smhd").find(text.back());
  if (unit == std::string_view::npos) return std::nullopt;
  for (char c : digits)
    if (c < '0' || c > '9') return std::nullopt;
  const unsigned __int128 unit_ns =
      static_cast<unsigned __int128>(std::array<uint64_t, 4>{1, 60, 3600, 86400}[unit]) *
      1000000000u;
  unsigned __int128 back = 0;
  for (char c : digits) {
    back = back * 10 + static_cast<unsigned>(c - '0');
    if (back > kNowNs) break;  // already before the epoch; stop before 128 bits overflow
  }
  back *= unit_ns;
  return audit::rfc3339(back >= kNowNs ? 0 : kNowNs - static_cast<uint64_t>(back));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  const std::string_view since_text = takeLine(rest);
  const std::string_view type_text = takeLine(rest);
  const std::string_view log = rest;

  audit::RecordFilter filter;
  if (auto since = audit::parseSince(since_text, kNowNs)) {
    if (auto expected = relativeSince(since_text)) FUZZ_CHECK(*since == *expected);
    filter.since = *since;
  }
  if (audit::knownRecordType(type_text)) filter.type = std::string(type_text);

  airlock::UniqueFd fd(memfd_create("audit-log-fuzz", MFD_CLOEXEC));
  FUZZ_CHECK(fd);
  FUZZ_CHECK(write(fd.get(), log.data(), log.size()) == static_cast<ssize_t>(log.size()));
  const std::string path = "/proc/self/fd/" + std::to_string(fd.get());

  const size_t last_nl = log.rfind('\n');
  const uint64_t complete = last_nl == std::string_view::npos ? 0 : last_nl + 1;
  size_t lines = 0;
  for (char c : log) lines += c == '\n';

  size_t records = 0, bad = 0;
  uint64_t last_bad = 0;
  auto scanned = audit::scanFile(
      path, 0, audit::RecordFilter{},
      [&](const nlohmann::json& r) {
        FUZZ_CHECK(r.is_object());
        ++records;
      },
      [&](uint64_t offset) {
        FUZZ_CHECK(offset < complete);
        FUZZ_CHECK(offset == 0 || log[offset - 1] == '\n');
        FUZZ_CHECK(bad == 0 || offset > last_bad);
        last_bad = offset;
        ++bad;
      });
  FUZZ_CHECK(scanned.has_value());
  FUZZ_CHECK(*scanned == complete);
  FUZZ_CHECK(records + bad == lines);

  size_t matched = 0;
  auto filtered = audit::scanFile(
      path, 0, filter,
      [&](const nlohmann::json& r) {
        FUZZ_CHECK(filter.matches(r));
        ++matched;
      },
      [](uint64_t) {});
  FUZZ_CHECK(filtered.has_value() && *filtered == complete);
  FUZZ_CHECK(matched <= records);

  // A reader that resumes mid-file (tail -f after a partial line) starts at any offset.
  const uint64_t from = log.empty() ? 0 : size % (log.size() + 1);
  auto resumed = audit::scanFile(
      path, from, audit::RecordFilter{}, [](const nlohmann::json&) {}, [](uint64_t) {});
  FUZZ_CHECK(resumed.has_value() && *resumed >= from && *resumed <= log.size());
  return 0;
}
