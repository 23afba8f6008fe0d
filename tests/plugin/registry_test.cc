// The registry: directory loading, lazy lookup, duplicates, instances and their errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "plugin_test_util.h"
#include "supervisor/plugin/registry.h"

namespace airlock::plugin::test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

std::vector<std::string> rejectedPaths(Registry& registry) {
  std::vector<std::string> out;
  for (const auto& r : registry.rejections()) out.push_back(r.path);
  return out;
}

TEST(PluginRegistry, ADirectoryLoadsTheGoodAndCollectsTheBad) {
  auto registry = Registry::loadDirectory(fixtureDir(), ownedByMe());
  registry.loadAll();
  EXPECT_THAT(registry.names(), UnorderedElementsAre("test.isolation.fake", "test.language.broken",
                                                     "test.language.echo", "test.language.throws",
                                                     "test.review.reserved"));
  EXPECT_THAT(
      rejectedPaths(registry),
      UnorderedElementsAre(fixture("bad-name"), fixture("no-entry"), fixture("null-descriptor"),
                           fixture("null-ops"), fixture("small-struct"), fixture("unknown-kind"),
                           fixture("wrong-abi"), fixture("x-duplicate-echo")));
  for (const auto& r : registry.rejections()) {
    EXPECT_FALSE(r.reason.empty()) << r.path;
    EXPECT_EQ(r.message(), "plugin '" + r.path + "' rejected: " + r.reason);
  }
}

TEST(PluginRegistry, TheFirstOfTwoPluginsWithTheSameNameWins) {
  auto registry = Registry::loadDirectory(fixtureDir(), ownedByMe());
  registry.loadAll();
  auto rejections = registry.rejections();
  auto dup = std::find_if(rejections.begin(), rejections.end(),
                          [](const Rejection& r) { return r.path == fixture("x-duplicate-echo"); });
  ASSERT_NE(dup, rejections.end());
  EXPECT_EQ(dup->reason, "duplicate name 'test.language.echo', already loaded from '" +
                             fixture("language-echo") + "'");
  auto echo = registry.language("echo");
  ASSERT_TRUE(echo) << echo.error().message();
  for (const auto& p : registry.plugins())
    if (p.name() == "test.language.echo") {
      EXPECT_EQ(p.path(), fixture("language-echo"));
    }
}

TEST(PluginRegistry, LoadsOnlyTheConventionalFileWhenItMatches) {
  testing::TempDir dir;
  copyFixture("language-echo", dir.path(), "language-echo.so");
  copyFixture("isolation-fake", dir.path(), "isolation-fake.so");
  copyFixture("language-echo", dir.path(), "language-writable.so", 0666);
  copyFixture("wrong-abi", dir.path(), "zz-other.so");
  auto registry = Registry::loadDirectory(dir.path(), ownedByMe());

  auto echo = registry.language("echo");
  ASSERT_TRUE(echo) << echo.error().message();
  EXPECT_THAT(registry.names(), ElementsAre("test.language.echo"));
  EXPECT_TRUE(registry.rejections().empty());

  // An alias has no file of its own: every language-*.so is tried, nothing else.
  auto fresh = Registry::loadDirectory(dir.path(), ownedByMe());
  ASSERT_TRUE(fresh.language("ec"));
  EXPECT_THAT(fresh.names(), ElementsAre("test.language.echo"));
  EXPECT_THAT(rejectedPaths(fresh), ElementsAre(dir.file("language-writable.so")));

  ASSERT_TRUE(fresh.isolation("fake"));
  EXPECT_THAT(fresh.names(), ElementsAre("test.language.echo", "test.isolation.fake"));

  fresh.loadAll();
  EXPECT_THAT(rejectedPaths(fresh),
              ElementsAre(dir.file("language-writable.so"), dir.file("zz-other.so")));
}

TEST(PluginRegistry, FallsBackToEveryFileForUnconventionalNames) {
  testing::TempDir dir;
  copyFixture("language-echo", dir.path(), "vendor-plugin.so");
  auto registry = Registry::loadDirectory(dir.path(), ownedByMe());
  auto echo = registry.language("test.language.echo");
  ASSERT_TRUE(echo) << echo.error().message();
  EXPECT_EQ((*echo)->name(), "echo");
  EXPECT_EQ((*echo)->fullName(), "test.language.echo");
}

