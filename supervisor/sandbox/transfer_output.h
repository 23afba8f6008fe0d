// What the supervisor reads from the transfer helper's output (agent/transfer_helper.h): its
// "C BYTES" credit lines, its "L TYPE SIZE NAME" listing ended by "L-END TOTAL TRUNCATED", and
// its JSON summary line. The helper runs inside the sandbox, so all of it is hostile text; it
// lives apart from transfer.cc (which needs an agent connection) so fuzz/transfer_output_fuzz.cc
// can feed it anything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "airlock/result.h"
#include "supervisor/sandbox/transfer.h"

namespace airlock::sandbox {

// Reads the credit lines of `out` that end after `scanned` and moves `scanned` past them; returns
// the largest credit seen, `credited` included.
uint64_t readCreditLines(const std::string& out, size_t& scanned, uint64_t credited);

// The listing in the helper's stdout once its "L-END" line arrived; nullopt before.
std::optional<ArchiveListing> completeListing(const std::string& out);

// The helper's last line (its summary or its error), as the error of a failed transfer.
std::string lastLine(std::string text);

// Fills the counts of `s` from the helper's summary line.
Result<> readSummary(const std::string& line, TransferSummary& s);

}  // namespace airlock::sandbox
