// What the command line prints: durations without truncation, and errors that say their errno
// once after crossing a boundary as text.
#include <gtest/gtest.h>

#include <cerrno>

#include "airlock/error_from_text.h"
#include "supervisor/cli/client_support.h"

namespace airlock {
namespace {

TEST(CliText, DurationsKeepEveryUnit) {
  EXPECT_EQ(cli::humanDuration(0), "0s");
  EXPECT_EQ(cli::humanDuration(42'000), "42s");
  EXPECT_EQ(cli::humanDuration(7200'000), "2h");
  EXPECT_EQ(cli::humanDuration(5400'000), "1h30m");
  EXPECT_EQ(cli::humanDuration(90'061'000), "1d1h1m1s");
  // A keepalive --lifetime 7200 read back a moment later is still "2h", not "1h59m59s".
  EXPECT_EQ(cli::humanDuration(7199'800), "2h");
  EXPECT_EQ(cli::untilText(cli::nowMs() + 5400'000, cli::nowMs()), "in 1h30m");
}

TEST(CliText, ErrnoRebuiltFromTextIsSaidOnce) {
  const std::string agent_said = Error("open", "/home/user/x", ENOENT).message();
  const Error e = errorFromText(agent_said, ENOENT);
  EXPECT_EQ(e.errnum(), ENOENT);
  EXPECT_EQ(e.message(), "open '/home/user/x': ENOENT (No such file or directory)");
  // A message that does not say its errno gets it, once.
  EXPECT_EQ(errorFromText("mount /proc", EPERM).message(),
            "mount /proc: EPERM (Operation not permitted)");
  EXPECT_EQ(errorFromText("no errno here", 0).message(), "no errno here");
}

}  // namespace
}  // namespace airlock
