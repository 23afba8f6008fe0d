// loadFileCheckingInstalled(): a profile naming an isolation plugin, language, reviewer plugin or
// image the host has not installed is an error at the position that names it; and
// relaxationSummary(), the one line `airlock run` says instead of every relaxation.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "airlock/policy/installed.h"
#include "airlock/policy/relaxation_summary.h"

namespace airlock::policy {
namespace {

// A policy file in a fresh temporary directory, removed with it.
class PolicyFile {
 public:
  explicit PolicyFile(const std::string& text) {
    char dir[] = "/tmp/airlock-policy-installed.XXXXXX";
    EXPECT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/p.toml";
    std::ofstream(path_) << text;
  }
  ~PolicyFile() {
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string dir_, path_;
};

Installed host() {
  Installed i;
  i.plugin_dir = "/opt/airlock/plugins";
  i.isolation = {"namespaces", "airlock.isolation.namespaces", "gvisor",
                 "airlock.isolation.gvisor"};
  i.isolation_short = {"namespaces", "gvisor"};
  i.languages = {"python", "airlock.language.python", "py", "node", "shell", "sh"};
  i.languages_short = {"python", "node", "shell"};
  i.reviewers = {"example", "airlock.review.example"};
  i.reviewers_short = {"example"};
  i.image_problem = [](const std::string& name) -> std::string {
    return name == "debian" ? "" : "filesystem.image: no image named '" + name + "' in the store";
  };
  return i;
}

std::string errorOf(const std::string& text) {
  PolicyFile f(text);
  auto p = loadFileCheckingInstalled(f.path(), host());
  if (p) return "";
  std::string m = p.error().message();
  // The temporary directory differs per run: keep what follows the file name.
  auto at = m.find("p.toml:");
  return at == std::string::npos ? m : m.substr(at);
}

TEST(PolicyInstalled, InstalledNamesPass) {
  EXPECT_EQ(
      errorOf("schema = 1\n[profiles.default]\nisolation = \"gvisor\"\n"
              "languages = [\"py\", \"shell\"]\n[profiles.default.filesystem]\n"
              "image = \"debian\"\n[profiles.default.review]\nchain = [\"plugin:example\"]\n"),
      "");
}

TEST(PolicyInstalled, MissingIsolationPluginIsRefusedWhereItIsNamed) {
  EXPECT_EQ(errorOf("schema = 1\n[profiles.default]\nisolation = \"gvisr\"\n"),
            "p.toml:3:13: profile 'default': isolation = 'gvisr': isolation plugin not installed "
            "in '/opt/airlock/plugins' (did you mean 'gvisor'?; installed: namespaces, gvisor)");
  EXPECT_NE(errorOf("schema = 1\n[profiles.default]\nisolation = \"microvm\"\n")
                .find("p.toml:3:13: profile 'default': isolation = 'microvm': isolation plugin "
                      "not installed"),
            std::string::npos);
}

TEST(PolicyInstalled, MissingLanguageIsRefused) {
  const std::string e =
      errorOf("schema = 1\n[profiles.default]\nlanguages = [\"python\", \"ruby\"]\n");
  EXPECT_TRUE(e.starts_with("p.toml:3:")) << e;
  EXPECT_NE(e.find("languages[1] = 'ruby': language plugin not installed"), std::string::npos) << e;
  EXPECT_NE(e.find("installed: python, node, shell"), std::string::npos) << e;
}

TEST(PolicyInstalled, MissingReviewerPluginIsRefused) {
  const std::string e =
      errorOf("schema = 1\n[profiles.default.review]\nchain = [\"limits\", \"plugin:exampel\"]\n");
  EXPECT_TRUE(e.starts_with("p.toml:3:")) << e;
  EXPECT_NE(e.find("review.chain[1] = 'plugin:exampel': review plugin not installed"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("did you mean 'plugin:example'?"), std::string::npos) << e;
}

TEST(PolicyInstalled, MissingImageIsRefused) {
  const std::string e = errorOf("schema = 1\n[profiles.default.filesystem]\nimage = \"ubuntu\"\n");
  EXPECT_EQ(e,
            "p.toml:3:9: profile 'default': filesystem.image: no image named 'ubuntu' in the "
            "store");
}

TEST(PolicyInstalled, InheritedNameIsReportedWhereTheBaseWritesIt) {
  const std::string e = errorOf(
      "schema = 1\n[profiles.default]\nisolation = \"gvisr\"\n[profiles.child]\n"
      "extends = \"default\"\n");
  EXPECT_TRUE(e.starts_with("p.toml:3:13: profile '")) << e;
}

TEST(RelaxationSummary, OneLineWithTheKeys) {
  EXPECT_EQ(relaxationSummary({}), "");
  EXPECT_EQ(relaxationSummary({"profile 'd': landlock = false"}),
            "policy relaxations: 1 (landlock)");
  EXPECT_EQ(relaxationSummary({"profile 'ds': packages.allow = [a, b]: sandboxes may install",
                               "profile 'ds': limits.timeout_s = 600: above the default 30",
                               "profile 'ds': limits.memory_mb = 4096: above the default 1024",
                               "profile 'ds': limits.pids = 512: above the default 256",
                               "profile 'ds': limits.tmp_mb = 512: above the default 128"}),
            "policy relaxations: 5 (packages.allow, limits.timeout_s, limits.memory_mb, "
            "limits.pids, …)");
}

}  // namespace
}  // namespace airlock::policy
