#include "supervisor/sandbox/environment.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

namespace airlock::sandbox {
namespace {

bool has(const std::vector<std::string>& env, const std::string& kv) {
  return std::find(env.begin(), env.end(), kv) != env.end();
}

TEST(Environment, BaseVariablesArePresent) {
  auto env = executionEnvironment({}, {}, {});
  EXPECT_TRUE(has(env, "HOME=/home/user"));
  EXPECT_TRUE(has(env, "PATH=/usr/local/bin:/usr/bin:/bin"));
  EXPECT_TRUE(has(env, "LANG=C.UTF-8"));
}

TEST(Environment, HostEnvironmentNeverLeaks) {
  setenv("AIRLOCK_TEST_SECRET", "s3cret", 1);
  auto env = executionEnvironment({}, {}, {});
  for (const auto& kv : env) EXPECT_EQ(kv.find("s3cret"), std::string::npos) << kv;
  unsetenv("AIRLOCK_TEST_SECRET");
}

TEST(Environment, LaterLayersOverrideEarlierOnes) {
  auto env = executionEnvironment({"MPLBACKEND=Agg", "HOME=/lang"},
                                  {{"HOME", "/profile"}, {"A", "1"}}, {{"A", "2"}});
  EXPECT_TRUE(has(env, "MPLBACKEND=Agg"));
  EXPECT_TRUE(has(env, "HOME=/profile"));
  EXPECT_TRUE(has(env, "A=2"));
  EXPECT_FALSE(has(env, "A=1"));
  EXPECT_TRUE(std::is_sorted(env.begin(), env.end()));
}

}  // namespace
}  // namespace airlock::sandbox