TEST(PluginRegistry, FindsLanguagesByNameAliasAndExtension) {
  auto registry = Registry::loadDirectory(fixtureDir(), ownedByMe());
  auto by_short = registry.language("echo");
  ASSERT_TRUE(by_short) << by_short.error().message();
  for (const char* name : {"ec", "echo-lang", "test.language.echo"}) {
    auto l = registry.language(name);
    ASSERT_TRUE(l) << name << ": " << l.error().message();
    EXPECT_EQ(l->get(), by_short->get()) << name;  // one shared instance
  }
  auto by_file = registry.languageForFile("/home/user/prog.ech");
  ASSERT_TRUE(by_file) << by_file.error().message();
  EXPECT_EQ(by_file->get(), by_short->get());
  EXPECT_THAT((*by_short)->aliases, ElementsAre("ec", "echo-lang"));
  EXPECT_THAT((*by_short)->extensions, ElementsAre(".ech"));
  EXPECT_THAT((*by_short)->image_paths, ElementsAre("/etc/hostname"));
  EXPECT_EQ((*by_short)->max_inline_bytes, 64u);
  EXPECT_TRUE((*by_short)->answersTo("ec"));
  EXPECT_FALSE((*by_short)->answersTo("fake"));
}

TEST(PluginRegistry, UnknownNamesSayWhatIsAvailableAndWhatWasRejected) {
  auto registry = Registry::loadDirectory(fixtureDir(), ownedByMe());
  auto none = registry.language("cobol");
  ASSERT_FALSE(none);
  std::string m = none.error().message();
  EXPECT_THAT(m, HasSubstr("no language plugin 'cobol' in '" + fixtureDir() + "'"));
  EXPECT_THAT(m, HasSubstr("available: "));
  EXPECT_THAT(m, HasSubstr("test.language.echo"));
  EXPECT_THAT(m, HasSubstr("plugin '" + fixture("wrong-abi") +
                           "' rejected: ABI major 2, this airlock speaks 1"));

  // A language is not an isolation backend.
  auto wrong_kind = registry.isolation("echo");
  ASSERT_FALSE(wrong_kind);
  EXPECT_THAT(wrong_kind.error().message(), HasSubstr("no isolation plugin 'echo'"));

  auto no_ext = registry.languageForFile("Makefile");
  ASSERT_FALSE(no_ext);
  EXPECT_EQ(no_ext.error().message(),
            "cannot tell the language of a file without an extension 'Makefile'");
  auto unknown_ext = registry.languageForFile("x/prog.cob");
  ASSERT_FALSE(unknown_ext);
  EXPECT_THAT(unknown_ext.error().message(),
              HasSubstr("file 'x/prog.cob': no language plugin for extension '.cob'"));
}

TEST(PluginRegistry, AMissingDirectoryIsARejectionNotACrash) {
  auto registry = Registry::loadDirectory("/nonexistent/airlock/plugins");
  auto python = registry.language("python");
  ASSERT_FALSE(python);
  EXPECT_THAT(python.error().message(),
              HasSubstr("plugin '/nonexistent/airlock/plugins' rejected: cannot list directory: "
                        "opendir '/nonexistent/airlock/plugins': ENOENT"));
}

TEST(PluginRegistry, BuildsCommandsThroughTheLanguagePlugin) {
  auto registry = Registry::loadDirectory(fixtureDir(), ownedByMe());
  auto echo = registry.language("echo");
  ASSERT_TRUE(echo) << echo.error().message();
  auto inline_cmd = (*echo)->buildInline("hello", {"a", "b c"});
  ASSERT_TRUE(inline_cmd) << inline_cmd.error().message();
  EXPECT_THAT(inline_cmd->argv, ElementsAre("/bin/echo", "hello", "a", "b c"));
  EXPECT_THAT(inline_cmd->env, ElementsAre("ECHO_CONFIG={}"));
  auto file_cmd = (*echo)->buildFile("/home/user/x.ech");
  ASSERT_TRUE(file_cmd) << file_cmd.error().message();
  EXPECT_THAT(file_cmd->argv, ElementsAre("/bin/echo", "file", "/home/user/x.ech"));
}

TEST(PluginRegistry, EachConfigGetsItsOwnInstance) {
  auto registry = Registry::loadDirectory(fixtureDir(), ownedByMe());
  auto plain = registry.language("echo");
  auto configured = registry.language("echo", R"({"level":2})");
  ASSERT_TRUE(plain && configured);
  EXPECT_NE(plain->get(), configured->get());
  EXPECT_EQ(configured->get(), registry.language("ec", R"({"level":2})")->get());
  EXPECT_THAT((*configured)->buildInline("x")->env, ElementsAre(R"(ECHO_CONFIG={"level":2})"));
}

