// The out-of-tree example (sdk/examples/hello-language) builds against the *installed* SDK with
// find_package(airlock), and the result loads and works.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

#include "plugin_test_util.h"
#include "supervisor/plugin/registry.h"

namespace airlock::plugin::test {
namespace {

using ::testing::ElementsAre;

testing::ProcResult run(const std::vector<std::string>& argv, int timeout_s) {
  auto r = testing::runCommand(argv, "", timeout_s);
  std::string joined;
  for (const auto& a : argv) joined += a + " ";
  EXPECT_EQ(r.exit_code, 0) << joined << "\n" << r.out << r.err;
  EXPECT_FALSE(r.timed_out) << joined;
  return r;
}

TEST(SdkExample, BuildsAgainstTheInstalledSdkAndLoads) {
  auto t0 = std::chrono::steady_clock::now();
  testing::TempDir tmp;
  std::string prefix = tmp.file("prefix"), build = tmp.file("build");
  std::string cmake = AIRLOCK_CMAKE_COMMAND;

  // Only the SDK component: headers, the exported airlock::sdk target, the package config.
  if (run({cmake, "--install", testing::buildDir(), "--prefix", prefix, "--component", "sdk"}, 30)
          .exit_code != 0)
    return;
  std::vector<std::string> configure = {
      cmake, "-S", testing::sourceDir() + "/sdk/examples/hello-language", "-B", build, "-G",
      AIRLOCK_CMAKE_GENERATOR, "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_PREFIX_PATH=" + prefix,
      // Nothing but the prefix above may satisfy find_package(airlock).
      "-DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON",
      "-DCMAKE_FIND_PACKAGE_NO_SYSTEM_PACKAGE_REGISTRY=ON",
      "-Dairlock_DIR=" + prefix + "/" + AIRLOCK_INSTALL_LIBDIR + "/cmake/airlock",
      std::string("-DCMAKE_CXX_COMPILER=") + AIRLOCK_CXX_COMPILER};
  if (std::string(AIRLOCK_MAKE_PROGRAM).size() > 0)
    configure.push_back(std::string("-DCMAKE_MAKE_PROGRAM=") + AIRLOCK_MAKE_PROGRAM);
  if (run(configure, 40).exit_code != 0) return;
  if (run({cmake, "--build", build}, 40).exit_code != 0) return;

  Registry registry;
  ASSERT_TRUE(registry.loadFile(build + "/language-awk.so", ownedByMe()));
  auto awk = registry.language("awk");
  ASSERT_TRUE(awk) << awk.error().message();
  EXPECT_EQ((*awk)->fullName(), "example.language.awk");
  EXPECT_THAT((*awk)->extensions, ElementsAre(".awk"));
  EXPECT_EQ(*registry.languageForFile("sum.awk"), *awk);
  EXPECT_EQ(*registry.language("gawk"), *awk);

  auto inl = (*awk)->buildInline("BEGIN { print 6 * 7, ARGV[1] }", {"data.csv"});
  ASSERT_TRUE(inl) << inl.error().message();
  EXPECT_THAT(inl->argv,
              ElementsAre("/usr/bin/awk", "--", "BEGIN { print 6 * 7, ARGV[1] }", "data.csv"));
  EXPECT_TRUE(inl->env.empty());
  auto file = (*awk)->buildFile("/home/user/sum.awk", {"a.csv"});
  ASSERT_TRUE(file) << file.error().message();
  EXPECT_THAT(file->argv, ElementsAre("/usr/bin/awk", "-f", "/home/user/sum.awk", "--", "a.csv"));

  auto ran = testing::runCommand(inl->argv, "", 10);
  EXPECT_EQ(ran.exit_code, 0) << ran.err;
  EXPECT_EQ(ran.out, "42 data.csv\n");

  auto seconds =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_LT(seconds, 60) << "the example build should stay well under a minute";
}

}  // namespace
}  // namespace airlock::plugin::test
