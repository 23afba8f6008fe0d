// airlock.isolation.namespaces, loaded through Boost.DLL as the supervisor does, starting a
// static probe (namespaces_probe.c) in place of airlock-agent. The probe reports what it sees on
// fd 3; the test checks that view, and the sandbox from the host, and that nothing is left.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gmock/gmock.h>

#include <airlock/plugin_abi_v1.h>
#include <airlock/unique_fd.h>

#include <algorithm>
#include <boost/dll/shared_library.hpp>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.h"

namespace {

using airlock::UniqueFd;
using airlock::testing::TempDir;

constexpr uint32_t kUidBase = 0x10000000 + 0x30000;
constexpr uint32_t kIdCount = 65536;

std::vector<std::string> logLines;

void hostLog(void*, int, const char* message) { logLines.emplace_back(message); }

std::string readAll(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int mountCount() {
  std::string s = readAll("/proc/self/mountinfo");
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

// Our children, from every thread's children list: must be empty between tests.
std::string childrenOfSelf() {
  std::string all;
  for (const auto& t : std::filesystem::directory_iterator("/proc/self/task"))
    all += readAll(t.path().string() + "/children");
  return all;
}

int threadCount() {
  auto it = std::filesystem::directory_iterator("/proc/self/task");
  return static_cast<int>(std::distance(begin(it), end(it)));
}

// CAP_SYS_RESOURCE (bit 24) in our effective set: needed to lower oom_score_adj.
bool hasCapSysResource() {
  std::istringstream in(readAll("/proc/self/status"));
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("CapEff:")) return (std::stoull(line.substr(7), nullptr, 16) >> 24) & 1;
  }
  return false;
}

std::string readLinkOr(const std::string& path) {
  std::error_code ec;
  auto target = std::filesystem::read_symlink(path, ec);
  return ec ? "ERR:" + ec.message() : target.string();
}

// What the probe said, as "key value" lines.
struct Report {
  std::vector<std::string> lines;

  std::string value(const std::string& key) const {
    for (const auto& l : lines)
      if (l.starts_with(key + " ") || l.starts_with(key + "\t")) {
        std::string v = l.substr(key.size() + 1);
        while (!v.empty() && v.back() == ' ') v.pop_back();
        return v;
      }
    return "<missing " + key + ">";
  }
  std::vector<std::string> values(const std::string& key) const {
    std::vector<std::string> out;
    for (const auto& l : lines)
      if (l.starts_with(key + " ")) out.push_back(l.substr(key.size() + 1));
    return out;
  }
  // The mountinfo line whose mount point is exactly path.
  std::string mountAt(const std::string& path) const {
    std::string found = "<no mount at " + path + ">";
    for (const auto& l : values("mnt")) {
      std::istringstream in(l);
      std::string id, parent, dev, root, point;
      in >> id >> parent >> dev >> root >> point;
      if (point == path) found = l;  // the last one is the visible one
    }
    return found;
  }
  std::string all() const {
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    return s;
  }
};

// A spec plus the storage its pointers borrow.
struct SpecBuilder {
  TempDir scratch;
  std::deque<std::string> strings;
  std::vector<airlock_mount_v1> mounts;
  std::vector<std::string> argv_s = {"airlock-agent", "hello"};
  std::vector<const char*> argv;
  std::string hostname = "sbx-test";
  std::string image;
  UniqueFd exe;
  int cgroup_fd = -1;
  int (*attach)(void*, pid_t, airlock_error_v1*) = nullptr;
  void* attach_ctx = nullptr;
  airlock_sandbox_spec_v1 spec{};

