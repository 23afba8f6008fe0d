// validate(): every rule at and past its bounds; relaxations(): every loosening, nothing else.
#include <gtest/gtest.h>
#include <linux/capability.h>

#include <functional>
#include <optional>
#include <string>

#include "airlock/policy/keys.h"
#include "airlock/policy/net_rule.h"
#include "airlock/policy/policy.h"

namespace airlock::policy {
namespace {

using namespace std::string_literals;

struct Case {
  const char* what;
  std::function<void(Profile&)> change;
  std::optional<std::string> error;  // nullopt: must pass
};

Profile named() {
  Profile p;
  p.name = "t";
  return p;
}

TEST(PolicyValidate, DefaultsAreValidAndRelaxNothing) {
  EXPECT_TRUE(validate(Profile{}));
  EXPECT_TRUE(validate(named()));
  EXPECT_TRUE(relaxations(Profile{}).empty());
  EXPECT_TRUE(validate(builtinDefault().profiles.at("default")));
}

TEST(PolicyValidate, EveryRuleAtAndPastItsBounds) {
  const std::vector<Case> cases = {
      {"timeout 0", [](Profile& p) { p.limits.timeout_s = 0; },
       "limits.timeout_s = 0: must be at least 1"},
      {"timeout 1", [](Profile& p) { p.limits.timeout_s = 1; }, std::nullopt},
      {"timeout day", [](Profile& p) { p.limits.timeout_s = 86400; }, std::nullopt},
      {"timeout day+1", [](Profile& p) { p.limits.timeout_s = 86401; },
       "limits.timeout_s = 86401: must be at most 86400"},
      {"memory 15", [](Profile& p) { p.limits.memory_mb = 15; },
       "limits.memory_mb = 15: must be at least 16"},
      {"memory 16",
       [](Profile& p) {
         p.limits.memory_mb = 16;
         p.limits.workspace_mb = 8;
         p.limits.tmp_mb = 4;
       },
       std::nullopt},
      {"tmpfs as large as memory",
       [](Profile& p) {
         p.limits.memory_mb = 600;
         p.limits.workspace_mb = 500;
         p.limits.tmp_mb = 100;
       },
       "limits.workspace_mb + limits.tmp_mb = 600 MiB must be below limits.memory_mb = 600 MiB: "
       "files in /home/user and /tmp count against the memory limit"},
      {"tmpfs just below memory",
       [](Profile& p) {
         p.limits.memory_mb = 601;
         p.limits.workspace_mb = 500;
         p.limits.tmp_mb = 100;
       },
       std::nullopt},
      {"memory overflow", [](Profile& p) { p.limits.memory_mb = uint64_t{1} << 50; },
       "limits.memory_mb = 1125899906842624: must be at most 16777216"},
      {"pids 7", [](Profile& p) { p.limits.pids = 7; }, "limits.pids = 7: must be at least 8"},
      {"pids 8", [](Profile& p) { p.limits.pids = 8; }, std::nullopt},
      {"cpu 0", [](Profile& p) { p.limits.cpu_percent = 0; },
       "limits.cpu_percent = 0: must be at least 1"},
      {"cpu 64 cpus", [](Profile& p) { p.limits.cpu_percent = 6400; }, std::nullopt},
      {"cpu 65 cpus", [](Profile& p) { p.limits.cpu_percent = 6500; },
       "limits.cpu_percent = 6500: must be at most 6400"},
      {"file size 0", [](Profile& p) { p.limits.file_size_mb = 0; },
       "limits.file_size_mb = 0: must be at least 1"},
      {"open files 15", [](Profile& p) { p.limits.open_files = 15; },
       "limits.open_files = 15: must be at least 16"},
      {"open files max", [](Profile& p) { p.limits.open_files = 1048576; }, std::nullopt},
      {"open files max+1", [](Profile& p) { p.limits.open_files = 1048577; },
       "limits.open_files = 1048577: must be at most 1048576"},
      {"output 1023", [](Profile& p) { p.limits.output_bytes = 1023; },
       "limits.output_bytes = 1023: must be at least 1024"},
      {"output 1024", [](Profile& p) { p.limits.output_bytes = 1024; }, std::nullopt},
      {"workspace 0", [](Profile& p) { p.limits.workspace_mb = 0; },
       "limits.workspace_mb = 0: must be at least 1"},
      {"tmp 0", [](Profile& p) { p.limits.tmp_mb = 0; }, "limits.tmp_mb = 0: must be at least 1"},
      {"user admin", [](Profile& p) { p.user = "admin"; },
       "user = 'admin': must be 'user' or 'root'"},
      {"root", [](Profile& p) { p.user = "root"; }, std::nullopt},
      {"caps without root", [](Profile& p) { p.capabilities = {"CAP_CHOWN"}; },
       "capabilities: kept only when user = 'root' (this profile has user = 'user')"},
      {"caps with root",
       [](Profile& p) {
         p.user = "root";
         p.capabilities = {"CAP_CHOWN", "CAP_CHECKPOINT_RESTORE"};
       },
       std::nullopt},
      {"unknown cap",
       [](Profile& p) {
         p.user = "root";
         p.capabilities = {"CAP_SYS_ADMN"};
       },
       "capabilities[0] = 'CAP_SYS_ADMN': not a Linux capability (did you mean 'CAP_SYS_ADMIN'?)"},
      {"lowercase cap",
       [](Profile& p) {
         p.user = "root";
         p.capabilities = {"cap_chown"};
       },
       "capabilities[0] = 'cap_chown': not a Linux capability (did you mean 'CAP_CHOWN'?)"},
      {"cap twice",
       [](Profile& p) {
         p.user = "root";
         p.capabilities = {"CAP_KILL", "CAP_KILL"};
       },
       "capabilities[1] = 'CAP_KILL': listed twice"},
      {"dotted isolation", [](Profile& p) { p.isolation = "airlock.isolation.namespaces"; },
       std::nullopt},
      {"isolation path", [](Profile& p) { p.isolation = "/tmp/x.so"; },
       "isolation = '/tmp/x.so': must be a plugin name of lowercase letters, digits, '.', '-' "
       "and '_' (e.g. 'namespaces')"},
      {"hostname fqdn", [](Profile& p) { p.hostname = "box.example-1.test"; }, std::nullopt},
      {"hostname empty", [](Profile& p) { p.hostname = ""; },
       "hostname = '': must be 1-64 letters, digits, '-' and '.', with no label starting or "
       "ending in '-'"},
      {"hostname space", [](Profile& p) { p.hostname = "a b"; },
       "hostname = 'a b': must be 1-64 letters, digits, '-' and '.', with no label starting or "
       "ending in '-'"},
      {"no languages", [](Profile& p) { p.languages.clear(); },
       "languages = []: allow at least one language"},
      {"language twice",
       [](Profile& p) {
         p.languages = {"python", "python"};
       },
       "languages[1] = 'python': listed twice"},
      {"language path", [](Profile& p) { p.languages = {"../x"}; },
       "languages[0] = '../x': must be a language plugin name of lowercase letters, digits, '.', "
       "'-' and '_' (e.g. 'python')"},
      {"network allowlist", [](Profile& p) { p.network.mode = "allowlist"; }, std::nullopt},
      {"network open", [](Profile& p) { p.network.mode = "open"; }, std::nullopt},
      {"network bogus", [](Profile& p) { p.network.mode = "host"; },
       "network.mode = 'host': must be 'none' (loopback only), 'allowlist' (only what a rule "
       "allows) or 'open' (all but protected ranges)"},
      {"network rules",
       [](Profile& p) {
         p.network.rules = {"deny tcp 192.0.2.0/24 443", "allow udp ::/0 53", "allow any 10.1.2.3"};
       },
       std::nullopt},
      {"network rule bad cidr",
       [](Profile& p) {
         p.network.rules = {"deny tcp 192.0.2.0/24 443", "allow tcp 10.0.0.1/8 80"};
       },
       "network.rules[1]: " + NetRule::parse("allow tcp 10.0.0.1/8 80").error().message()},
      {"network rule no verb", [](Profile& p) { p.network.rules = {"tcp 10.0.0.0/8"}; },
       "network.rules[0]: " + NetRule::parse("tcp 10.0.0.0/8").error().message()},
      {"network too many rules",
       [](Profile& p) { p.network.rules.assign(1025, "deny tcp 192.0.2.0/24 443"); },
       "network.rules: 1025 rules, more than the 1024 a sandbox holds"},
      {"audit all off",
       [](Profile& p) {
         p.audit = {false, false, false, false};
       },
       std::nullopt},
      {"image absolute", [](Profile& p) { p.filesystem.image = "/srv/rootfs"; }, std::nullopt},
      {"image store name", [](Profile& p) { p.filesystem.image = "data-science"; }, std::nullopt},
      {"image relative path", [](Profile& p) { p.filesystem.image = "srv/rootfs"; },
       "filesystem.image = 'srv/rootfs': neither an absolute path nor an image name: an image "
       "name has only lowercase letters, digits, '.', '_' and '-'"},
      {"image dot name", [](Profile& p) { p.filesystem.image = ".."; },
       "filesystem.image = '..': neither an absolute path nor an image name: an image name "
       "starts with a letter or digit"},
      {"image root", [](Profile& p) { p.filesystem.image = "//"; },
       "filesystem.image = '//': must not be '/' (that is the whole host)"},
      {"image dotdot", [](Profile& p) { p.filesystem.image = "/srv/.."; },
       "filesystem.image = '/srv/..': must not contain '..'"},
      {"ro path with dots in a name", [](Profile& p) { p.filesystem.readonly_paths = {"/a..b/c"}; },
       std::nullopt},
      {"ro relative",
       [](Profile& p) {
         p.filesystem.readonly_paths = {"/ok", "data"};
       },
       "filesystem.readonly_paths[1] = 'data': must be an absolute path"},
      {"ro nul", [](Profile& p) { p.filesystem.readonly_paths = {std::string("/a\0b", 4)}; },
       "filesystem.readonly_paths[0] = '/a\0b': contains a NUL byte"s},
      {"ro twice",
       [](Profile& p) {
         p.filesystem.readonly_paths = {"/a", "/a"};
       },
       "filesystem.readonly_paths[1] = '/a': listed twice"},
      {"seccomp ok",
       [](Profile& p) {
         p.seccomp.allow = {"io_uring_setup", "ptrace"};
       },
       std::nullopt},
      {"seccomp dash", [](Profile& p) { p.seccomp.deny = {"open-at"}; },
       "seccomp.deny[0] = 'open-at': must be a syscall name of lowercase letters, digits and '_'"},
      {"seccomp both",
       [](Profile& p) {
         p.seccomp.allow = {"ptrace"};
         p.seccomp.deny = {"ptrace"};
       },
       "seccomp.deny[0] = 'ptrace': also in seccomp.allow; pick one"},
      {"env ok",
       [](Profile& p) {
         p.env = {{"_A1", "x"}, {"PATH", "/usr/bin"}};
       },
       std::nullopt},
      {"env digit",
       [](Profile& p) {
         p.env = {{"1A", "x"}};
       },
       "env: '1A' is not a variable name (letters, digits and '_', not starting with a digit)"},
      {"env equals",
       [](Profile& p) {
         p.env = {{"A=B", "x"}};
       },
       "env: 'A=B' is not a variable name (letters, digits and '_', not starting with a digit)"},
      {"env preload",
       [](Profile& p) {
         p.env = {{"LD_PRELOAD", "/x.so"}};
       },
       "env.LD_PRELOAD: refused: the dynamic loader would inject it into every interpreter in "
       "the sandbox"},
      {"env library path",
       [](Profile& p) {
         p.env = {{"LD_LIBRARY_PATH", "/x"}};
       },
       "env.LD_LIBRARY_PATH: refused: the dynamic loader would inject it into every interpreter "
       "in the sandbox"},
      {"env nul",
       [](Profile& p) {
         p.env = {{"A", std::string("x\0y", 3)}};
       },
       "env.A: the value contains a NUL byte"},
  };
  for (const Case& c : cases) {
    Profile p = named();
    c.change(p);
    auto r = validate(p);
    if (!c.error) {
      EXPECT_TRUE(r.has_value()) << c.what << ": " << r.error().message();
    } else {
      ASSERT_FALSE(r.has_value()) << c.what;
      EXPECT_EQ(r.error().message(), "profile 't': " + *c.error) << c.what;
    }
  }
}

TEST(PolicyValidate, MicrovmTableAtAndPastItsBounds) {
  const std::vector<Case> cases = {
      {"isolation short", [](Profile& p) { p.isolation = "microvm"; }, std::nullopt},
      {"isolation dotted", [](Profile& p) { p.isolation = "airlock.isolation.microvm"; },
       std::nullopt},
      {"offered as a choice",
       [](Profile& p) {
         p.isolation_choices = {"gvisor", "microvm"};
       },
       std::nullopt},
      {"qemu elsewhere", [](Profile& p) { p.microvm.qemu = "/opt/qemu/bin/qemu"; }, std::nullopt},
      {"qemu relative", [](Profile& p) { p.microvm.qemu = "qemu-system-x86_64"; },
       "microvm.qemu = 'qemu-system-x86_64': must be an absolute path"},
      {"qemu dotdot", [](Profile& p) { p.microvm.qemu = "/usr/../tmp/qemu"; },
       "microvm.qemu = '/usr/../tmp/qemu': must not contain '..'"},
      {"accel kvm", [](Profile& p) { p.microvm.accel = "kvm"; }, std::nullopt},
      {"accel tcg", [](Profile& p) { p.microvm.accel = "tcg"; }, std::nullopt},
      {"accel upper case", [](Profile& p) { p.microvm.accel = "KVM"; },
       "microvm.accel = 'KVM': must be 'kvm', 'tcg' or 'auto' (`airlock doctor` says which work "
       "on this host)"},
      {"accel empty", [](Profile& p) { p.microvm.accel = ""; },
       "microvm.accel = '': must be 'kvm', 'tcg' or 'auto' (`airlock doctor` says which work on "
       "this host)"},
      {"vcpus 1", [](Profile& p) { p.microvm.vcpus = 1; }, std::nullopt},
      {"vcpus 64", [](Profile& p) { p.microvm.vcpus = 64; }, std::nullopt},
      {"vcpus 65", [](Profile& p) { p.microvm.vcpus = 65; },
       "microvm.vcpus = 65: must be at most 64"},
      {"memory 128", [](Profile& p) { p.microvm.memory_mb = 128; }, std::nullopt},
      {"memory 1 TiB", [](Profile& p) { p.microvm.memory_mb = 1048576; }, std::nullopt},
      {"memory 127", [](Profile& p) { p.microvm.memory_mb = 127; },
       "microvm.memory_mb = 127: must be 0 (limits.memory_mb) or 128 to 1048576"},
      {"memory 1 TiB + 1", [](Profile& p) { p.microvm.memory_mb = 1048577; },
       "microvm.memory_mb = 1048577: must be 0 (limits.memory_mb) or 128 to 1048576"},
      {"kernel absolute", [](Profile& p) { p.microvm.kernel = "/boot/vmlinuz-6.1.0-18-amd64"; },
       std::nullopt},
      {"kernel relative", [](Profile& p) { p.microvm.kernel = "vmlinuz"; },
       "microvm.kernel = 'vmlinuz': must be an absolute path (or '' for the newest "
       "/boot/vmlinuz-*)"},
      {"kernel root", [](Profile& p) { p.microvm.kernel = "/"; },
       "microvm.kernel = '/': must not be '/' (that is the whole host) (or '' for the newest "
       "/boot/vmlinuz-*)"},
      {"cache elsewhere", [](Profile& p) { p.microvm.cache_dir = "/srv/airlock/vm"; },
       std::nullopt},
      {"cache empty", [](Profile& p) { p.microvm.cache_dir = ""; },
       "microvm.cache_dir = '': must be an absolute path"},
      {"cache relative", [](Profile& p) { p.microvm.cache_dir = "cache"; },
       "microvm.cache_dir = 'cache': must be an absolute path"},
      {"boot 4", [](Profile& p) { p.microvm.boot_timeout_s = 4; },
       "microvm.boot_timeout_s = 4: must be at least 5"},
      {"boot 5", [](Profile& p) { p.microvm.boot_timeout_s = 5; }, std::nullopt},
      {"boot 600", [](Profile& p) { p.microvm.boot_timeout_s = 600; }, std::nullopt},
      {"boot 601", [](Profile& p) { p.microvm.boot_timeout_s = 601; },
       "microvm.boot_timeout_s = 601: must be at most 600"},
  };
  for (const Case& c : cases) {
    Profile p = named();
    c.change(p);
    auto r = validate(p);
    if (!c.error) {
      EXPECT_TRUE(r.has_value()) << c.what << ": " << r.error().message();
    } else {
      ASSERT_FALSE(r.has_value()) << c.what;
      EXPECT_EQ(r.error().message(), "profile 't': " + *c.error) << c.what;
    }
  }
}

TEST(PolicyValidate, MicrovmZerosResolveFromTheLimits) {
  Microvm m;
  EXPECT_EQ(m.vcpusFor(1), 1u);  // never less than one CPU
  EXPECT_EQ(m.vcpusFor(100), 1u);
  EXPECT_EQ(m.vcpusFor(101), 2u);  // rounded up
  EXPECT_EQ(m.vcpusFor(250), 3u);
  EXPECT_EQ(m.vcpusFor(6400), 64u);
  EXPECT_EQ(m.memoryMbFor(1024), 1024u);
  EXPECT_EQ(m.memoryMbFor(64), 128u) << "a guest needs 128 MiB to boot; the cgroup keeps the limit";
  m.vcpus = 3;
  m.memory_mb = 512;
  EXPECT_EQ(m.vcpusFor(100), 3u);  // set explicitly: the limits do not matter
  EXPECT_EQ(m.memoryMbFor(4096), 512u);
}

TEST(PolicyValidate, UnnamedProfileHasNoPrefix) {
  Profile p;
  p.limits.pids = 1;
  EXPECT_EQ(validate(p).error().message(), "limits.pids = 1: must be at least 8");
}

TEST(PolicyValidate, CapabilityNamesMatchTheKernelHeader) {
  EXPECT_EQ(capabilityNumber("CAP_CHOWN"), CAP_CHOWN);
  EXPECT_EQ(capabilityNumber("CAP_NET_RAW"), CAP_NET_RAW);
  EXPECT_EQ(capabilityNumber("CAP_SYS_ADMIN"), CAP_SYS_ADMIN);
  EXPECT_EQ(capabilityNumber("CAP_BPF"), CAP_BPF);
  EXPECT_EQ(capabilityNumber("CAP_CHECKPOINT_RESTORE"), CAP_LAST_CAP);
  EXPECT_EQ(capabilityNumber("CAP_NOPE"), -1);
  EXPECT_EQ(capabilityNumber("cap_chown"), -1);
}

TEST(PolicyRelaxations, ListsEveryLooseningOnce) {
  Profile p = named();
  p.user = "root";
  p.capabilities = {"CAP_CHOWN", "CAP_NET_RAW"};
  p.seccomp.allow = {"ptrace"};
  p.seccomp.deny = {"socket"};  // tightening: not listed
  p.landlock = false;
  p.filesystem.image = "/srv/rootfs";
  p.filesystem.readonly_paths = {"/opt/models"};
  p.limits.memory_mb = 4096;
  p.limits.timeout_s = 5;  // tighter: not listed
  p.limits.cpu_percent = 200;
  p.env = {{"A", "b"}};
  p.network.rules = {"deny tcp 192.0.2.0/24 443", "allow tcp 198.51.100.7 80"};
  p.audit.exec = false;
  p.audit.network = false;
  p.audit.syscalls = true;  // more auditing: not listed
  EXPECT_EQ(relaxations(p),
            (std::vector<std::string>{
                "profile 't': user = 'root': code runs as uid 0 inside the sandbox",
                "profile 't': capabilities: CAP_CHOWN is kept inside the sandbox",
                "profile 't': capabilities: CAP_NET_RAW is kept inside the sandbox",
                "profile 't': seccomp.allow: 'ptrace' is allowed beyond the "
                "default seccomp filter",
                "profile 't': landlock = false: no Landlock ruleset on top of the "
                "namespaces",
                "profile 't': filesystem.image = '/srv/rootfs': the sandbox root is "
                "this host directory instead of the read-only system view",
                "profile 't': filesystem.readonly_paths: host path '/opt/models' is "
                "visible read-only",
                "profile 't': network.rules[1] = 'allow tcp 198.51.100.7 80': allows what the "
                "network mode would refuse",
                "profile 't': audit.exec = false: execs in the sandbox are not recorded",
                "profile 't': audit.network = false: connection attempts are not recorded (the "
                "rules still apply)",
                "profile 't': limits.memory_mb = 4096: above the default 1024",
                "profile 't': limits.cpu_percent = 200: above the default 100",
            }));
}

// A client may pick a backend from isolation_choices: only a thinner wall than the profile's
// own is a loosening.
TEST(PolicyRelaxations, ChoosingNamespacesOverAStrongerIsolationIsOne) {
  Profile p = named();
  p.isolation_choices = {"gvisor"};
  EXPECT_TRUE(relaxations(p).empty()) << "namespaces profile offering gVisor: stronger";
  p.isolation = "gvisor";
  p.isolation_choices = {"namespaces"};
  EXPECT_EQ(relaxations(p),
            std::vector<std::string>{"profile 't': isolation_choices: a create request may choose "
                                     "'namespaces' instead of 'gvisor'"});
  p.isolation = "microvm";
  p.isolation_choices = {"gvisor", "namespaces"};
  EXPECT_EQ(relaxations(p),
            std::vector<std::string>{"profile 't': isolation_choices: a create request may choose "
                                     "'namespaces' instead of 'microvm'"});
}

TEST(PolicyRelaxations, EveryLimitAboveItsDefaultIsNamed) {
  Profile p;
  Limits& l = p.limits;
  l = Limits{};
  l.timeout_s += 1;
  l.memory_mb += 1;
  l.pids += 1;
  l.cpu_percent += 1;
  l.file_size_mb += 1;
  l.open_files += 1;
  l.output_bytes += 1;
  l.workspace_mb += 1;
  l.tmp_mb += 1;
  auto r = relaxations(p);
  ASSERT_EQ(r.size(), 9u);
  EXPECT_EQ(r[0], "limits.timeout_s = 31: above the default 30");
  EXPECT_EQ(r[8], "limits.tmp_mb = 129: above the default 128");
}

}  // namespace
}  // namespace airlock::policy
