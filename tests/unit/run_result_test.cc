#include "supervisor/sandbox/run_result.h"
#include "supervisor/sandbox/one_shot.h"

#include <gtest/gtest.h>

namespace airlock::sandbox {
namespace {

TEST(RunResult, ExitCodeMirrorsTheProgram) {
  RunResult r;
  r.status = Status::kExited;
  r.exit_code = 3;
  EXPECT_EQ(r.processExitCode(), 3);
  r.status = Status::kSignaled;
  r.signal = 9;
  EXPECT_EQ(r.processExitCode(), 137);
}

TEST(RunResult, EachFailureHasItsOwnDocumentedCode) {
  RunResult r;
  r.status = Status::kTimeout;
  EXPECT_EQ(r.processExitCode(), 124);
  r.status = Status::kMemoryLimit;
  EXPECT_EQ(r.processExitCode(), 122);
  r.status = Status::kRefused;
  EXPECT_EQ(r.processExitCode(), 123);
  r.status = Status::kError;
  EXPECT_EQ(r.processExitCode(), 125);
}

TEST(RunResult, JsonRecordCarriesStatusOutputAndTruncation) {
  RunResult r;
  r.status = Status::kExited;
  r.exit_code = 0;
  r.stdout_data = "hello\n";
  r.stdout_bytes = 1000;
  r.stdout_truncated = true;
  r.language = "python";
  auto j = r.toJson();
  EXPECT_EQ(j["schema"], 1);
  EXPECT_EQ(j["status"], "exited");
  EXPECT_EQ(j["exit_code"], 0);
  EXPECT_TRUE(j["signal"].is_null());
  EXPECT_EQ(j["stdout"], "hello\n");
  EXPECT_EQ(j["stdout_bytes"], 1000);
  EXPECT_EQ(j["stdout_truncated"], true);
  EXPECT_EQ(j["language"], "python");
  EXPECT_EQ(j["airlock_exit_code"], 0);
}

TEST(RunResult, TimeoutRecordHasNoExitCode) {
  RunResult r;
  r.status = Status::kTimeout;
  r.message = "too slow";
  auto j = r.toJson();
  EXPECT_TRUE(j["exit_code"].is_null());
  EXPECT_EQ(j["airlock_exit_code"], 124);
  EXPECT_EQ(j["message"], "too slow");
}

TEST(Utf8, ValidTextIsKept) {
  EXPECT_EQ(toValidUtf8("plain"), "plain");
  EXPECT_EQ(toValidUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
            "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
}

TEST(Utf8, InvalidBytesBecomeReplacementCharacters) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(toValidUtf8("a\xFF"
                        "b"),
            "a" + fffd + "b");
  EXPECT_EQ(toValidUtf8("\xC3"), fffd);                                   // truncated sequence
  EXPECT_EQ(toValidUtf8("\xC0\xAF"), fffd + fffd);                        // overlong '/'
  EXPECT_EQ(toValidUtf8("\xED\xA0\x80"), fffd + fffd + fffd);             // UTF-16 surrogate
  EXPECT_EQ(toValidUtf8("\xF4\x90\x80\x80"), fffd + fffd + fffd + fffd);  // > U+10FFFF
}

TEST(Utf8, RecordWithBinaryOutputSerializes) {
  RunResult r;
  r.stdout_data = std::string("\x00\xFF\xFE ok", 5);
  EXPECT_NO_THROW((void)r.toJson().dump());
}

}  // namespace
}  // namespace airlock::sandbox
