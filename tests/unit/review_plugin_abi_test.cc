// The review part of plugin ABI 1.2: layout every compiled review plugin relies on (x86_64) and
// values that are never renumbered. (tests/unit/abi_version_test.cc pins the header's hash.)
#include <airlock/plugin_abi_v1.h>
#include <gtest/gtest.h>

#include <cstddef>

namespace {

#if defined(__x86_64__)
static_assert(sizeof(airlock_review_subject_v1) == 112);
static_assert(offsetof(airlock_review_subject_v1, details_json) == 96);
static_assert(offsetof(airlock_review_subject_v1, kind) == 4);
static_assert(offsetof(airlock_review_subject_v1, language) == 8);
static_assert(offsetof(airlock_review_subject_v1, text) == 24);
static_assert(offsetof(airlock_review_subject_v1, argv) == 40);
static_assert(offsetof(airlock_review_subject_v1, profile) == 48);
static_assert(offsetof(airlock_review_subject_v1, tenant) == 64);
static_assert(offsetof(airlock_review_subject_v1, sandbox_id) == 80);
static_assert(sizeof(airlock_review_verdict_v1) == 648);
static_assert(offsetof(airlock_review_verdict_v1, decision) == 4);
static_assert(offsetof(airlock_review_verdict_v1, rule) == 8);
static_assert(offsetof(airlock_review_verdict_v1, reason) == 136);
static_assert(sizeof(airlock_review_ops_v1) == 16);
static_assert(offsetof(airlock_review_ops_v1, review) == 8);
#endif
static_assert(AIRLOCK_REVIEW_CODE == 1 && AIRLOCK_REVIEW_COMMAND == 2 &&
              AIRLOCK_REVIEW_TRANSFER == 3);
static_assert(AIRLOCK_REVIEW_ALLOW == 0 && AIRLOCK_REVIEW_DENY == 1 && AIRLOCK_REVIEW_HOLD == 2);

TEST(ReviewPluginAbi, ReviewOpsArriveInMinorVersionTwo) {
  EXPECT_EQ(AIRLOCK_PLUGIN_ABI_MAJOR, 1);
  EXPECT_GE(AIRLOCK_PLUGIN_ABI_MINOR, 2);
}

}  // namespace
