// What the supervisor reads from the transfer helper (supervisor/sandbox/transfer_output.cc):
// "C BYTES" credit lines while it unpacks, the "L TYPE SIZE NAME" listing ended by
// "L-END TOTAL TRUNCATED" that the review chain judges, and the last line, its JSON summary or its
// error. The helper runs inside the sandbox, so a hostile sandbox writes all of it.
//
// Invariants checked: credit lines read in pieces (as output arrives) give the same credit as
// read at once, and the credit never goes down; a listing appears only once an L-END line is
// complete, and has at most one entry per line; the summary is read or refused, never thrown.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "supervisor/sandbox/transfer_output.h"
#include "support/fuzz_check.h"

namespace sandbox = airlock::sandbox;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string out(reinterpret_cast<const char*>(data), size);

  size_t scanned_whole = 0;
  const uint64_t credit_whole = sandbox::readCreditLines(out, scanned_whole, 0);

  // As unpackInto sees it: the output grows a piece at a time, the listing looked for each time.
  const size_t piece = 1 + size % 13;
  std::string growing;
  size_t scanned = 0;
  uint64_t credit = 0;
  bool listed = false;
  for (size_t at = 0; at < out.size(); at += piece) {
    growing.append(out, at, piece);
    const uint64_t before = credit;
    credit = sandbox::readCreditLines(growing, scanned, credit);
    FUZZ_CHECK(credit >= before);
    FUZZ_CHECK(scanned <= growing.size());
    auto listing = sandbox::completeListing(growing);
    FUZZ_CHECK(!(listed && !listing));  // once complete, a listing stays complete
    if (listing) listed = true;
  }
  FUZZ_CHECK(credit == credit_whole);
  FUZZ_CHECK(scanned == scanned_whole);

  size_t lines = 0;
  for (char c : out) lines += c == '\n';
  if (auto listing = sandbox::completeListing(out)) {
    FUZZ_CHECK(listing->entries.size() < lines);  // the L-END line is not an entry
  }

  const std::string last = sandbox::lastLine(out);
  FUZZ_CHECK(last.find('\n') == std::string::npos);
  sandbox::TransferSummary summary;
  auto read = sandbox::readSummary(last, summary);
  if (!read) FUZZ_CHECK(!read.error().message().empty());
  return 0;
}
