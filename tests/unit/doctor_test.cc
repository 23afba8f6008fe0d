// formatDoctor's table and the shape of probeHost's answer (no root needed).
#include <sys/utsname.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

#include "supervisor/doctor/doctor.h"
#include "test_support.h"

namespace airlock::doctor {
namespace {

TEST(Doctor, TableIsAligned) {
  std::vector<Check> checks = {
      {"kernel", true, "Linux 6.18", ""},
      {"clone3 user namespace", false, "EPERM", "the namespaces backend needs it"},
      {"KVM", false, "/dev/kvm: ENOENT", "microvm runs under TCG"},
  };
  std::string table = formatDoctor(checks);
  std::istringstream in(table);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 4u) << table;
  EXPECT_TRUE(lines[0].starts_with("FEATURE")) << table;
  size_t status_col = lines[0].find("STATUS");
  size_t detail_col = lines[0].find("DETAIL");
  size_t conseq_col = lines[0].find("CONSEQUENCE");
  for (size_t i = 1; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].find(checks[i - 1].ok ? "ok" : "NO"), status_col) << lines[i];
    EXPECT_EQ(lines[i].find(checks[i - 1].detail), detail_col) << lines[i];
    if (!checks[i - 1].consequence.empty()) {
      EXPECT_EQ(lines[i].find(checks[i - 1].consequence), conseq_col) << lines[i];
    }
  }
}

TEST(Doctor, ProbeHostReportsEveryArea) {
  auto checks = probeHost();
  ASSERT_TRUE(checks) << checks.error().message();
  std::set<std::string> features;
  for (const auto& c : *checks) {
    EXPECT_FALSE(c.feature.empty());
    EXPECT_FALSE(c.detail.empty()) << c.feature;
    features.insert(c.feature);
  }
  for (const char* f : {"kernel",
                        "clone3 user namespace",
                        "clone3 net namespace",
                        "pivot_root",
                        "root templates",
                        "cgroups",
                        "cgroup limit memory",
                        "seccomp filter",
                        "seccomp USER_NOTIF",
                        "landlock",
                        "pidfd_open",
                        "eBPF program load",
                        "BTF",
                        "tracefs",
                        "KVM",
                        "runsc",
                        "qemu-system-x86_64",
                        "user.max_user_namespaces",
                        "dev.tty.legacy_tiocsti",
                        "backend namespaces",
                        "backend gvisor",
                        "backend microvm",
                        "plugin directory"}) {
    EXPECT_EQ(features.count(f), 1u) << f;
  }
  // Seccomp filtering is present on every kernel airlock supports, and on this one.
  for (const auto& c : *checks) {
    // The build tree's plugin directory has every built-in backend.
    if (c.feature.starts_with("backend ") || c.feature == "plugin directory") {
      EXPECT_EQ(c.detail.find("not installed"), std::string::npos) << c.feature << ": " << c.detail;
    }
    if (c.feature == "seccomp filter" || c.feature == "kernel" || c.feature == "pidfd_open") {
      EXPECT_TRUE(c.ok) << c.feature << ": " << c.detail;
    }
  }
}

// A backend is only as real as its plugin: with an empty plugin directory no backend may be
// reported ok, each says `not installed` and where it looked, and the host probes of the
// backends that are not there (runsc, QEMU) are not run at all.
TEST(Doctor, BackendWithoutItsPluginIsNotInstalled) {
  airlock::testing::TempDir empty;
  const char* before = std::getenv("AIRLOCK_PLUGIN_DIR");
  const std::string saved = before != nullptr ? before : "";
  ::setenv("AIRLOCK_PLUGIN_DIR", empty.path().c_str(), 1);
  auto checks = probeHost();
  if (before != nullptr)
    ::setenv("AIRLOCK_PLUGIN_DIR", saved.c_str(), 1);
  else
    ::unsetenv("AIRLOCK_PLUGIN_DIR");
  ASSERT_TRUE(checks) << checks.error().message();
  std::map<std::string, Check> by_feature;
  for (const auto& c : *checks) by_feature[c.feature] = c;
  for (const char* name : {"namespaces", "gvisor", "microvm"}) {
    const std::string feature = std::string("backend ") + name;
    ASSERT_TRUE(by_feature.contains(feature)) << feature;
    const Check& c = by_feature[feature];
    EXPECT_FALSE(c.ok) << feature << ": " << c.detail;
    EXPECT_NE(c.detail.find("not installed"), std::string::npos) << c.detail;
    EXPECT_NE(c.detail.find(empty.path() + "/isolation-" + name + ".so"), std::string::npos)
        << c.detail;
  }
  EXPECT_FALSE(by_feature.contains("runsc"));
  EXPECT_FALSE(by_feature.contains("qemu-system-x86_64"));
  EXPECT_FALSE(by_feature["plugin directory"].ok) << by_feature["plugin directory"].detail;
}

// As root on Linux 6.15 or later the probe must find root templates working: the namespaces
// backend builds its roots with exactly these calls, and a false "NO" would hide a regression.
TEST(Doctor, RootTemplatesWorkAsRootOnLinux615) {
  AIRLOCK_REQUIRE_ROOT();
  utsname u{};
  ASSERT_EQ(::uname(&u), 0);
  int major = 0, minor = 0;
  std::sscanf(u.release, "%d.%d", &major, &minor);
  if (major < 6 || (major == 6 && minor < 15))
    GTEST_SKIP() << "kernel " << u.release << " predates detached mount trees (6.15)";
  if (std::getenv("AIRLOCK_ROOT_TEMPLATES") != nullptr)
    GTEST_SKIP() << "AIRLOCK_ROOT_TEMPLATES is set in this environment";
  auto checks = probeHost();
  ASSERT_TRUE(checks) << checks.error().message();
  bool seen = false;
  for (const auto& c : *checks) {
    if (c.feature != "root templates") continue;
    seen = true;
    EXPECT_TRUE(c.ok) << c.detail;
  }
  EXPECT_TRUE(seen);
}

}  // namespace
}  // namespace airlock::doctor
