#include "supervisor/sandbox/host/id_range.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <set>
#include <vector>

#include "test_support.h"

namespace airlock::sandbox {
namespace {

TEST(IdRangeLease, ConcurrentLeasesNeverShareARange) {
  testing::TempDir dir;
  std::vector<IdRangeLease> leases;
  std::set<uint32_t> bases;
  for (int i = 0; i < 64; ++i) {
    auto l = IdRangeLease::acquire(dir.path());
    ASSERT_TRUE(l.has_value()) << l.error().message();
    EXPECT_GE(l->hostBase(), kIdRangeBase);
    EXPECT_EQ((l->hostBase() - kIdRangeBase) % kIdRangeSize, 0u);
    bases.insert(l->hostBase());
    leases.push_back(std::move(*l));
  }
  EXPECT_EQ(bases.size(), 64u);
}

TEST(IdRangeLease, ReleasedSlotCanBeLeasedAgain) {
  // Holding every slot takes one fd per slot.
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_max < kIdRangeSlots + 64) GTEST_SKIP() << "RLIMIT_NOFILE hard limit too low";
  rl.rlim_cur = rl.rlim_max;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
  testing::TempDir dir;
  uint32_t slot;
  {
    auto l = IdRangeLease::acquire(dir.path());
    ASSERT_TRUE(l.has_value());
    slot = l->slot();
  }
  // Hold every other slot so only the released one is free.
  std::vector<IdRangeLease> others;
  for (uint32_t i = 0; i < kIdRangeSlots - 1; ++i) {
    auto l = IdRangeLease::acquire(dir.path());
    ASSERT_TRUE(l.has_value()) << l.error().message();
    others.push_back(std::move(*l));
  }
  auto last = IdRangeLease::acquire(dir.path());
  ASSERT_TRUE(last.has_value());
  std::set<uint32_t> held;
  for (auto& o : others) held.insert(o.slot());
  EXPECT_EQ(held.count(last->slot()), 0u);
  (void)slot;
  auto none = IdRangeLease::acquire(dir.path());
  ASSERT_FALSE(none.has_value());
  EXPECT_NE(none.error().message().find("no free sandbox uid range"), std::string::npos);
}

}  // namespace
}  // namespace airlock::sandbox
