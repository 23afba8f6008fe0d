// One loader check per test: each defect is rejected with a message naming the file and why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "plugin_test_util.h"
#include "supervisor/plugin/loader.h"
#include "supervisor/plugin/registry.h"

namespace airlock::plugin::test {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string rejectionOf(const std::string& path, const LoadOptions& options = ownedByMe()) {
  Registry registry;
  auto r = registry.loadFile(path, options);
  if (r) return "(loaded)";
  auto rejections = registry.rejections();
  EXPECT_EQ(rejections.size(), 1u);
  if (!rejections.empty()) {
    EXPECT_EQ(rejections[0].message(), r.error().message());
  }
  return r.error().message();
}

std::string prefix(const std::string& path) { return "plugin '" + path + "' rejected: "; }

TEST(PluginLoader, LoadsAGoodPluginAndReadsItsDescriptor) {
  auto plugin = loadPlugin(fixture("language-echo"), ownedByMe());
  ASSERT_TRUE(plugin) << plugin.error().message();
  EXPECT_EQ(plugin->name(), "test.language.echo");
  EXPECT_EQ(plugin->shortName(), "echo");
  EXPECT_EQ(plugin->kind(), AIRLOCK_PLUGIN_LANGUAGE);
  EXPECT_EQ(plugin->kindName(), "language");
  EXPECT_EQ(plugin->version(), "0.1.0");
  EXPECT_EQ(plugin->descriptor().abi_major, AIRLOCK_PLUGIN_ABI_MAJOR);
  EXPECT_EQ(plugin->path(), fixture("language-echo"));
  EXPECT_EQ(plugin->realPath(), std::filesystem::canonical(fixture("language-echo")).string());
}

TEST(PluginLoader, RejectsAnotherAbiMajor) {
  EXPECT_EQ(rejectionOf(fixture("wrong-abi")),
            prefix(fixture("wrong-abi")) + "ABI major 2, this airlock speaks 1");
}

TEST(PluginLoader, RejectsADescriptorSmallerThanOurs) {
  EXPECT_EQ(rejectionOf(fixture("small-struct")),
            prefix(fixture("small-struct")) + "descriptor struct_size 16 is smaller than " +
                std::to_string(sizeof(airlock_plugin_v1)) + " (ABI " +
                std::to_string(AIRLOCK_PLUGIN_ABI_MAJOR) + "." +
                std::to_string(AIRLOCK_PLUGIN_ABI_MINOR) + ")");
}

TEST(PluginLoader, RejectsAnUnknownKind) {
  EXPECT_EQ(rejectionOf(fixture("unknown-kind")),
            prefix(fixture("unknown-kind")) + "unknown kind 9");
}

TEST(PluginLoader, RejectsALibraryWithoutTheEntrySymbol) {
  EXPECT_THAT(rejectionOf(fixture("no-entry")),
              StartsWith(prefix(fixture("no-entry")) +
                         "no entry symbol 'airlock_plugin_entry_v1' (not an airlock plugin"));
}

TEST(PluginLoader, RejectsANullDescriptor) {
  EXPECT_EQ(rejectionOf(fixture("null-descriptor")),
            prefix(fixture("null-descriptor")) + "entry point returned NULL");
}

TEST(PluginLoader, RejectsANameWhoseKindDisagrees) {
  EXPECT_EQ(rejectionOf(fixture("bad-name")),
            prefix(fixture("bad-name")) +
                "name 'test.isolation.mislabeled' says kind 'isolation' but the plugin's kind "
                "is 'language'");
}

TEST(PluginLoader, RejectsAnIsolationPluginWithoutOps) {
  EXPECT_EQ(rejectionOf(fixture("null-ops")),
            prefix(fixture("null-ops")) + "isolation plugin has NULL ops");
}

TEST(PluginLoader, AcceptsAReservedKindWithoutOps) {
  auto plugin = loadPlugin(fixture("review-reserved"), ownedByMe());
  ASSERT_TRUE(plugin) << plugin.error().message();
  EXPECT_EQ(plugin->kindName(), "review");
}

TEST(PluginLoader, RejectsAMissingFileAndADirectory) {
  EXPECT_EQ(rejectionOf("/nonexistent/language-x.so"),
            prefix("/nonexistent/language-x.so") +
                "realpath '/nonexistent/language-x.so': ENOENT (No such file or directory)");
  testing::TempDir dir;
  std::filesystem::create_directory(dir.file("language-dir.so"));
  EXPECT_EQ(rejectionOf(dir.file("language-dir.so")),
            prefix(dir.file("language-dir.so")) + "not a regular file");
}

TEST(PluginLoader, RejectsAGarbageFile) {
  testing::TempDir dir;
  dir.write("language-junk.so", "not an ELF file", 0644);
  EXPECT_THAT(rejectionOf(dir.file("language-junk.so")),
              StartsWith(prefix(dir.file("language-junk.so")) + "dlopen failed: "));
}

TEST(PluginName, FollowsVendorKindName) {
  EXPECT_TRUE(validatePluginName("airlock.language.python", AIRLOCK_PLUGIN_LANGUAGE));
  EXPECT_TRUE(validatePluginName("acme.isolation.fire-cracker_2", AIRLOCK_PLUGIN_ISOLATION));
  EXPECT_TRUE(validatePluginName("example.language.awk", AIRLOCK_PLUGIN_LANGUAGE));
  struct Case {
    const char* name;
    uint32_t kind;
    const char* message;
  } cases[] = {
      {"", AIRLOCK_PLUGIN_LANGUAGE, "empty name"},
      {"python", AIRLOCK_PLUGIN_LANGUAGE,
       "name 'python' is not of the form <vendor>.language.<name>"},
      {"airlock.language", AIRLOCK_PLUGIN_LANGUAGE,
       "name 'airlock.language' is not of the form <vendor>.language.<name>"},
      {"airlock.language.python.3", AIRLOCK_PLUGIN_LANGUAGE,
       "name 'airlock.language.python.3' is not of the form <vendor>.language.<name>"},
      {"airlock.language.", AIRLOCK_PLUGIN_LANGUAGE,
       "name 'airlock.language.': each component must be [a-z0-9][a-z0-9_-]*"},
      {"Airlock.language.python", AIRLOCK_PLUGIN_LANGUAGE,
       "name 'Airlock.language.python': each component must be [a-z0-9][a-z0-9_-]*"},
      {"airlock.language.py thon", AIRLOCK_PLUGIN_LANGUAGE,
       "name 'airlock.language.py thon': each component must be [a-z0-9][a-z0-9_-]*"},
      {"airlock.python.language", AIRLOCK_PLUGIN_LANGUAGE,
       "name 'airlock.python.language' says kind 'python' but the plugin's kind is 'language'"},
      {"airlock.language.python", AIRLOCK_PLUGIN_ISOLATION,
       "name 'airlock.language.python' says kind 'language' but the plugin's kind is "
       "'isolation'"},
  };
  for (const auto& c : cases) {
    auto r = validatePluginName(c.name, c.kind);
    ASSERT_FALSE(r) << c.name;
    EXPECT_EQ(r.error().message(), c.message);
  }
}

// --- who may have written the file --------------------------------------------------------------

TEST(PluginTrust, ACopyInAPrivateDirectoryLoads) {
  testing::TempDir dir;  // mkdtemp: 0700, ours; /tmp above it is sticky
  auto path = copyFixture("language-echo", dir.path(), "language-echo.so");
  EXPECT_EQ(rejectionOf(path), "(loaded)");
}

TEST(PluginTrust, RejectsAFileWritableByGroupOrOthers) {
  testing::TempDir dir;
  auto group = copyFixture("language-echo", dir.path(), "language-group.so", 0664);
  EXPECT_EQ(rejectionOf(group), prefix(group) + "writable by group or others (mode 0664)");
  auto others = copyFixture("language-echo", dir.path(), "language-others.so", 0646);
  EXPECT_EQ(rejectionOf(others), prefix(others) + "writable by group or others (mode 0646)");
}

TEST(PluginTrust, RejectsAFileInADirectoryWritableByOthers) {
  testing::TempDir dir;
  auto path = copyFixture("language-echo", dir.path(), "language-echo.so");
  ASSERT_EQ(::chmod(dir.path().c_str(), 0775), 0);
  EXPECT_EQ(rejectionOf(path), prefix(path) + "directory '" + dir.path() +
                                   "' is writable by group or others (mode 0775)");
  // Even sticky is not enough for the plugin's own directory.
  ASSERT_EQ(::chmod(dir.path().c_str(), 01777), 0);
  EXPECT_EQ(rejectionOf(path), prefix(path) + "directory '" + dir.path() +
                                   "' is writable by group or others (mode 1777)");
}

TEST(PluginTrust, RejectsAnAncestorWritableByOthersUnlessSticky) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.file("a/b"));
  ::chmod(dir.file("a/b").c_str(), 0755);
  auto path = copyFixture("language-echo", dir.file("a/b"), "language-echo.so");
  ASSERT_EQ(::chmod(dir.file("a").c_str(), 0777), 0);
  EXPECT_EQ(rejectionOf(path), prefix(path) + "directory '" + dir.file("a") +
                                   "' is writable by group or others (mode 0777)");
  ASSERT_EQ(::chmod(dir.file("a").c_str(), 01777), 0);
  EXPECT_EQ(rejectionOf(path), "(loaded)");
}

