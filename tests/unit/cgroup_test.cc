// The cgroup layer against mountinfo fixtures and a fake cgroupfs tree: the drivers write plain
// files there, and the tests assert the exact values.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "supervisor/sys/cgroup.h"
#include "test_support.h"

namespace airlock::sys {
namespace {

namespace fs = std::filesystem;
using airlock::testing::readFile;
using airlock::testing::TempDir;

constexpr const char* kHybridMountinfo =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices\n"
    "37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer\n"
    "38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio\n"
    "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
    "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

// systemd-style v1: cpu and cpuacct co-mounted, optional fields before the separator.
constexpr const char* kV1Mountinfo =
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
    "25 22 0:21 / /sys/fs/cgroup rw shared:9 - tmpfs tmpfs ro,mode=755\n"
    "26 25 0:22 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:10 - cgroup cgroup "
    "rw,cpu,cpuacct\n"
    "27 25 0:23 / /sys/fs/cgroup/memory rw,nosuid shared:11 - cgroup cgroup rw,memory\n"
    "28 25 0:24 / /sys/fs/cgroup/pids rw,nosuid shared:12 - cgroup cgroup rw,pids\n"
    "29 25 0:25 / /sys/fs/cgroup/freezer rw,nosuid shared:13 - cgroup cgroup rw,freezer\n";

constexpr const char* kV2Mountinfo =
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
    "30 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n"
    "31 22 0:27 / /my\\040mounts/cg2 rw shared:5 - cgroup2 cgroup2 rw\n";

TEST(CgroupMountinfo, Hybrid) {
  auto host = CgroupHost::parseMountinfo(kHybridMountinfo);
  ASSERT_TRUE(host) << host.error().message();
  EXPECT_EQ(host->layout, CgroupLayout::kHybrid);
  EXPECT_EQ(host->v2_mount, "/sys/fs/cgroup/unified");
  EXPECT_EQ(host->v1_mounts.at("memory"), "/sys/fs/cgroup/memory");
  EXPECT_EQ(host->v1_mounts.at("pids"), "/sys/fs/cgroup/pids");
  EXPECT_EQ(host->v1_mounts.at("cpu"), "/sys/fs/cgroup/cpu");
  EXPECT_EQ(host->v1_mounts.at("cpuacct"), "/sys/fs/cgroup/cpuacct");
  EXPECT_EQ(host->v1_mounts.count("name=systemd"), 0u);
  EXPECT_EQ(host->v1_mounts.count("systemd"), 0u);
}

TEST(CgroupMountinfo, V1CoMounted) {
  auto host = CgroupHost::parseMountinfo(kV1Mountinfo);
  ASSERT_TRUE(host) << host.error().message();
  EXPECT_EQ(host->layout, CgroupLayout::kV1);
  EXPECT_EQ(host->v2_mount, "");
  EXPECT_EQ(host->v1_mounts.at("cpu"), "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_EQ(host->v1_mounts.at("cpuacct"), "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_EQ(host->v1_mounts.at("freezer"), "/sys/fs/cgroup/freezer");
  EXPECT_FALSE(host->v2_has("memory"));
  EXPECT_EQ(host->limitPlacement().at("memory"), "v1 /sys/fs/cgroup/memory");
}

TEST(CgroupMountinfo, V2FirstMountWinsAndEscapesDecode) {
  auto host = CgroupHost::parseMountinfo(kV2Mountinfo);
  ASSERT_TRUE(host) << host.error().message();
  EXPECT_EQ(host->layout, CgroupLayout::kV2);
  EXPECT_EQ(host->v2_mount, "/sys/fs/cgroup");
  EXPECT_TRUE(host->v1_mounts.empty());

  auto spaced = CgroupHost::parseMountinfo(
      "31 22 0:27 / /my\\040mounts/cg2 rw shared:5 - cgroup2 cgroup2 rw\n");
  ASSERT_TRUE(spaced);
  EXPECT_EQ(spaced->v2_mount, "/my mounts/cg2");
}

TEST(CgroupMountinfo, NoneAndMalformed) {
  auto none = CgroupHost::parseMountinfo("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->layout, CgroupLayout::kNone);
  auto bad = CgroupHost::parseMountinfo("garbage line\n");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message().find("line 1"), std::string::npos) << bad.error().message();
}

TEST(CgroupMountinfo, ThisMachineParses) {
  auto host = CgroupHost::detect();
  ASSERT_TRUE(host) << host.error().message();
  EXPECT_NE(host->layout, CgroupLayout::kNone);
  EXPECT_FALSE(host->describe().empty());
}

// A fake cgroupfs: each hierarchy is a directory under a TempDir; mkdir populates control files
// the way the kernel would, rmdir removes them first.
class FakeCgroupTree {
 public:
  struct Options {
    bool v2 = true;
    std::set<std::string> v2_controllers;  // e.g. memory pids cpu
    bool v1 = true;
    bool memsw = true;
    bool cpu_cpuacct_comounted = false;
  };

  explicit FakeCgroupTree(Options o) : o_(std::move(o)) {
    std::string mi;
    int id = 30;
    auto line = [&](const std::string& mp, const std::string& type, const std::string& super) {
      ++id;
      mi += std::to_string(id) + " 1 0:" + std::to_string(id) + " / " + mp + " rw,relatime - " +
            type + " " + type + " " + super + "\n";
    };
    if (o_.v2) {
      line("/sys/fs/cgroup/unified", "cgroup2", "rw");
      fs::create_directories(root() + "/sys/fs/cgroup/unified");
      std::string ctl;
      for (const auto& c : o_.v2_controllers) ctl += (ctl.empty() ? "" : " ") + c;
      writeFile(root() + "/sys/fs/cgroup/unified/cgroup.controllers", ctl + "\n");
      writeFile(root() + "/sys/fs/cgroup/unified/cgroup.subtree_control", "");
    }
    if (o_.v1) {
      std::vector<std::pair<std::string, std::string>> v1 = {
          {"memory", "memory"}, {"pids", "pids"}, {"freezer", "freezer"}};
      if (o_.cpu_cpuacct_comounted) {
        v1.push_back({"cpu,cpuacct", "cpu,cpuacct"});
      } else {
        v1.push_back({"cpu", "cpu"});
        v1.push_back({"cpuacct", "cpuacct"});
      }
      for (const auto& [dir, ctrls] : v1) {
        line("/sys/fs/cgroup/" + dir, "cgroup", "rw," + ctrls);
        fs::create_directories(root() + "/sys/fs/cgroup/" + dir);
      }
    }
    tmp_.write("mountinfo", mi);
    fake_ = std::make_shared<CgroupFakeKernel>();
    fake_->after_mkdir = [this](const std::string& dir) { populate(dir); };
    fake_->rmdir = [](const std::string& dir) {
      if (!fs::exists(dir)) {
        errno = ENOENT;
        return -1;
      }
      for (const auto& e : fs::directory_iterator(dir)) {
        if (e.is_regular_file()) fs::remove(e.path());
      }
      return ::rmdir(dir.c_str());
    };
  }

  CgroupHost host() {
    auto h = CgroupHost::detect(tmp_.file("mountinfo"), root());
    EXPECT_TRUE(h) << h.error().message();
    h->fake_kernel = fake_;
    return *h;
  }

  std::string root() const { return tmp_.path() + "/root"; }
  std::string cg(const std::string& hierarchy) const {
    return root() + "/sys/fs/cgroup/" + hierarchy;
  }

  static void writeFile(const std::string& path, const std::string& content) {
    std::ofstream(path) << content;
  }

 private:
  void populate(const std::string& dir) {
    auto in = [&](const std::string& h) { return dir.starts_with(cg(h) + "/"); };
    writeFile(dir + "/cgroup.procs", "");
    if (in("unified")) {
      writeFile(dir + "/cgroup.events", "populated 0\nfrozen 0\n");
      writeFile(dir + "/cgroup.kill", "");
      writeFile(dir + "/cgroup.subtree_control", "");
      writeFile(dir + "/cpu.stat", "usage_usec 0\nuser_usec 0\nsystem_usec 0\n");
      std::string ctl;
      for (const auto& c : o_.v2_controllers) ctl += (ctl.empty() ? "" : " ") + c;
      writeFile(dir + "/cgroup.controllers", ctl + "\n");
      if (o_.v2_controllers.count("memory")) {
        for (auto f : {"memory.max", "memory.swap.max", "memory.peak"})
          writeFile(dir + "/" + f, "");
        writeFile(dir + "/memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n");
      }
      if (o_.v2_controllers.count("pids")) {
        writeFile(dir + "/pids.max", "max\n");
        writeFile(dir + "/pids.current", "0\n");
      }
      if (o_.v2_controllers.count("cpu")) writeFile(dir + "/cpu.max", "max 100000\n");
      return;
    }
    if (in("memory")) {
      writeFile(dir + "/memory.limit_in_bytes", "9223372036854771712\n");
      if (o_.memsw) writeFile(dir + "/memory.memsw.limit_in_bytes", "9223372036854771712\n");
      writeFile(dir + "/memory.max_usage_in_bytes", "0\n");
      writeFile(dir + "/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n");
    }
    if (in("pids")) {
      writeFile(dir + "/pids.max", "max\n");
      writeFile(dir + "/pids.current", "0\n");
    }
    if (in("cpu") || in("cpu,cpuacct")) {
      writeFile(dir + "/cpu.cfs_period_us", "100000\n");
      writeFile(dir + "/cpu.cfs_quota_us", "-1\n");
    }
    if (in("cpuacct") || in("cpu,cpuacct")) writeFile(dir + "/cpuacct.usage", "0\n");
    if (in("freezer")) writeFile(dir + "/freezer.state", "THAWED\n");
  }

  Options o_;
  TempDir tmp_;
  std::shared_ptr<CgroupFakeKernel> fake_;
};

std::string trimmed(const std::string& path) {
  std::string s = readFile(path);
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

TEST(CgroupFake, HybridLimitsGoToV1AndDirectoryToV2) {
  FakeCgroupTree tree({.v2 = true, .v2_controllers = {"hugetlb"}});
  auto host = tree.host();
  EXPECT_EQ(host.layout, CgroupLayout::kHybrid);
  EXPECT_TRUE(host.v2_has("hugetlb"));
  EXPECT_FALSE(host.v2_has("memory"));

  auto cg = SandboxCgroup::create(host, "sb1", {256ull << 20, 64, 20});
  ASSERT_TRUE(cg) << cg.error().message();
  std::string mem = tree.cg("memory/airlock/sb1");
  EXPECT_EQ(trimmed(mem + "/memory.limit_in_bytes"), "268435456");
  EXPECT_EQ(trimmed(mem + "/memory.memsw.limit_in_bytes"), "268435456");
  EXPECT_EQ(trimmed(tree.cg("pids/airlock/sb1/pids.max")), "64");
  EXPECT_EQ(trimmed(tree.cg("cpu/airlock/sb1/cpu.cfs_period_us")), "100000");
  EXPECT_EQ(trimmed(tree.cg("cpu/airlock/sb1/cpu.cfs_quota_us")), "20000");
  EXPECT_TRUE(fs::is_directory(tree.cg("unified/airlock/sb1")));
  // No controller was delegated in v2: the hierarchy lacks them.
  EXPECT_EQ(trimmed(tree.cg("unified/cgroup.subtree_control")), "");
  // With v2 present, neither cpuacct nor freezer directories are needed.
  EXPECT_FALSE(fs::exists(tree.cg("cpuacct/airlock/sb1")));
  EXPECT_FALSE(fs::exists(tree.cg("freezer/airlock/sb1")));
  EXPECT_GE(cg->cloneIntoFd(), 0);
  EXPECT_EQ(cg->paths().size(), 4u);
  EXPECT_EQ(cg->controllerPath("memory"), mem);
  EXPECT_EQ(cg->name(), "sb1");

  ASSERT_TRUE(cg->attachV1(999999999));
  EXPECT_EQ(trimmed(mem + "/cgroup.procs"), "999999999");
  EXPECT_EQ(trimmed(tree.cg("unified/airlock/sb1/cgroup.procs")), "");
  FakeCgroupTree::writeFile(mem + "/cgroup.procs", "");
  FakeCgroupTree::writeFile(tree.cg("pids/airlock/sb1/cgroup.procs"), "");
  FakeCgroupTree::writeFile(tree.cg("cpu/airlock/sb1/cgroup.procs"), "");

  FakeCgroupTree::writeFile(mem + "/memory.max_usage_in_bytes", "1234567\n");
  FakeCgroupTree::writeFile(mem + "/memory.oom_control",
                            "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n");
  FakeCgroupTree::writeFile(tree.cg("pids/airlock/sb1/pids.current"), "7\n");
  FakeCgroupTree::writeFile(tree.cg("unified/airlock/sb1/cpu.stat"),
                            "usage_usec 42\nuser_usec 40\nsystem_usec 2\n");
  auto st = cg->stats();
  ASSERT_TRUE(st) << st.error().message();
  EXPECT_EQ(st->memory_peak_bytes, 1234567u);
  EXPECT_EQ(st->oom_kills, 3u);
  EXPECT_EQ(st->pids_peak_or_current, 7u);
  EXPECT_EQ(st->cpu_usage_ns, 42000u);

  ASSERT_TRUE(cg->killAll());
  EXPECT_EQ(trimmed(tree.cg("unified/airlock/sb1/cgroup.kill")), "1");

  auto paths = cg->paths();
  ASSERT_TRUE(cg->destroy(std::chrono::seconds(1)));
  for (const auto& p : paths) EXPECT_FALSE(fs::exists(p)) << p;
  EXPECT_TRUE(cg->destroy(std::chrono::seconds(1))) << "destroy is idempotent";
}

TEST(CgroupFake, DeferredV1DirectoriesAreMadeWithTheirLimitsByAttach) {
  FakeCgroupTree tree({.v2 = true, .v2_controllers = {"hugetlb"}});
  auto host = tree.host();
  auto cg = SandboxCgroup::create(host, "later", {256ull << 20, 64, 20},
                                  SandboxCgroup::V1Dirs::kOnAttach);
  ASSERT_TRUE(cg) << cg.error().message();
  // Only the v2 directory, which clone3(CLONE_INTO_CGROUP) needs, exists before the clone.
  EXPECT_TRUE(fs::is_directory(tree.cg("unified/airlock/later")));
  EXPECT_GE(cg->cloneIntoFd(), 0);
  for (const char* c : {"memory", "pids", "cpu"})
    EXPECT_FALSE(fs::exists(tree.cg(std::string(c) + "/airlock/later"))) << c;
  EXPECT_EQ(cg->paths().size(), 1u);

  ASSERT_TRUE(cg->attachV1(4242)) << "attach makes the v1 directories, then moves the pid";
  std::string mem = tree.cg("memory/airlock/later");
  EXPECT_EQ(trimmed(mem + "/memory.limit_in_bytes"), "268435456");
  EXPECT_EQ(trimmed(tree.cg("pids/airlock/later/pids.max")), "64");
  EXPECT_EQ(trimmed(tree.cg("cpu/airlock/later/cpu.cfs_quota_us")), "20000");
  EXPECT_EQ(trimmed(mem + "/cgroup.procs"), "4242");
  EXPECT_EQ(cg->paths().size(), 4u);
  for (const char* c : {"memory", "pids", "cpu"})
    FakeCgroupTree::writeFile(tree.cg(std::string(c) + "/airlock/later/cgroup.procs"), "");
  auto paths = cg->paths();
  ASSERT_TRUE(cg->destroy(std::chrono::seconds(1)));
  for (const auto& p : paths) EXPECT_FALSE(fs::exists(p)) << p;
}

TEST(CgroupFake, DeferredV1FailureNamesTheCgroupAndLeavesNothing) {
  FakeCgroupTree tree({.v2 = true, .v2_controllers = {}});
  auto host = tree.host();
  host.v1_mounts.erase("pids");  // a pids limit, and no hierarchy that offers it
  auto cg = SandboxCgroup::create(host, "nopids", {0, 16, 0}, SandboxCgroup::V1Dirs::kOnAttach);
  ASSERT_TRUE(cg) << "nothing is checked before attach: " << cg.error().message();
  auto r = cg->attachV1(4242);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(),
            "create cgroup 'nopids': no cgroup hierarchy offers controller 'pids' 'nopids'");
  ASSERT_TRUE(cg->destroy(std::chrono::seconds(1)));
  EXPECT_FALSE(fs::exists(tree.cg("unified/airlock/nopids")));
}

TEST(CgroupFake, V2OwnsEveryLimitWhenItHasTheControllers) {
  FakeCgroupTree tree({.v2 = true, .v2_controllers = {"cpu", "memory", "pids"}, .v1 = false});
  auto host = tree.host();
  EXPECT_EQ(host.layout, CgroupLayout::kV2);
  auto cg = SandboxCgroup::create(host, "sb2", {100ull << 20, 32, 20});
  ASSERT_TRUE(cg) << cg.error().message();
  std::string dir = tree.cg("unified/airlock/sb2");
  EXPECT_EQ(trimmed(dir + "/memory.max"), "104857600");
  EXPECT_EQ(trimmed(dir + "/memory.swap.max"), "0");
  EXPECT_EQ(trimmed(dir + "/pids.max"), "32");
  EXPECT_EQ(trimmed(dir + "/cpu.max"), "20000 100000");
  EXPECT_EQ(trimmed(tree.cg("unified/cgroup.subtree_control")), "+cpu +memory +pids");
  EXPECT_EQ(trimmed(tree.cg("unified/airlock/cgroup.subtree_control")), "+cpu +memory +pids");
  EXPECT_EQ(cg->paths(), std::vector<std::string>{dir});

  FakeCgroupTree::writeFile(dir + "/memory.peak", "999\n");
  FakeCgroupTree::writeFile(dir + "/memory.events", "low 0\noom 2\noom_kill 1\n");
  auto st = cg->stats();
  ASSERT_TRUE(st);
  EXPECT_EQ(st->memory_peak_bytes, 999u);
  EXPECT_EQ(st->oom_kills, 1u);

  // A child cgroup the agent made for one execution goes too, children first.
  ASSERT_EQ(::mkdir((dir + "/exec-1").c_str(), 0755), 0);
  FakeCgroupTree::writeFile(dir + "/exec-1/cgroup.procs", "");
  ASSERT_TRUE(cg->destroy(std::chrono::seconds(1)));
  EXPECT_FALSE(fs::exists(dir));
}

TEST(CgroupFake, CpuAbove100PercentAndPartialLimits) {
  FakeCgroupTree tree({.v2 = true, .v2_controllers = {"cpu"}, .v1 = true});
  auto host = tree.host();
  auto cg = SandboxCgroup::create(host, "sb3", {0, 0, 150});
  ASSERT_TRUE(cg) << cg.error().message();
  EXPECT_EQ(trimmed(tree.cg("unified/airlock/sb3/cpu.max")), "150000 100000");
  EXPECT_FALSE(fs::exists(tree.cg("memory/airlock/sb3")));
  EXPECT_FALSE(fs::exists(tree.cg("cpu/airlock/sb3")));
}

TEST(CgroupFake, V1OnlyWithoutSwapAccountingAndCoMountedCpu) {
  FakeCgroupTree tree({.v2 = false, .memsw = false, .cpu_cpuacct_comounted = true});
  auto host = tree.host();
  EXPECT_EQ(host.layout, CgroupLayout::kV1);
  auto cg = SandboxCgroup::create(host, "sb4", {64ull << 20, 16, 50});
  ASSERT_TRUE(cg) << cg.error().message();
  EXPECT_EQ(cg->cloneIntoFd(), -1);
  EXPECT_EQ(trimmed(tree.cg("memory/airlock/sb4/memory.limit_in_bytes")), "67108864");
  EXPECT_FALSE(fs::exists(tree.cg("memory/airlock/sb4/memory.memsw.limit_in_bytes")));
  std::string cpu = tree.cg("cpu,cpuacct/airlock/sb4");
  EXPECT_EQ(trimmed(cpu + "/cpu.cfs_quota_us"), "50000");
  // Without v2: cpu accounting from cpuacct (co-mounted here) and a freezer directory for kill.
  EXPECT_TRUE(fs::is_directory(tree.cg("freezer/airlock/sb4")));
  EXPECT_EQ(cg->controllerPath("cpuacct"), cpu);
  FakeCgroupTree::writeFile(cpu + "/cpuacct.usage", "5555\n");
  auto st = cg->stats();
  ASSERT_TRUE(st);
  EXPECT_EQ(st->cpu_usage_ns, 5555u);

  ASSERT_TRUE(cg->attachAll(999999998));
  for (const auto& p : cg->paths()) {
    EXPECT_EQ(trimmed(p + "/cgroup.procs"), "999999998") << p;
    FakeCgroupTree::writeFile(p + "/cgroup.procs", "");
  }
  ASSERT_TRUE(cg->killAll());
  EXPECT_EQ(trimmed(tree.cg("freezer/airlock/sb4/freezer.state")), "THAWED");
  EXPECT_EQ(cg->paths().size(), 4u);  // memory, pids, cpu+cpuacct, freezer
}

TEST(CgroupFake, MissingControllerFailsAndLeavesNothing) {
  FakeCgroupTree tree({.v2 = true, .v2_controllers = {}, .v1 = false});
  auto host = tree.host();
  auto cg = SandboxCgroup::create(host, "sb5", {1 << 20, 0, 0});
  ASSERT_FALSE(cg);
  EXPECT_NE(cg.error().message().find("'memory'"), std::string::npos) << cg.error().message();
  EXPECT_FALSE(fs::exists(tree.cg("unified/airlock/sb5")));
}

TEST(CgroupFake, ExistingNameAndBadNamesAreRefused) {
  FakeCgroupTree tree({.v2 = true, .v2_controllers = {}, .v1 = false});
  auto host = tree.host();
  auto first = SandboxCgroup::create(host, "dup", {});
  ASSERT_TRUE(first);
  auto second = SandboxCgroup::create(host, "dup", {});
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().errnum(), EEXIST);
  EXPECT_TRUE(fs::exists(tree.cg("unified/airlock/dup"))) << "the failed create kept its hands off";
  for (const char* bad : {"", "..", "a/b"}) EXPECT_FALSE(SandboxCgroup::create(host, bad, {}));
}

TEST(CgroupFake, DestructorAndMoveDestroyOnce) {
  FakeCgroupTree tree({.v2 = true, .v2_controllers = {}, .v1 = true});
  auto host = tree.host();
  {
    auto cg = SandboxCgroup::create(host, "moved", {1 << 20, 0, 0});
    ASSERT_TRUE(cg);
    SandboxCgroup other = std::move(*cg);
    EXPECT_TRUE(fs::exists(tree.cg("memory/airlock/moved")));
  }
  EXPECT_FALSE(fs::exists(tree.cg("memory/airlock/moved")));
  EXPECT_FALSE(fs::exists(tree.cg("unified/airlock/moved")));
}

TEST(CgroupFake, ReclaimRemovesLeftoversWithThePrefixOnly) {
  FakeCgroupTree tree({.v2 = true, .v2_controllers = {}, .v1 = true});
  auto host = tree.host();
  // Leftovers from a "crashed" supervisor: directories with control files, no owner.
  for (const char* h : {"unified", "memory", "pids"}) {
    for (const char* n : {"stale-1", "stale-2", "other"}) {
      std::string d = tree.cg(std::string(h) + "/airlock/" + n);
      fs::create_directories(d);
      FakeCgroupTree::writeFile(d + "/cgroup.procs", "");
      if (std::string(h) == "unified")
        FakeCgroupTree::writeFile(d + "/cgroup.events", "populated 0\n");
    }
  }
  auto n = reclaimStaleCgroups(host, std::chrono::seconds(1), "stale-");
  ASSERT_TRUE(n) << n.error().message();
  EXPECT_EQ(*n, 2);
  for (const char* h : {"unified", "memory", "pids"}) {
    EXPECT_FALSE(fs::exists(tree.cg(std::string(h) + "/airlock/stale-1")));
    EXPECT_FALSE(fs::exists(tree.cg(std::string(h) + "/airlock/stale-2")));
    EXPECT_TRUE(fs::exists(tree.cg(std::string(h) + "/airlock/other")));
  }
  auto again = reclaimStaleCgroups(host, std::chrono::seconds(1), "stale-");
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, 0);
}

TEST(CgroupFake, DestroyNamesTheDirectoryThatWouldNotGo) {
  FakeCgroupTree tree({.v2 = true, .v2_controllers = {}, .v1 = true});
  auto host = tree.host();
  auto cg = SandboxCgroup::create(host, "stuck", {1 << 20, 0, 0});
  ASSERT_TRUE(cg);
  // A stray file the fake kernel does not know makes rmdir fail (ENOTEMPTY), like a busy cgroup.
  std::string mem = tree.cg("memory/airlock/stuck");
  ASSERT_EQ(::mkdir((mem + "/junk").c_str(), 0755), 0);
  ASSERT_EQ(::mkfifo((mem + "/junk/keep").c_str(), 0600), 0);
  auto r = cg->destroy(std::chrono::milliseconds(50));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find(mem + "/junk"), std::string::npos) << r.error().message();
  fs::remove(mem + "/junk/keep");
  EXPECT_TRUE(cg->destroy(std::chrono::milliseconds(50)));
  EXPECT_FALSE(fs::exists(mem));
}

}  // namespace
}  // namespace airlock::sys
