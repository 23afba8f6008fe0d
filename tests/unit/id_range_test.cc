#include "supervisor/sandbox/host/id_range.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "supervisor/sandbox/host/sandbox.h"
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

// The isolation plugin's config (sandbox/host/sandbox.h), also a unit of sandbox/host: the
// microvm backend gets its table with the zeros resolved from the profile's limits.
TEST(IsolationConfig, MicrovmGetsItsTableWithTheLimitsResolved) {
  policy::Profile p;
  p.isolation = "microvm";
  p.limits.cpu_percent = 150;
  p.limits.memory_mb = 2048;
  p.microvm.kernel = "/srv/vm/vmlinuz";
  p.limits.file_size_mb = 64;
  EXPECT_EQ(nlohmann::json::parse(isolationConfigJson(p)),
            (nlohmann::json{{"qemu", "/usr/bin/qemu-system-x86_64"},
                            {"accel", "auto"},
                            {"vcpus", 2},
                            {"memory_mb", 2048},
                            {"kernel", "/srv/vm/vmlinuz"},
                            {"cache_dir", "/var/cache/airlock/microvm"},
                            {"boot_timeout_s", 60},
                            {"snapshots", true},
                            {"file_size_mb", 64}}));
  // Set explicitly, and under the dotted name: the table's values win over the limits.
  p.isolation = "airlock.isolation.microvm";
  p.microvm.vcpus = 4;
  p.microvm.memory_mb = 512;
  p.microvm.accel = "tcg";
  auto j = nlohmann::json::parse(isolationConfigJson(p));
  EXPECT_EQ(j["vcpus"], 4);
  EXPECT_EQ(j["memory_mb"], 512);
  EXPECT_EQ(j["accel"], "tcg");
}

TEST(IsolationConfig, EachBackendGetsOnlyItsOwnTable) {
  policy::Profile p;
  EXPECT_EQ(isolationConfigJson(p), "{}");  // namespaces has no table
  p.isolation = "gvisor";
  auto g = nlohmann::json::parse(isolationConfigJson(p));
  EXPECT_EQ(g["runsc"], "/usr/bin/runsc");
  EXPECT_FALSE(g.contains("qemu"));
  p.isolation = "microvm";
  auto m = nlohmann::json::parse(isolationConfigJson(p));
  EXPECT_FALSE(m.contains("runsc"));
  EXPECT_EQ(m["vcpus"], 1);  // limits.cpu_percent = 100: one CPU
}

}  // namespace
}  // namespace airlock::sandbox
