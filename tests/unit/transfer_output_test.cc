// The transfer helper's output as the supervisor reads it (supervisor/sandbox/transfer_output.h):
// credit lines, the listing and the summary. All of it comes from inside the sandbox; the cases
// below are those fuzz/transfer_output_fuzz.cc found, and the plain forms the helper writes.
#include "supervisor/sandbox/transfer_output.h"

#include <gtest/gtest.h>

#include <string>

namespace airlock::sandbox {
namespace {

// The credit `out` gives when it arrives `piece` bytes at a time, as unpackInto reads it.
uint64_t creditInPieces(const std::string& out, size_t piece) {
  std::string seen;
  size_t scanned = 0;
  uint64_t credit = 0;
  for (size_t at = 0; at < out.size(); at += piece) {
    seen.append(out, at, piece);
    credit = readCreditLines(seen, scanned, credit);
  }
  return credit;
}

TEST(TransferOutput, CreditLinesGiveTheLargestCredit) {
  size_t scanned = 0;
  EXPECT_EQ(readCreditLines("C 524288\nC 1048576\nC 9", scanned, 0), 1048576u);
  EXPECT_EQ(scanned, 19u);  // the unfinished last line waits for its newline
  EXPECT_EQ(creditInPieces("C 524288\nL file 1 a\nC 1048576\n", 3), 1048576u);
}

// A credit line's number was read by strtoull, which skipped the newline of "C \n" and took the
// next line's digits: the credit then depended on how the output was split into reads.
TEST(TransferOutput, ACreditIsTheLinesOwnDigitsWhateverTheReads) {
  const std::string out = "45\nAL 524288\nC \n10 85\n471\x1c\x31\x35\x37\nL-END 100000 1\n";
  for (size_t piece : {1, 2, 5, 7, 64}) EXPECT_EQ(creditInPieces(out, piece), 0u) << piece;
  size_t scanned = 0;
  EXPECT_EQ(readCreditLines("C -1\nC 12x\nC  3\nC 0x10\n", scanned, 7), 7u);
}

// {"files": "x"} made json::value() throw type_error on the transfer's thread, which ended the
// supervisor; a bad count is now the transfer's error.
TEST(TransferOutput, ASummaryWithABadCountIsAnErrorNotAThrow) {
  TransferSummary s;
  ASSERT_TRUE(readSummary(R"({"files":3,"dirs":1,"links":0,"bytes":1234})", s));
  EXPECT_EQ(s.files, 3u);
  EXPECT_EQ(s.dirs, 1u);
  EXPECT_EQ(s.bytes, 1234u);
  for (const char* bad : {R"({"files":"x"})", R"({"dirs":null})", R"({"links":-1})",
                          R"({"bytes":1.5})", R"({"bytes":[1]})"}) {
    TransferSummary t;
    Result<> r;
    ASSERT_NO_THROW(r = readSummary(bad, t)) << bad;
    ASSERT_FALSE(r) << bad;
    EXPECT_TRUE(r.error().message().starts_with("the transfer helper's summary has a bad '"))
        << r.error().message();
  }
  EXPECT_FALSE(readSummary("not json", s));
  EXPECT_EQ(lastLine("L-END 0 0\n{\"files\":0}\n\n"), "{\"files\":0}");
  EXPECT_EQ(lastLine("x\nairlock transfer: too many files\n"), "too many files");
}

TEST(TransferOutput, TheListingIsCompleteOnceItsEndLineIs) {
  EXPECT_FALSE(completeListing("L file 12 a.csv\nL-END 1 0"));
  auto listing =
      completeListing("C 5\nL file 12 a.csv\nL dir 0 d\nL symlink 0 l -> a\nL-END 3 1\n");
  ASSERT_TRUE(listing);
  ASSERT_EQ(listing->entries.size(), 3u);
  EXPECT_EQ(listing->entries[0].type, "file");
  EXPECT_EQ(listing->entries[0].size, 12u);
  EXPECT_EQ(listing->entries[2].name, "l -> a");
  EXPECT_EQ(listing->total, 3u);
  EXPECT_TRUE(listing->truncated);
}

}  // namespace
}  // namespace airlock::sandbox