TEST(PluginRegistry, AThrowingBuildCommandBecomesAnError) {
  auto registry = Registry::loadDirectory(fixtureDir(), ownedByMe());
  auto throws = registry.language("throws");
  ASSERT_TRUE(throws) << throws.error().message();
  auto r = (*throws)->buildInline("x");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(),
            "language plugin 'test.language.throws': build_command: boom in buildCommand: "
            "EINVAL (Invalid argument)");
  auto f = (*throws)->buildFile("/home/user/x.throw");
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().errnum(), ENOENT);
  EXPECT_EQ(f.error().message(),
            "language plugin 'test.language.throws': build_command: open '/home/user/x.throw': "
            "ENOENT (No such file or directory)");
}

TEST(PluginRegistry, AThrowingCreateBecomesAnError) {
  auto registry = Registry::loadDirectory(fixtureDir(), ownedByMe());
  auto broken = registry.language("broken");
  ASSERT_FALSE(broken);
  EXPECT_EQ(broken.error().message(),
            "plugin 'test.language.broken': create: interpreter '/nonexistent/ruby' not found: "
            "ENOENT (No such file or directory)");
  // And again: a failed create is not cached as a success.
  EXPECT_FALSE(registry.language("broken"));
}

TEST(PluginRegistry, RunsAnIsolationBackend) {
  auto registry = Registry::loadDirectory(fixtureDir(), ownedByMe());
  // The syscalls a backend adds to every sandbox's seccomp allow list loosen the policy: said
  // as a relaxation when the backend is set up, never added silently.
  ::testing::internal::CaptureStderr();
  auto backend = registry.isolation("test.isolation.fake");
  const std::string said = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(backend) << backend.error().message();
  EXPECT_EQ(said,
            "[test.isolation.fake] warning: policy relaxation: this backend adds ptrace, "
            "process_vm_readv to every sandbox's seccomp allow list\n");
  EXPECT_EQ((*backend)->name(), "fake");
  EXPECT_THAT((*backend)->extraSyscalls(), ElementsAre("ptrace", "process_vm_readv"));
  EXPECT_EQ(registry.isolation("fake")->get(), backend->get());

  airlock_sandbox_spec_v1 spec{};
  spec.struct_size = sizeof spec;
  spec.sandbox_id = "abc";
  spec.cgroup_v2_fd = spec.agent_exe_fd = spec.agent_channel_fd = -1;
  ::testing::internal::CaptureStderr();
  auto sandbox = (*backend)->start(spec);
  std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(sandbox) << sandbox.error().message();
  EXPECT_EQ(log, "[test.isolation.fake] info: starting abc with config {}\n");
  EXPECT_EQ(sandbox->pid, 4242);
  ASSERT_NE(sandbox->handle, nullptr);
  EXPECT_EQ(*static_cast<std::string*>(sandbox->handle), "abc");
  (*backend)->release(*sandbox);
  EXPECT_EQ(sandbox->handle, nullptr);

  // Info lines are dropped once the supervisor asks for warnings only.
  setPluginLogLevel(2);
  ::testing::internal::CaptureStderr();
  auto quiet = (*backend)->start(spec);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  setPluginLogLevel(1);
  ASSERT_TRUE(quiet);
  (*backend)->release(*quiet);

  spec.sandbox_id = "fail";
  auto failed = (*backend)->start(spec);
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().errnum(), EPERM);
  EXPECT_EQ(failed.error().message(),
            "isolation plugin 'test.isolation.fake': start: clone3 'fail': EPERM (Operation not "
            "permitted)");
}

TEST(PluginRegistry, InstancesOutliveTheRegistry) {
  std::shared_ptr<Language> echo;
  {
    auto registry = Registry::loadDirectory(fixtureDir(), ownedByMe());
    echo = *registry.language("echo");
  }
  auto c = echo->buildInline("still here");
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_THAT(c->argv, ElementsAre("/bin/echo", "still here"));
}

TEST(PluginRegistry, ConcurrentLookupsShareOneInstance) {
  auto registry = Registry::loadDirectory(fixtureDir(), ownedByMe());
  std::vector<Language*> seen(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < seen.size(); ++i)
    threads.emplace_back([&, i] {
      auto l = registry.language(i % 2 ? "ec" : "echo");
      seen[i] = l ? l->get() : nullptr;
      if (l) (void)(*l)->buildInline("x");
    });
  for (auto& t : threads) t.join();
  ASSERT_NE(seen[0], nullptr);
  for (auto* l : seen) EXPECT_EQ(l, seen[0]);
}

}  // namespace
}  // namespace airlock::plugin::test
