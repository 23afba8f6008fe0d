// The shell reader under the `shell` reviewer (supervisor/review/shell_scan.cc): a hand-written
// scanner of POSIX shell that tenants' commands and shell code go through before they may run.
//
// Invariants checked: a refusal names its rule and says why; and after any script the scanner
// judged, a new line running `eval` is refused: nothing a judged script leaves open (a quote, a
// continuation, a comment) may hide a later command from the reviewer.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "supervisor/review/shell_scan.h"
#include "support/fuzz_check.h"

namespace review = airlock::review;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view script(reinterpret_cast<const char*>(data), size);
  const review::ShellScan scan = review::scanShell(script);
  if (scan.refused()) {
    FUZZ_CHECK(!scan.refused_reason.empty());
    return 0;
  }
  const std::string followed = std::string(script) + "\n;eval x";
  FUZZ_CHECK(review::scanShell(followed).refused());
  return 0;
}