TEST(PluginTrust, RejectsAFileNotOwnedByTheRequiredOwner) {
  testing::TempDir dir;
  auto path = copyFixture("language-echo", dir.path(), "language-echo.so");
  uid_t someone_else = geteuid() + 4242;
  EXPECT_EQ(rejectionOf(path, LoadOptions{someone_else}),
            prefix(path) + "owned by uid " + std::to_string(geteuid()) + ", must be owned by uid " +
                std::to_string(someone_else));
}

TEST(PluginTrust, RejectsAFileChownedToAnotherUid) {
  AIRLOCK_REQUIRE_ROOT();
  testing::TempDir dir;
  auto path = copyFixture("language-echo", dir.path(), "language-echo.so");
  ASSERT_EQ(::chown(path.c_str(), 12345, 12345), 0);
  EXPECT_EQ(rejectionOf(path, LoadOptions{}),
            prefix(path) + "owned by uid 12345, must be owned by root");
  // The directory, too, must belong to root (or the required owner).
  ASSERT_EQ(::chown(path.c_str(), 0, 0), 0);
  ASSERT_EQ(::chown(dir.path().c_str(), 12345, 12345), 0);
  EXPECT_EQ(rejectionOf(path, LoadOptions{}), prefix(path) + "directory '" + dir.path() +
                                                  "' is owned by uid 12345, must be owned by root");
}

