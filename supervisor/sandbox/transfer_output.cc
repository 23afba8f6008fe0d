#include "supervisor/sandbox/transfer_output.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

namespace airlock::sandbox {
namespace {

// One "L TYPE SIZE NAME" line of the helper's listing.
void readListingLine(std::string_view line, ArchiveListing& listing) {
  line.remove_prefix(2);
  const auto sp1 = line.find(' ');
  if (sp1 == std::string_view::npos) return;
  const auto sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) return;
  ArchiveListing::Entry e;
  e.type = std::string(line.substr(0, sp1));
  e.size = std::strtoull(std::string(line.substr(sp1 + 1, sp2 - sp1 - 1)).c_str(), nullptr, 10);
  e.name = std::string(line.substr(sp2 + 1));
  listing.entries.push_back(std::move(e));
}

}  // namespace

uint64_t readCreditLines(const std::string& out, size_t& scanned, uint64_t credited) {
  for (size_t nl; (nl = out.find('\n', scanned)) != std::string::npos; scanned = nl + 1) {
    if (out.compare(scanned, 2, "C ") != 0) continue;
    // The line's own digits and nothing else. strtoull skipped blanks and newlines into the next
    // line, so "C \n10" credited 10 or nothing depending on how the output arrived, and it read
    // "C -1" as 2^64 - 1 (fuzz/transfer_output_fuzz.cc found the first).
    const char* first = out.data() + scanned + 2;
    const char* last = out.data() + nl;
    uint64_t bytes = 0;
    auto [end, ec] = std::from_chars(first, last, bytes);
    if (ec == std::errc() && end == last && first != last) credited = std::max(credited, bytes);
  }
  return credited;
}

std::optional<ArchiveListing> completeListing(const std::string& out) {
  const auto end = out.starts_with("L-END ") ? 0 : out.find("\nL-END ");
  if (end == std::string::npos) return std::nullopt;
  const auto end_line = out.find('\n', end == 0 ? 0 : end + 1);
  if (end_line == std::string::npos) return std::nullopt;
  ArchiveListing listing;
  size_t at = 0;
  while (at < out.size()) {
    const auto nl = out.find('\n', at);
    if (nl == std::string::npos) break;
    const std::string_view line(out.data() + at, nl - at);
    if (line.starts_with("L ")) {
      readListingLine(line, listing);
    } else if (line.starts_with("L-END ")) {
      unsigned long long total = 0;
      int truncated = 0;
      std::sscanf(std::string(line).c_str(), "L-END %llu %d", &total, &truncated);
      listing.total = total;
      listing.truncated = truncated != 0;
      break;
    }
    at = nl + 1;
  }
  return listing;
}

std::string lastLine(std::string text) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  const auto nl = text.rfind('\n');
  text = nl == std::string::npos ? text : text.substr(nl + 1);
  const std::string prefix = "airlock transfer: ";
  return text.starts_with(prefix) ? text.substr(prefix.size()) : text;
}

Result<> readSummary(const std::string& line, TransferSummary& s) {
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (!j.is_object()) return fail("the transfer helper's summary is not JSON: " + line);
  // Each count must be a whole number or absent (0). json::value() threw type_error on a count
  // of another type ({"files": "x"}), and nothing on the transfer's thread caught it, so a
  // sandbox could end the supervisor (fuzz/transfer_output_fuzz.cc found it).
  const std::pair<const char*, uint64_t*> counts[] = {
      {"files", &s.files}, {"dirs", &s.dirs}, {"links", &s.links}, {"bytes", &s.bytes}};
  for (const auto& [key, out] : counts) {
    auto it = j.find(key);
    if (it == j.end()) {
      *out = 0;
    } else if (it->is_number_unsigned()) {
      *out = it->get<uint64_t>();
    } else {
      return fail(std::string("the transfer helper's summary has a bad '") + key + "': " + line);
    }
  }
  return {};
}

}  // namespace airlock::sandbox
