// The built-in language plugins, loaded from the build tree: exact commands, and the commands
// really run on this host the way the sandbox will run them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "plugin_test_util.h"
#include "supervisor/plugin/registry.h"

namespace airlock::plugin::test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class LanguagePlugins : public ::testing::Test {
 protected:
  std::shared_ptr<Language> get(const std::string& name, const std::string& config = "{}") {
    auto l = registry_.language(name, config);
    EXPECT_TRUE(l) << l.error().message();
    return l ? *l : nullptr;
  }
  Registry registry_ = Registry::loadDirectory(testing::pluginDir(), ownedByMe());
};

const std::vector<std::string> kPythonEnv = {"PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1",
                                             "MPLBACKEND=Agg", "PYTHONIOENCODING=utf-8"};

TEST_F(LanguagePlugins, Python) {
  auto py = get("python");
  ASSERT_TRUE(py);
  EXPECT_EQ(py->fullName(), "airlock.language.python");
  EXPECT_THAT(py->aliases, ElementsAre("py", "python3"));
  EXPECT_THAT(py->extensions, ElementsAre(".py"));
  EXPECT_THAT(py->image_paths, ElementsAre("/etc/python3", "/etc/python3.11", "/etc/python3.12",
                                           "/etc/python3.13", "/etc/matplotlibrc"));
  EXPECT_EQ(py->max_inline_bytes, 100u * 1024);

  auto inl = py->buildInline("print(1)", {"a", "-b"});
  ASSERT_TRUE(inl) << inl.error().message();
  EXPECT_EQ(*inl,
            (Language::Command{{"/usr/bin/python3", "-c", "print(1)", "a", "-b"}, kPythonEnv}));
  auto file = py->buildFile("/home/user/main.py", {"x"});
  ASSERT_TRUE(file) << file.error().message();
  EXPECT_EQ(*file,
            (Language::Command{{"/usr/bin/python3", "/home/user/main.py", "x"}, kPythonEnv}));
  auto dash = py->buildFile("-m.py");
  ASSERT_TRUE(dash);
  EXPECT_THAT(dash->argv, ElementsAre("/usr/bin/python3", "./-m.py"));

  for (const char* alias : {"py", "python3", "airlock.language.python"})
    EXPECT_EQ(get(alias), py) << alias;
  auto by_file = registry_.languageForFile("/home/user/analysis.py");
  ASSERT_TRUE(by_file);
  EXPECT_EQ(*by_file, py);
}

TEST_F(LanguagePlugins, PythonInterpreterComesFromConfig) {
  auto py = get("python", R"({"interpreter": "/opt/python/bin/python3.12"})");
  ASSERT_TRUE(py);
  EXPECT_THAT(py->buildInline("pass")->argv,
              ElementsAre("/opt/python/bin/python3.12", "-c", "pass"));

  auto unknown = registry_.language("python", R"({"interp": "/x"})");
  ASSERT_FALSE(unknown);
  EXPECT_THAT(unknown.error().message(),
              HasSubstr("config of airlock.language.python: unknown key 'interp'"));
  auto relative = registry_.language("python", R"({"interpreter": "python3"})");
  ASSERT_FALSE(relative);
  EXPECT_THAT(relative.error().message(), HasSubstr("'interpreter' must be an absolute path"));
  auto garbage = registry_.language("python", "[1,2");
  ASSERT_FALSE(garbage);
  EXPECT_THAT(garbage.error().message(), HasSubstr("not a JSON object"));
}

TEST_F(LanguagePlugins, Node) {
  auto node = get("node");
  ASSERT_TRUE(node);
  EXPECT_THAT(node->aliases, ElementsAre("js", "javascript", "nodejs"));
  EXPECT_THAT(node->extensions, ElementsAre(".js", ".mjs", ".cjs"));
  EXPECT_TRUE(node->image_paths.empty());
  auto inl = node->buildInline("console.log(1)", {"--version"});
  ASSERT_TRUE(inl) << inl.error().message();
  EXPECT_EQ(*inl,
            (Language::Command{{"/usr/bin/node", "-e", "console.log(1)", "--", "--version"}, {}}));
  auto file = node->buildFile("/home/user/app.mjs", {"a"});
  ASSERT_TRUE(file);
  EXPECT_EQ(*file, (Language::Command{{"/usr/bin/node", "/home/user/app.mjs", "a"}, {}}));
  for (const char* alias : {"js", "javascript", "nodejs"}) EXPECT_EQ(get(alias), node) << alias;
  for (const char* f : {"a.js", "b.mjs", "c.cjs"}) EXPECT_EQ(*registry_.languageForFile(f), node);
}

TEST_F(LanguagePlugins, Shell) {
  auto sh = get("shell");
  ASSERT_TRUE(sh);
  std::string bash = ::access("/usr/bin/bash", X_OK) == 0 ? "/usr/bin/bash" : "/bin/sh";
  EXPECT_THAT(sh->aliases, ElementsAre("sh", "bash"));
  EXPECT_THAT(sh->extensions, ElementsAre(".sh"));
  EXPECT_THAT(sh->image_paths, ElementsAre("/etc/alternatives"));
  auto inl = sh->buildInline("echo $1", {"x", "y"});
  ASSERT_TRUE(inl) << inl.error().message();
  EXPECT_EQ(*inl, (Language::Command{{bash, "-c", "--", "echo $1", "airlock", "x", "y"}, {}}));
  auto file = sh->buildFile("/home/user/run.sh", {"1"});
  ASSERT_TRUE(file);
  EXPECT_EQ(*file, (Language::Command{{bash, "/home/user/run.sh", "1"}, {}}));
  EXPECT_EQ(get("sh"), sh);
  EXPECT_EQ(get("bash"), sh);
  EXPECT_EQ(*registry_.languageForFile("run.sh"), sh);
}

TEST_F(LanguagePlugins, RejectInlineCodeWithANulByte) {
  auto py = get("python");
  ASSERT_TRUE(py);
  auto r = py->buildInline(std::string_view("print(1)\0x", 10));
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message(), HasSubstr("inline program contains a NUL byte"));
}

// The commands do what they claim when run (outside a sandbox, with the host's interpreters).
testing::ProcResult runBuilt(const Language::Command& c) {
  return testing::runCommand(c.argv, "", 30, c.env);
}

TEST_F(LanguagePlugins, BuiltCommandsPassArgumentsThrough) {
  auto py = get("python");
  ASSERT_TRUE(py);
  auto r =
      runBuilt(*py->buildInline("import os, sys; print(sys.argv[1:], os.environ['MPLBACKEND'], "
                                "sys.flags.dont_write_bytecode)",
                                {"a b", "--c"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "['a b', '--c'] Agg 1\n");

  if (::access("/usr/bin/node", X_OK) == 0) {
    auto node = get("node");
    ASSERT_TRUE(node);
    r = runBuilt(*node->buildInline("console.log(JSON.stringify(process.argv.slice(1)))",
                                    {"--version", "x"}));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "[\"--version\",\"x\"]\n");
  }

  auto sh = get("shell");
  ASSERT_TRUE(sh);
  r = runBuilt(*sh->buildInline("echo \"$0|$1|$2|$#\"", {"a b", "-c"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "airlock|a b|-c|2\n");
  r = runBuilt(*sh->buildInline("-x", {}));  // a program, not an option
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("-x"));
}

}  // namespace
}  // namespace airlock::plugin::test