  SpecBuilder() {
    exe = UniqueFd(::open(AIRLOCK_NAMESPACES_PROBE, O_PATH | O_CLOEXEC));
    addMount("/usr", "/usr", AIRLOCK_MOUNT_READONLY);
  }
  void addMount(const std::string& source, const std::string& target, uint32_t flags) {
    mounts.push_back(
        {strings.emplace_back(source).c_str(), strings.emplace_back(target).c_str(), flags});
  }
  const airlock_sandbox_spec_v1& build(int channel_fd) {
    argv.clear();
    for (const auto& a : argv_s) argv.push_back(a.c_str());
    argv.push_back(nullptr);
    spec = {};
    spec.struct_size = sizeof spec;
    spec.sandbox_id = "nstest";
    spec.hostname = hostname.c_str();
    spec.host_uid_base = kUidBase;
    spec.host_gid_base = kUidBase;
    spec.id_count = kIdCount;
    spec.user_uid = 1000;
    spec.user_gid = 1000;
    spec.image_dir = image.empty() ? nullptr : image.c_str();
    spec.mounts = mounts.data();
    spec.mounts_len = mounts.size();
    spec.workspace_bytes = 64 << 20;
    spec.tmp_bytes = 32 << 20;
    spec.scratch_dir = scratch.path().c_str();
    spec.cgroup_v2_fd = cgroup_fd;
    spec.attach_cgroups = attach;
    spec.attach_ctx = attach_ctx;
    spec.agent_exe_fd = exe.get();
    spec.agent_channel_fd = channel_fd;
    spec.agent_argv = argv.data();
    spec.network_mode = 0;
    return spec;
  }
};

// A started sandbox seen from the host, with the probe's report.
struct Live {
  pid_t pid = -1;
  UniqueFd pidfd;
  UniqueFd channel;
  Report report;
  std::string uid_map, gid_map, oom_score_adj, cgroup;
  std::vector<std::string> same_namespaces;  // namespaces shared with the test: must be none
};

class NamespacesPlugin : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!::airlock::testing::isRealRoot()) return;
    lib_ = std::make_unique<boost::dll::shared_library>(AIRLOCK_NAMESPACES_PLUGIN);
    auto entry = lib_->get_alias<const airlock_plugin_v1*()>(AIRLOCK_PLUGIN_ENTRY_SYMBOL);
    desc_ = entry();
    ops_ = static_cast<const airlock_isolation_ops_v1*>(desc_->ops);
    airlock_error_v1 err{};
    instance_ = desc_->create(&host_, "{}", &err);
  }
  static void TearDownTestSuite() {
    if (instance_ != nullptr) desc_->destroy(instance_);
    instance_ = nullptr;
    lib_.reset();
  }

  void SetUp() override {
    AIRLOCK_REQUIRE_ROOT();
    ASSERT_NE(instance_, nullptr);
    mounts_before_ = mountCount();
    threads_before_ = threadCount();
  }
  void TearDown() override {
    if (!::airlock::testing::isRealRoot()) return;
    EXPECT_EQ(mountCount(), mounts_before_) << "mounts leaked into the host namespace:\n"
                                            << readAll("/proc/self/mountinfo");
    EXPECT_EQ(childrenOfSelf(), "") << "a sandbox process was left behind";
    // The thread that makes the clone (clone.h) is joined before start() returns.
    EXPECT_EQ(threadCount(), threads_before_) << "start() left a thread behind";
  }

  // start(); on failure returns the error and leaves live empty.
  int start(SpecBuilder& b, Live& live, std::string* error = nullptr, void* instance = nullptr) {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    live.channel = UniqueFd(sv[0]);
    UniqueFd child_end(sv[1]);
    airlock_sandbox_v1 out{};
    airlock_error_v1 err{};
    int rc = ops_->start(instance != nullptr ? instance : instance_, &b.build(child_end.get()),
                         &out, &err);
    if (error != nullptr) *error = err.message;
    if (rc != 0) return rc;
    live.pid = out.pid;
    live.pidfd = UniqueFd(out.pidfd);
    return 0;
  }

  // Reads the probe's report and looks at the sandbox from the host while it is alive.
  void observe(Live& live) {
    std::string buf;
    char chunk[4096];
    while (buf.find("\nEND\n") == std::string::npos) {
      pollfd p{live.channel.get(), POLLIN, 0};
      ASSERT_GT(::poll(&p, 1, 10'000), 0) << "probe report timed out; got:\n" << buf;
      ssize_t n = ::read(live.channel.get(), chunk, sizeof chunk);
      ASSERT_GT(n, 0) << "probe closed fd 3 early; got:\n" << buf;
      buf.append(chunk, static_cast<size_t>(n));
    }
    std::istringstream in(buf);
    for (std::string line; std::getline(in, line);) live.report.lines.push_back(line);
    std::string proc = "/proc/" + std::to_string(live.pid);
    live.uid_map = readAll(proc + "/uid_map");
    live.gid_map = readAll(proc + "/gid_map");
    live.oom_score_adj = readAll(proc + "/oom_score_adj");
    live.cgroup = readAll(proc + "/cgroup");
    for (const char* ns : {"user", "pid", "mnt", "net", "uts", "ipc", "cgroup"}) {
      if (readLinkOr(proc + "/ns/" + ns) == readLinkOr(std::string("/proc/self/ns/") + ns))
        live.same_namespaces.push_back(ns);
    }
  }

  // Lets the probe exit and reaps it through the pidfd; returns its wait status.
  int finish(Live& live) {
    live.channel.reset();
    pollfd p{live.pidfd.get(), POLLIN, 0};
    if (::poll(&p, 1, 10'000) <= 0) {
      ::syscall(SYS_pidfd_send_signal, live.pidfd.get(), SIGKILL, nullptr, 0);
      ADD_FAILURE() << "sandbox did not exit";
    }
    siginfo_t info{};
    EXPECT_EQ(::waitid(P_PIDFD, static_cast<id_t>(live.pidfd.get()), &info, WEXITED), 0);
    live.pidfd.reset();
    return info.si_code == CLD_EXITED ? info.si_status : 128 + info.si_status;
  }

  Live run(SpecBuilder& b, void* instance = nullptr) {
    Live live;
    std::string error;
    int rc = start(b, live, &error, instance);
    EXPECT_EQ(rc, 0) << error;
    if (rc != 0) return live;
    observe(live);
    EXPECT_EQ(finish(live), 0);
    return live;
  }

  static inline std::unique_ptr<boost::dll::shared_library> lib_;
  static inline const airlock_plugin_v1* desc_ = nullptr;
  static inline const airlock_isolation_ops_v1* ops_ = nullptr;
  static inline void* instance_ = nullptr;
  static inline airlock_host_v1 host_ = {sizeof(airlock_host_v1), nullptr, &hostLog};
  int mounts_before_ = 0;
  int threads_before_ = 0;
};

TEST_F(NamespacesPlugin, DescriptorNamesTheBackend) {
  EXPECT_STREQ(desc_->name, "airlock.isolation.namespaces");
  EXPECT_EQ(desc_->kind, static_cast<uint32_t>(AIRLOCK_PLUGIN_ISOLATION));
  EXPECT_EQ(desc_->abi_major, AIRLOCK_PLUGIN_ABI_MAJOR);
  EXPECT_EQ(ops_->struct_size, sizeof(airlock_isolation_ops_v1));
}

TEST_F(NamespacesPlugin, ProbeIsRootInsideAndPidOneWithLoopbackOnly) {
  SpecBuilder b;
  Live live = run(b);
  const Report& r = live.report;
  EXPECT_EQ(r.value("argv1"), "hello");
  EXPECT_EQ(r.value("pid"), "1");
  EXPECT_EQ(r.value("procpids"), "1") << "only the sandbox's processes are visible";
  EXPECT_EQ(r.value("path"), "/usr/bin:/bin");
  EXPECT_EQ(r.value("status Uid:"), "0\t0\t0\t0");
  EXPECT_EQ(r.value("status Gid:"), "0\t0\t0\t0");
  EXPECT_EQ(r.value("status Groups:"), "") << "supplementary groups of the supervisor leaked";
  EXPECT_EQ(r.value("status CapEff:"), "000001ffffffffff") << "root of its own user ns";
  // Signals stay blocked from the clone through the exec (child.h), so no handler of the
  // supervisor's can run in the child; the exec leaves no handler, and the agent sets its own mask.
  EXPECT_EQ(r.value("status SigCgt:"), "0000000000000000");
  const uint64_t blocked = std::stoull(r.value("status SigBlk:"), nullptr, 16);
  for (int sig : {SIGHUP, SIGINT, SIGTERM, SIGCHLD, SIGUSR1, SIGRTMIN})
    EXPECT_NE(blocked & (uint64_t{1} << (sig - 1)), 0u) << "signal " << sig << " was not blocked";
  EXPECT_EQ(r.value("hostname"), "sbx-test");
  EXPECT_EQ(r.value("lo_up"), "1");
  EXPECT_EQ(r.value("netdevs"), "ENOENT") << "/sys must be absent";
  EXPECT_EQ(r.value("fds"), "0 1 2 3") << "only stdio and the channel are inherited";
}

TEST_F(NamespacesPlugin, HostSeesUnprivilegedMapsAndFreshNamespaces) {
  const std::string own_oom_score_adj = readAll("/proc/self/oom_score_adj");
  SpecBuilder b;
  Live live = run(b);
  // The child shared our memory until it exec'd (clone.h): the kernel gives a vfork child its
  // own oom_score_adj, so lowering the agent's never lowers the supervisor's.
  EXPECT_EQ(readAll("/proc/self/oom_score_adj"), own_oom_score_adj);
  auto expect_map = [](const std::string& map) {
    std::istringstream in(map);
    uint64_t inside = 1, outside = 0, count = 0;
    in >> inside >> outside >> count;
    EXPECT_EQ(inside, 0u) << map;
    EXPECT_EQ(outside, kUidBase) << map;
    EXPECT_EQ(count, kIdCount) << map;
  };
  expect_map(live.uid_map);
  expect_map(live.gid_map);
  EXPECT_TRUE(live.same_namespaces.empty())
      << "shares namespaces with the host: " << ::testing::PrintToString(live.same_namespaces);
  if (hasCapSysResource()) {
    EXPECT_EQ(live.oom_score_adj, "-998\n");
  } else {
    EXPECT_EQ(live.oom_score_adj, "0\n");
  }
}

TEST_F(NamespacesPlugin, FilesystemIsReadOnlyExceptWorkspaceAndTmp) {
  SpecBuilder b;
  Live live = run(b);
  const Report& r = live.report;
  for (const char* p : {"/probe", "/usr/probe", "/etc/probe", "/dev/probe"})
    EXPECT_EQ(r.value(std::string("write ") + p), "EROFS") << p;
  for (const char* p : {"/home/user/probe", "/tmp/probe", "/dev/shm/probe", "/dev/null"})
    EXPECT_EQ(r.value(std::string("write ") + p), "OK") << p;
  EXPECT_EQ(r.value("exists /home/user"), "dir:700:1000:1000");
  EXPECT_EQ(r.value("exists /usr/bin"), "dir:755:65534:65534") << "host root is unmapped";
  EXPECT_EQ(r.value("exists /etc/shadow"), "ENOENT");
  EXPECT_EQ(r.value("exists /sys"), "ENOENT");
  EXPECT_THAT(r.mountAt("/usr"), ::testing::HasSubstr(" ro,nosuid,nodev"));
  EXPECT_THAT(r.mountAt("/"), ::testing::HasSubstr(" ro,nosuid,nodev"));
  EXPECT_THAT(r.mountAt("/home/user"), ::testing::HasSubstr(" rw,nosuid,nodev"));
  EXPECT_THAT(r.mountAt("/tmp"), ::testing::HasSubstr(" rw,nosuid,nodev"));
  for (const auto& line : r.values("mnt"))
    EXPECT_EQ(line.find(b.scratch.path()), std::string::npos) << "host path visible: " << line;
  // Merged /usr: /bin is the host's symlink, not a second bind.
  std::string host_bin = readLinkOr("/bin");
  if (!host_bin.starts_with("ERR:")) {
    EXPECT_EQ(r.value("readlink /bin"), host_bin);
  }
  EXPECT_THAT(r.value("passwd"), ::testing::HasSubstr("root:x:0:0"));
  bool has_user = false;
  for (const auto& l : r.values("passwd")) {
    has_user |= l == "user:x:1000:1000::/home/user:/bin/bash";
    EXPECT_FALSE(l.starts_with("daemon:")) << "host passwd leaked";
  }
  EXPECT_TRUE(has_user) << r.all();
  EXPECT_EQ(r.value("read /etc/hostname"), "OK:9:sbx-test|");
}

TEST_F(NamespacesPlugin, ProcIsMaskedAndItsTunablesReadOnly) {
  SpecBuilder b;
  Live live = run(b);
  const Report& r = live.report;
  EXPECT_THAT(r.mountAt("/proc"), ::testing::HasSubstr(" rw,nosuid,nodev,noexec"));
  EXPECT_THAT(r.mountAt("/proc/sys"), ::testing::HasSubstr(" ro,"));
  // net.* sysctls belong to the sandbox's netns, so only a read-only mount stops this write.
  EXPECT_EQ(r.value("write /proc/sys/net/ipv4/ip_forward"), "EROFS");
  EXPECT_THAT(r.value("write /proc/sys/kernel/core_pattern"), ::testing::AnyOf("EROFS", "EACCES"));
  struct stat st;
  if (::stat("/proc/keys", &st) == 0) {
    EXPECT_EQ(r.value("read /proc/keys"), "OK:0:");
  }
  if (::stat("/proc/timer_list", &st) == 0) {
    EXPECT_EQ(r.value("read /proc/timer_list"), "OK:0:");
  }
  if (::stat("/proc/kcore", &st) == 0) {
    EXPECT_THAT(r.value("exists /proc/kcore"), ::testing::StartsWith("chr:"));
  } else {
    EXPECT_EQ(r.value("exists /proc/kcore"), "ENOENT");
  }
  if (::stat("/proc/acpi", &st) == 0) {
    EXPECT_THAT(r.mountAt("/proc/acpi"), ::testing::HasSubstr(" ro,"));
  }
}

TEST_F(NamespacesPlugin, DevHasOnlyHarmlessDevices) {
  SpecBuilder b;
  Live live = run(b);
  const Report& r = live.report;
  std::istringstream in(r.value("dev"));
  std::set<std::string> names;
  for (std::string n; in >> n;) names.insert(n);
  std::set<std::string> expected = {"null", "zero", "full", "random", "urandom", "tty",   "pts",
                                    "ptmx", "shm",  "fd",   "stdin",  "stdout",  "stderr"};
  EXPECT_EQ(names, expected);
  EXPECT_THAT(r.value("exists /dev/null"), ::testing::StartsWith("chr:"));
  EXPECT_EQ(r.value("readlink /dev/ptmx"), "pts/ptmx");
  EXPECT_THAT(r.mountAt("/dev/pts"), ::testing::HasSubstr("devpts"));
  EXPECT_THAT(r.mountAt("/dev/pts"), ::testing::HasSubstr("ptmxmode=666"));
  EXPECT_THAT(r.mountAt("/dev"), ::testing::HasSubstr(" ro,nosuid,noexec"));
  EXPECT_EQ(r.value("read /dev/null"), "OK:0:");
}

TEST_F(NamespacesPlugin, SpecMountsReadOnlyWritableOptionalAndDeduplicated) {
  TempDir data;
  data.write("hello.txt", "from host\n");
  // Sandbox root is an unprivileged uid on the host: a 0700 root-owned dir stays closed to it.
  ASSERT_EQ(::chmod(data.path().c_str(), 0755), 0);
  TempDir rw;
  ::chmod(rw.path().c_str(), 0777);
  SpecBuilder b;
  b.addMount("/usr/lib", "/usr/lib", AIRLOCK_MOUNT_READONLY);  // covered by /usr: no mount
  b.addMount(data.path(), "/data", AIRLOCK_MOUNT_READONLY);
  b.addMount(data.file("hello.txt"), "/etc/greeting", AIRLOCK_MOUNT_READONLY);
  b.addMount(rw.path(), "/home/user/out", 0);
  b.addMount("/nonexistent-airlock-optional", "/opt/optional", AIRLOCK_MOUNT_OPTIONAL);
  b.argv_s.insert(b.argv_s.end(),
                  {"read:/data/hello.txt", "write:/data/new", "read:/etc/greeting",
                   "write:/home/user/out/made", "exists:/opt/optional", "exists:/opt"});
  Live live = run(b);
  const Report& r = live.report;
  EXPECT_EQ(r.value("read /data/hello.txt"), "OK:10:from host|");
  EXPECT_EQ(r.value("write /data/new"), "EROFS");
  EXPECT_EQ(r.value("read /etc/greeting"), "OK:10:from host|");
  EXPECT_EQ(r.value("write /home/user/out/made"), "OK");
  EXPECT_EQ(r.value("exists /opt/optional"), "ENOENT");
  EXPECT_EQ(r.value("exists /opt"), "ENOENT") << "no mount point made for a skipped entry";
  EXPECT_EQ(r.mountAt("/usr/lib"), "<no mount at /usr/lib>");
  struct stat st;
  ASSERT_EQ(::stat(rw.file("made").c_str(), &st), 0) << "write through a rw bind";
  EXPECT_EQ(st.st_uid, kUidBase) << "sandbox root is the first id of the range on the host";
}

// Whether the last start() logged that its root was cloned from a template.
bool lastRootWasCloned() {
  for (auto it = logLines.rbegin(); it != logLines.rend(); ++it) {
    if (it->find("root cloned from its template") != std::string::npos) return true;
    if (it->find("root built") != std::string::npos) return false;
  }
  ADD_FAILURE() << "no start() line logged";
  return false;
}

// The report with what legitimately differs between two sandboxes taken out: mountinfo ids,
// device numbers and order (each sandbox mounts its own tmpfs; a cloned tree lists its mounts in
// another order), and the owner of what the template's tmpfs holds (see
// RootTemplateOwnsTheSynthesizedFilesAsTheHostsRoot): uid=/gid= of the / and /dev tmpfs, and
// the owner fields of the paths on them.
std::vector<std::string> comparable(const Report& r) {
  std::vector<std::string> out, mounts;
  for (const auto& l : r.lines) {
    if (l.starts_with("mnt ")) {
      std::istringstream in(l.substr(4));
      std::string id, parent, dev, root, point, opts, rest;
      in >> id >> parent >> dev >> root >> point >> opts;
      std::getline(in, rest);
      if (point == "/" || point == "/dev") {
        size_t uid = rest.find(",uid=");
        if (uid != std::string::npos) rest.erase(uid);
      }
      mounts.push_back("mnt " + root + " " + point + " " + opts + rest);
    } else if (l.starts_with("exists / ") || l.starts_with("exists /etc ") ||
               l.starts_with("exists /etc/passwd ") || l.starts_with("exists /etc/hosts ") ||
               l.starts_with("exists /dev ") || l.starts_with("exists /home ") ||
               (l.starts_with("exists ") && l.find(" link:") != std::string::npos)) {
      out.push_back(l.substr(0, l.rfind(':', l.rfind(':') - 1)));  // type:mode, no uid:gid
    } else {
      out.push_back(l);
    }
  }
  std::sort(mounts.begin(), mounts.end());
  out.insert(out.end(), mounts.begin(), mounts.end());
  return out;
}

TEST_F(NamespacesPlugin, RootFromTheTemplateIsTheRootTheChildWouldBuild) {
  // A second instance made with templates off builds every root in the child, as on a kernel
  // older than 6.15.
  ::setenv("AIRLOCK_ROOT_TEMPLATES", "off", 1);
  airlock_error_v1 err{};
  void* built_instance = desc_->create(&host_, "{}", &err);
  ::unsetenv("AIRLOCK_ROOT_TEMPLATES");
  ASSERT_NE(built_instance, nullptr) << err.message;
  const std::vector<std::string> checks = {"exists:/",
                                           "exists:/etc",
                                           "exists:/etc/passwd",
                                           "exists:/dev",
                                           "exists:/etc/hosts",
                                           "read:/etc/hosts",
                                           "read:/etc/resolv.conf",
                                           "exists:/home",
                                           "exists:/dev/pts",
                                           "readlink:/dev/fd",
                                           "readlink:/dev/stderr",
                                           "write:/dev/pts/x",
                                           "exists:/lib64",
                                           "read:/etc/nsswitch.conf",
                                           "write:/etc/new",
                                           "write:/home/x"};
  SpecBuilder a, b;
  a.argv_s.insert(a.argv_s.end(), checks.begin(), checks.end());
  b.argv_s = a.argv_s;
  Live templated = run(a);
  EXPECT_TRUE(lastRootWasCloned());
  Live built = run(b, built_instance);
  EXPECT_FALSE(lastRootWasCloned());
  desc_->destroy(built_instance);
  EXPECT_EQ(comparable(templated.report), comparable(built.report))
      << "template:\n"
      << templated.report.all() << "\nbuilt:\n"
      << built.report.all();
  EXPECT_EQ(templated.report.value("write /etc/new"), "EROFS");
  EXPECT_EQ(templated.report.value("write /home/x"), "EROFS");
}

// AIRLOCK_ROOT_TEMPLATES: "false" turns templates off like "off"; a value that is neither is
// said once, naming it, and leaves them on.
TEST_F(NamespacesPlugin, RootTemplateSettingIsReadStrictly) {
  auto instanceWith = [&](const char* value) {
    ::setenv("AIRLOCK_ROOT_TEMPLATES", value, 1);
    airlock_error_v1 err{};
    void* instance = desc_->create(&host_, "{}", &err);
    ::unsetenv("AIRLOCK_ROOT_TEMPLATES");
    EXPECT_NE(instance, nullptr) << err.message;
    return instance;
  };
  void* off = instanceWith("false");
  ASSERT_NE(off, nullptr);
  SpecBuilder a;
  run(a, off);
  EXPECT_FALSE(lastRootWasCloned());
  desc_->destroy(off);

  void* odd = instanceWith("sometimes");
  ASSERT_NE(odd, nullptr);
  logLines.clear();
  SpecBuilder b, c;
  run(b, odd);
  EXPECT_TRUE(lastRootWasCloned());
  run(c, odd);
  size_t said = 0;
  for (const auto& l : logLines)
    said += l.find("AIRLOCK_ROOT_TEMPLATES='sometimes' is neither on") != std::string::npos;
  EXPECT_EQ(said, 1u) << "said on the first start only";
  desc_->destroy(odd);
}

TEST_F(NamespacesPlugin, RootTemplateOwnsTheSynthesizedFilesAsTheHostsRoot) {
  // The template's tmpfs is made by the supervisor, so its owner is the host's root, which the
  // sandbox does not map: nobody, as for /usr. A root built in the child is the sandbox root's.
  SpecBuilder b;
  b.argv_s.insert(b.argv_s.end(), {"exists:/", "exists:/etc/passwd"});
  Live live = run(b);
  ASSERT_TRUE(lastRootWasCloned());
  EXPECT_EQ(live.report.value("exists /"), "dir:755:65534:65534");
  EXPECT_EQ(live.report.value("exists /etc/passwd"), "file:644:65534:65534");
}

TEST_F(NamespacesPlugin, SandboxesClonedFromOneTemplateShareNothingWritable) {
  SpecBuilder a;
  a.argv_s.insert(a.argv_s.end(), {"write:/tmp/only-a", "write:/home/user/only-a",
                                   "write:/dev/shm/only-a", "write:/etc/only-a"});
  Live first;
  std::string error;
  ASSERT_EQ(start(a, first, &error), 0) << error;
  observe(first);  // the probe has written its files and now waits on fd 3
  EXPECT_TRUE(lastRootWasCloned());
  EXPECT_EQ(first.report.value("write /tmp/only-a"), "OK");
  EXPECT_EQ(first.report.value("write /home/user/only-a"), "OK");
  EXPECT_EQ(first.report.value("write /dev/shm/only-a"), "OK");
  EXPECT_EQ(first.report.value("write /etc/only-a"), "EROFS");
  SpecBuilder b;
  b.argv_s.insert(b.argv_s.end(),
                  {"exists:/tmp/only-a", "exists:/home/user/only-a", "exists:/dev/shm/only-a"});
  Live second = run(b);  // while the first is alive, from the same template
  EXPECT_TRUE(lastRootWasCloned());
  for (const char* p : {"/tmp/only-a", "/home/user/only-a", "/dev/shm/only-a"})
    EXPECT_EQ(second.report.value(std::string("exists ") + p), "ENOENT") << p;
  EXPECT_EQ(finish(first), 0);
}

TEST_F(NamespacesPlugin, RootTemplateFollowsAHostFileReplacedByRename) {
  TempDir data;
  ASSERT_EQ(::chmod(data.path().c_str(), 0755), 0);
  data.write("greeting", "first\n");
  auto sandboxSees = [&] {
    SpecBuilder b;
    b.addMount(data.file("greeting"), "/etc/greeting", AIRLOCK_MOUNT_READONLY);
    b.argv_s.push_back("read:/etc/greeting");
    Live live = run(b);
    EXPECT_TRUE(lastRootWasCloned());
    return live.report.value("read /etc/greeting");
  };
  EXPECT_EQ(sandboxSees(), "OK:6:first|");
  EXPECT_EQ(sandboxSees(), "OK:6:first|");
  // How package managers and resolvers update /etc: a new inode renamed over the old one. A
  // template that kept the old bind would show "first" forever.
  data.write("greeting.new", "second\n");
  ASSERT_EQ(::rename(data.file("greeting.new").c_str(), data.file("greeting").c_str()), 0);
  EXPECT_EQ(sandboxSees(), "OK:7:second|");
}

TEST_F(NamespacesPlugin, MissingRequiredSourceFailsBeforeClone) {
  SpecBuilder b;
  b.addMount("/nonexistent-airlock-required", "/data", AIRLOCK_MOUNT_READONLY);
  Live live;
  std::string error;
  EXPECT_EQ(start(b, live, &error), ENOENT);
  EXPECT_THAT(error, ::testing::HasSubstr("stage prepare"));
  EXPECT_THAT(error, ::testing::HasSubstr("'/nonexistent-airlock-required'"));
  EXPECT_THAT(error, ::testing::HasSubstr("ENOENT"));
}

TEST_F(NamespacesPlugin, ChildStageFailureNamesStageOpAndPathAndReapsTheChild) {
  SpecBuilder b;
  // A mount point inside the read-only host /usr cannot be created: only the child finds out.
  b.addMount("/etc/hostname", "/usr/airlock-no-such-file", AIRLOCK_MOUNT_READONLY);
  Live live;
  std::string error;
  EXPECT_EQ(start(b, live, &error), ENOENT);
  EXPECT_EQ(error,
            "stage mounts: move_mount(/etc/hostname) '/usr/airlock-no-such-file': ENOENT (No "
            "such file or directory)");
}

TEST_F(NamespacesPlugin, CloneFailureNamesTheStageAndLeavesNothingBehind) {
  // A directory that is not a cgroup: clone3 itself refuses CLONE_INTO_CGROUP with it.
  UniqueFd not_a_cgroup(::open("/tmp", O_DIRECTORY | O_PATH | O_CLOEXEC));
  ASSERT_TRUE(not_a_cgroup);
  SpecBuilder b;
  b.cgroup_fd = not_a_cgroup.get();
  Live live;
  std::string error;
  EXPECT_EQ(start(b, live, &error), EBADF);
  EXPECT_EQ(error, "stage clone: clone3 'namespaces, into cgroup': EBADF (Bad file descriptor)");
}

TEST_F(NamespacesPlugin, ImageWithoutMountPointsIsRefusedNamingTheDirectory) {
  TempDir image;
  for (const char* d : {"dev", "proc", "home"}) ASSERT_EQ(::mkdir(image.file(d).c_str(), 0755), 0);
  ASSERT_EQ(::chmod(image.path().c_str(), 0755), 0);
  SpecBuilder b;
  b.image = image.path();
  Live live;
  std::string error;
  EXPECT_NE(start(b, live, &error), 0);
  EXPECT_THAT(error, ::testing::HasSubstr("stage prepare"));
  EXPECT_THAT(error, ::testing::HasSubstr("'/tmp'"));
  EXPECT_THAT(error, ::testing::HasSubstr(image.path()));
}

TEST_F(NamespacesPlugin, ImageUnreachableByTheSandboxUidIsRefused) {
  TempDir image;  // mode 0700: the sandbox's uid could not walk to its mount points
  for (const char* d : {"dev", "proc", "tmp", "home", "home/user"})
    ASSERT_EQ(::mkdir(image.file(d).c_str(), 0755), 0);
  SpecBuilder b;
  b.image = image.path();
  Live live;
  std::string error;
  EXPECT_EQ(start(b, live, &error), EINVAL);
  EXPECT_THAT(error, ::testing::HasSubstr("stage prepare: image directory is not searchable"));
  EXPECT_THAT(error, ::testing::HasSubstr("'" + image.path() + "'"));
}

TEST_F(NamespacesPlugin, ImageIsTheReadOnlyRootWithItsOwnEtc) {
  TempDir image;
  for (const char* d : {"dev", "proc", "tmp", "home", "home/user", "etc", "usr"})
    ASSERT_EQ(::mkdir(image.file(d).c_str(), 0755), 0);
  image.write("etc/passwd", "root:x:0:0::/root:/bin/sh\nimageuser:x:1000:1000::/home/user:/\n");
  ASSERT_EQ(::chmod(image.path().c_str(), 0755), 0);  // an image root is world-searchable
  SpecBuilder b;
  b.image = image.path();
  b.argv_s.push_back("exists:/etc/hostname");
  Live live = run(b);
  const Report& r = live.report;
  EXPECT_THAT(r.all(), ::testing::HasSubstr("passwd imageuser:x:1000"));
  EXPECT_EQ(r.value("exists /etc/hostname"), "ENOENT") << "no synthesized /etc with an image";
  EXPECT_EQ(r.value("write /probe"), "EROFS");
  EXPECT_EQ(r.value("write /home/user/probe"), "OK");
  EXPECT_EQ(r.value("pid"), "1");
  EXPECT_THAT(r.mountAt("/"), ::testing::HasSubstr(" ro,nosuid,nodev"));
  EXPECT_FALSE(std::filesystem::exists(image.file("home/user/probe"))) << "workspace is a tmpfs";
}

// attach_cgroups runs after the id maps and before the child runs; CLONE_INTO_CGROUP places it.
struct AttachRecord {
  pid_t pid = -1;
  std::string uid_map_then;
  int rc = 0;
};
int recordAttach(void* ctx, pid_t pid, airlock_error_v1* err) {
  auto* rec = static_cast<AttachRecord*>(ctx);
  rec->pid = pid;
  rec->uid_map_then = readAll("/proc/" + std::to_string(pid) + "/uid_map");
  if (rec->rc != 0) {
    err->code = rec->rc;
    std::snprintf(err->message, sizeof err->message, "v1 memory cgroup refused the pid");
  }
  return rec->rc;
}

TEST_F(NamespacesPlugin, ClonesIntoTheCgroupAndCallsAttachAfterIdMaps) {
  std::string cg = "/sys/fs/cgroup/unified/airlock-nstest-" + std::to_string(::getpid());
  if (::mkdir(cg.c_str(), 0755) != 0) GTEST_SKIP() << "no cgroup2 at /sys/fs/cgroup/unified";
  {
    UniqueFd cgfd(::open(cg.c_str(), O_DIRECTORY | O_PATH | O_CLOEXEC));
    AttachRecord rec;
    SpecBuilder b;
    b.cgroup_fd = cgfd.get();
    b.attach = &recordAttach;
    b.attach_ctx = &rec;
    Live live = run(b);
    EXPECT_EQ(rec.pid, live.pid);
    EXPECT_THAT(rec.uid_map_then, ::testing::HasSubstr(std::to_string(kUidBase)));
    EXPECT_THAT(live.cgroup, ::testing::HasSubstr("0::/airlock-nstest-"));
  }
  EXPECT_EQ(::rmdir(cg.c_str()), 0) << "cgroup not empty after the sandbox was reaped";
}

TEST_F(NamespacesPlugin, AttachFailureKillsAndReapsTheChild) {
  AttachRecord rec;
  rec.rc = EPERM;
  SpecBuilder b;
  b.attach = &recordAttach;
  b.attach_ctx = &rec;
  Live live;
  std::string error;
  EXPECT_EQ(start(b, live, &error), EPERM);
  EXPECT_THAT(error, ::testing::HasSubstr("stage cgroups: attach_cgroups: v1 memory cgroup"));
  ASSERT_GT(rec.pid, 0);
  EXPECT_FALSE(std::filesystem::exists("/proc/" + std::to_string(rec.pid)));
}

// Whether a mount of the test's (the host's) namespace sits at path: mountinfo's fifth field.
bool mountedAt(const std::string& path) {
  std::istringstream in(readAll("/proc/self/mountinfo"));
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string id, parent, dev, root, point;
    fields >> id >> parent >> dev >> root >> point;
    if (point == path) return true;
  }
  return false;
}

// Whether a and b, symlinks followed, are the same inode.
bool sameInode(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

// Undoes what a followed symlink mounted onto the host, so that one failure does not leak
// into the next tests.
void unmountAll(const std::string& path) {
  for (int i = 0; i < 8 && mountedAt(path); ++i) ::umount2(path.c_str(), MNT_DETACH);
}

// Sharp edge (issue 22): mount points were resolved by path, following symlinks. A directory
// another sandbox can write is bound at /data and more mounts go inside it; the other sandbox
// has made /data/sub a symlink to a host directory. Built as a root template (in the
// supervisor, the host's own mount namespace) a mount at /data/sub/inner landed on the host's
// directory; built in the child it landed outside the new root. Either way it must be refused,
// naming the mount point, and so must a mount point that is itself the symlink (/data/sub).
TEST_F(NamespacesPlugin, AMountPointThatIsASymlinkIsRefusedNotFollowedOutOfTheRoot) {
  TempDir shared, canary, src;
  ASSERT_EQ(::chmod(shared.path().c_str(), 0777), 0);
  ASSERT_EQ(::chmod(src.path().c_str(), 0755), 0);
  // Searchable by the sandbox's uid, so that nothing but the symlink stands in the way.
  ASSERT_EQ(::chmod(canary.path().c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(canary.file("inner").c_str(), 0755), 0);
  src.write("marker", "mounted\n");
  ASSERT_EQ(::symlink(canary.path().c_str(), shared.file("sub").c_str()), 0);
  // Controls: followed, the mount points are the host's canary directories; and mountedAt
  // sees a mount where there is one.
  ASSERT_TRUE(sameInode(shared.file("sub"), canary.path()));
  ASSERT_TRUE(sameInode(shared.file("sub/inner"), canary.file("inner")));
  ASSERT_TRUE(mountedAt("/proc"));

  ::setenv("AIRLOCK_ROOT_TEMPLATES", "off", 1);
  airlock_error_v1 err{};
  void* built_instance = desc_->create(&host_, "{}", &err);
  ::unsetenv("AIRLOCK_ROOT_TEMPLATES");
  ASSERT_NE(built_instance, nullptr) << err.message;
  for (const char* target : {"/data/sub/inner", "/data/sub"}) {
    for (void* instance : {instance_, built_instance}) {
      SCOPED_TRACE(std::string(target) + (instance == instance_ ? ", root from a template"
                                                                : ", root built in the child"));
      SpecBuilder b;
      b.addMount(shared.path(), "/data", 0);
      b.addMount(src.path(), target, AIRLOCK_MOUNT_READONLY);
      b.argv_s.insert(b.argv_s.end(), {"readlink:/data/sub", "exists:/data/sub/inner/marker"});
      Live live;
      std::string error;
      int rc = start(b, live, &error, instance);
      if (rc == 0) {
        observe(live);
        finish(live);
        ADD_FAILURE() << "the sandbox started; it saw:\n" << live.report.all();
      }
      EXPECT_NE(rc, 0);
      EXPECT_THAT(error, ::testing::HasSubstr(std::string("'") + target + "'"));
      EXPECT_THAT(error, ::testing::HasSubstr("symlink"));
      for (const std::string& dir : {canary.path(), canary.file("inner")}) {
        EXPECT_FALSE(mountedAt(dir)) << "mounted onto the host's " << dir;
        unmountAll(dir);
      }
      EXPECT_FALSE(std::filesystem::exists(canary.file("marker")));
      EXPECT_FALSE(std::filesystem::exists(canary.file("inner/marker")));
    }
  }
  desc_->destroy(built_instance);
}

// The image's own mount points are checked when the plan is made, in the supervisor; the child
// mounts later. attach_cgroups runs in between (after planning, before the child mounts
// anything), so it stands in for a writer of the image directory who swaps /tmp for a symlink.
struct SwapForSymlink {
  std::string dir, target;
  bool swapped = false;
};
int swapForSymlink(void* ctx, pid_t, airlock_error_v1*) {
  auto* s = static_cast<SwapForSymlink*>(ctx);
  s->swapped = ::rmdir(s->dir.c_str()) == 0 && ::symlink(s->target.c_str(), s->dir.c_str()) == 0;
  return 0;
}

TEST_F(NamespacesPlugin, AnImageMountPointSwappedForASymlinkAfterTheCheckIsRefused) {
  TempDir image, canary;
  for (const char* d : {"dev", "proc", "tmp", "home", "home/user", "usr"})
    ASSERT_EQ(::mkdir(image.file(d).c_str(), 0755), 0);
  ASSERT_EQ(::chmod(image.path().c_str(), 0755), 0);
  SwapForSymlink swap{image.file("tmp"), canary.path()};
  SpecBuilder b;
  b.image = image.path();
  b.attach = &swapForSymlink;
  b.attach_ctx = &swap;
  b.argv_s.push_back("readlink:/tmp");
  Live live;
  std::string error;
  int rc = start(b, live, &error);
  ASSERT_TRUE(swap.swapped);
  // Control: followed, the image's /tmp now leads to the host's canary directory.
  EXPECT_TRUE(sameInode(image.file("tmp"), canary.path()));
  if (rc == 0) {
    observe(live);
    finish(live);
    ADD_FAILURE() << "the sandbox started; its /tmp tmpfs went elsewhere:\n" << live.report.all();
  }
  EXPECT_NE(rc, 0);
  EXPECT_THAT(error, ::testing::HasSubstr("stage rootfs"));
  EXPECT_THAT(error, ::testing::HasSubstr("'/tmp'"));
  EXPECT_THAT(error, ::testing::HasSubstr("symlink"));
  EXPECT_FALSE(mountedAt(canary.path()));
}

// The supervisor is killed (-9) while its child waits for the go-ahead on the sync pipe: here,
// in attach_cgroups. The child, a copy of the supervisor with its fds (an API socket, a
// sandbox's lock, ...), must see the pipe end and exit, not keep them open waiting forever.
int dieInAttach(void* ctx, pid_t pid, airlock_error_v1*) {
  (void)!::write(*static_cast<int*>(ctx), &pid, sizeof pid);
  ::raise(SIGKILL);
  return 0;
}

TEST_F(NamespacesPlugin, ChildOfASupervisorKilledBeforeTheGoAheadExits) {
  // The orphaned child comes to this process, which reaps it.
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  int report[2];
  ASSERT_EQ(::pipe2(report, O_CLOEXEC), 0);
  pid_t supervisor = ::fork();
  ASSERT_GE(supervisor, 0);
  if (supervisor == 0) {
    ::close(report[0]);
    SpecBuilder b;
    b.attach = &dieInAttach;
    b.attach_ctx = &report[1];
    Live live;
    start(b, live);
    ::_exit(1);  // not reached
  }
  ::close(report[1]);
  pid_t child = -1;
  EXPECT_EQ(::read(report[0], &child, sizeof child), static_cast<ssize_t>(sizeof child));
  ::close(report[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(supervisor, &status, 0), supervisor);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  bool exited = false;
  for (int i = 0; child > 0 && i < 250 && !exited; ++i) {
    exited = ::waitpid(child, &status, WNOHANG) == child;
    if (!exited) ::usleep(20000);
  }
  if (!exited && child > 0) {
    ::kill(child, SIGKILL);
    ::waitpid(child, &status, 0);
  }
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  EXPECT_TRUE(exited) << "the child still waited for its dead supervisor after 5 s";
}

TEST_F(NamespacesPlugin, InvalidSpecsAreRefusedWithTheField) {
  struct Case {
    void (*mutate)(SpecBuilder&);
    const char* message;
  } cases[] = {
      {[](SpecBuilder& b) { b.hostname = std::string(65, 'h'); }, "hostname"},
      {[](SpecBuilder& b) { b.addMount("/usr", "/proc/x", AIRLOCK_MOUNT_READONLY); }, "reserved"},
      {[](SpecBuilder& b) { b.addMount("/usr", "/a/../etc", AIRLOCK_MOUNT_READONLY); }, "'..'"},
  };
  for (const auto& c : cases) {
    SpecBuilder b;
    c.mutate(b);
    Live live;
    std::string error;
    EXPECT_EQ(start(b, live, &error), EINVAL) << c.message;
    EXPECT_THAT(error, ::testing::HasSubstr("stage prepare"));
    EXPECT_THAT(error, ::testing::HasSubstr(c.message));
  }
}

TEST_F(NamespacesPlugin, NonCloexecHostFdsAreNotInherited) {
  UniqueFd leak(::open("/etc/hostname", O_RDONLY));  // deliberately without O_CLOEXEC
  ASSERT_TRUE(leak);
  SpecBuilder b;
  Live live = run(b);
  EXPECT_EQ(live.report.value("fds"), "0 1 2 3");
}

// Not a benchmark (bench/ has those): a sanity bound, and the median printed for the report.
TEST_F(NamespacesPlugin, StartIsFastAndRepeatableWithoutLeaks) {
  constexpr int kRuns = 50;
  std::vector<double> start_ms, clone_to_exec_us;
  for (int i = 0; i < kRuns; ++i) {
    SpecBuilder b;
    b.argv_s = {"airlock-agent", "quick"};
    Live live;
    logLines.clear();
    timespec t0, t1;
    ::clock_gettime(CLOCK_MONOTONIC, &t0);
    std::string error;
    ASSERT_EQ(start(b, live, &error), 0) << error;
    ::clock_gettime(CLOCK_MONOTONIC, &t1);
    start_ms.push_back((t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
    for (const auto& l : logLines) {
      auto at = l.find("exec'd ");
      if (at != std::string::npos) clone_to_exec_us.push_back(std::stod(l.substr(at + 7)));
    }
    EXPECT_EQ(finish(live), 0);
  }
  if (!logLines.empty()) std::printf("last run: %s\n", logLines.back().c_str());
  std::sort(start_ms.begin(), start_ms.end());
  std::sort(clone_to_exec_us.begin(), clone_to_exec_us.end());
  ASSERT_EQ(clone_to_exec_us.size(), static_cast<size_t>(kRuns));
  double median_start = start_ms[kRuns / 2];
  std::printf("namespaces start(): median %.3f ms, p90 %.3f ms; clone→exec median %.0f us\n",
              median_start, start_ms[kRuns * 9 / 10], clone_to_exec_us[kRuns / 2]);
  RecordProperty("start_median_us", static_cast<int>(median_start * 1000));
  RecordProperty("clone_to_exec_median_us", static_cast<int>(clone_to_exec_us[kRuns / 2]));
  EXPECT_LT(median_start, 50.0) << "start() is far slower than expected";
}

}  // namespace