TEST(PluginTrust, ChecksTheFileASymlinkPointsTo) {
  testing::TempDir plugins, elsewhere;
  auto real = copyFixture("language-echo", elsewhere.path(), "echo-real.so");
  auto link = plugins.file("language-echo.so");
  std::filesystem::create_symlink(real, link);

  // Positive control: the same link works while the target's directory is private.
  auto good = loadPlugin(link, ownedByMe());
  ASSERT_TRUE(good) << good.error().message();
  EXPECT_EQ(good->path(), link);
  EXPECT_EQ(good->realPath(), real);

  ASSERT_EQ(::chmod(elsewhere.path().c_str(), 0777), 0);
  EXPECT_EQ(rejectionOf(link), prefix(link) + "resolves to '" + real + "': directory '" +
                                   elsewhere.path() +
                                   "' is writable by group or others (mode 0777)");
}

// The file loaded is the file checked: a plugin renamed over the checked path in between (by
// whoever may write its directory) is not what runs. The control loads the new file by its
// path, showing the swap really happened.
TEST(PluginTrust, LoadsTheCheckedFileNotWhatWasRenamedOverItsPath) {
  testing::TempDir dir;
  auto path = copyFixture("language-echo", dir.path(), "language-echo.so");
  auto checked = checkTrustedFile(path, geteuid());
  ASSERT_TRUE(checked) << checked.error().message();
  auto other = copyFixture("isolation-fake", dir.path(), "swap.so");
  ASSERT_EQ(::rename(other.c_str(), path.c_str()), 0);

  auto loaded = loadTrustedPlugin(path, std::move(*checked));
  ASSERT_TRUE(loaded) << loaded.error().message();
  EXPECT_EQ(loaded->name(), "test.language.echo");
  auto swapped = loadPlugin(path, ownedByMe());
  ASSERT_TRUE(swapped) << swapped.error().message();
  EXPECT_EQ(swapped->name(), "test.isolation.fake");
}

}  // namespace
}  // namespace airlock::plugin::test
