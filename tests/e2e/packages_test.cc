// pip and npm inside sandboxes with network "none", through the supervisor's package proxy
// (docs/packages.md): a real index and registry, built by this test and served over HTTP in a
// network namespace this test makes, real pip and npm in real sandboxes, and the proxy's audit
// records.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "netns_server.h"
#include "serve_harness.h"
#include "test_support.h"

namespace airlock::testing {
namespace {

using nlohmann::json;

class Packages : public ::testing::Test {
 protected:
  void SetUp() override {
    AIRLOCK_REQUIRE_ROOT();
    before_ = snapshotHostResources();
    std::filesystem::create_directories(dir_.file("index"));
    std::string why;
    server_ = NetnsServer::start({"/usr/bin/python3", "-m", "http.server", "8080", "--bind",
                                  "{addr}", "--directory", dir_.file("index")},
                                 8080, &why);
    ASSERT_NE(server_, nullptr) << why;
    auto made = runCommand(
        {"/usr/bin/python3", AIRLOCK_PACKAGE_INDEX, dir_.file("index"), server_->url("")});
    ASSERT_EQ(made.exit_code, 0) << made.err;
    manifest_ = json::parse(readFile(dir_.file("index/manifest.json")));
    writePolicy("p.toml",
                R"(allow = ["tinypkg<2", "tinynpm", "evil*", "corrupt", "tinysdist"]
deny = ["evil*"])");
  }
  void TearDown() override {
    if (IsSkipped()) return;
    server_.reset();
    EXPECT_EQ(snapshotHostResources(), before_) << "a sandbox left something on the host";
  }

  void writePolicy(const std::string& name, const std::string& packages_table) {
    dir_.write(name, "schema = 1\n[audit]\nlog = \"" + dir_.file("audit.jsonl") +
                         "\"\n[packages]\npypi_index = \"" + server_->url("/simple/") +
                         "\"\nnpm_registry = \"" + server_->url("/npm/") + "\"\ncache_dir = \"" +
                         dir_.file("cache") +
                         // Short, so that once the upstream is gone the cached pages are used
                         // before pip gives up (a dead namespace's address times out, it never
                         // refuses).
                         "\"\ntimeout_s = 3\n[profiles.default.packages]\n" + packages_table +
                         "\n");
  }

  // `airlock run --json` of a shell command under a policy: the record. A microVM without KVM
  // emulates every instruction: pip alone can take the profile's 30 s there.
  json shell(const std::string& command, const std::string& policy = "p.toml") {
    auto r = runAirlock({"run", "--local", "--json", "--policy", dir_.file(policy), "--timeout",
                         underMicrovm() ? "150" : "30", "--lang", "shell", "-c", command},
                        "", 180);
    EXPECT_FALSE(r.timed_out);
    auto j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "not JSON: " << r.out << "\nstderr: " << r.err;
    return j.is_discarded() ? json::object() : j;
  }

  // The audit log's "package" records.
  std::vector<json> packageRecords() {
    std::vector<json> out;
    std::ifstream in(dir_.file("audit.jsonl"));
    for (std::string line; std::getline(in, line);) {
      auto j = json::parse(line, nullptr, false);
      if (!j.is_discarded() && j.value("type", "") == "package") out.push_back(j);
    }
    return out;
  }

  static std::string output(const json& j) { return j.value("stdout", "") + j.value("stderr", ""); }

  TempDir dir_;
  HostResources before_;
  std::unique_ptr<NetnsServer> server_;
  json manifest_;
};

TEST_F(Packages, PipInstallsAnAllowedVersionAndItImportsWithNetworkNone) {
  auto j = shell(
      "pip install -q tinypkg && python3 -c 'import tinypkg; print(tinypkg.VALUE)' && "
      "test -d ~/.local/lib && echo user-site");
  ASSERT_EQ(j["airlock_exit_code"], 0) << j.dump(2);
  // 2.0 is the newest, but the rule "tinypkg<2" leaves 1.0.
  EXPECT_EQ(j["stdout"], "tiny-1.0\nuser-site\n") << j.dump(2);
  auto records = packageRecords();
  ASSERT_FALSE(records.empty());
  const json& r = records.back();
  EXPECT_EQ(r["ecosystem"], "pypi");
  EXPECT_EQ(r["package"], "tinypkg");
  EXPECT_EQ(r["version"], "1.0");
  EXPECT_EQ(r["verdict"], "allowed");
  EXPECT_EQ(r["sha256"], manifest_["tinypkg-1.0-py3-none-any.whl"]["sha256"]);
  EXPECT_EQ(r["bytes"], manifest_["tinypkg-1.0-py3-none-any.whl"]["bytes"]);
  EXPECT_EQ(r["cached"], false);
  EXPECT_FALSE(r["sandbox"].is_null());
}

// The shipped data-science profile as it is (network "none"), its [packages] pointed at this
// test's index.
TEST_F(Packages, TheShippedDataScienceProfileInstallsWithNetworkNone) {
  std::string ds = readFile(sourceDir() + "/policy/examples/data-science.toml");
  ds += "\n[packages]\npypi_index = \"" + server_->url("/simple/") + "\"\ncache_dir = \"" +
        dir_.file("cache") + "\"\n";
  dir_.write("ds.toml", ds);
  auto r = runAirlock({"run", "--local", "--json", "--policy", dir_.file("ds.toml"), "--profile",
                       "data-science", "--lang", "shell", "-c",
                       "pip install -q tqdm && python3 -c 'import tqdm; print(tqdm.VALUE)'"},
                      "", 180);
  auto j = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out << r.err;
  ASSERT_EQ(j["airlock_exit_code"], 0) << j.dump(2);
  EXPECT_EQ(j["stdout"], "stand-in tqdm\n");
}

TEST_F(Packages, TheSandboxReachesTheProxyAndNothingElse) {
  // Positive control: the host reaches the index (the probe below would see it if it could).
  auto host = runCommand({"/usr/bin/python3", "-c",
                          "import urllib.request; print(urllib.request.urlopen('" +
                              server_->url("/simple/tinypkg/") + "', timeout=5).status)"});
  ASSERT_EQ(host.exit_code, 0) << host.err;
  EXPECT_EQ(host.out, "200\n");
  auto j = shell(
      "python3 - <<'EOF'\n"
      "import urllib.request\n"
      "try:\n"
      "    urllib.request.urlopen('" +
      server_->url("/simple/tinypkg/") +
      "', timeout=3)\n"
      "    print('upstream reachable')\n"
      "except Exception as e:\n"
      "    print('upstream unreachable')\n"
      "import os\n"
      "print(urllib.request.urlopen(os.environ['PIP_INDEX_URL'] + 'tinypkg/', "
      "timeout=5).status)\n"
      "EOF");
  ASSERT_EQ(j["airlock_exit_code"], 0) << j.dump(2);
  EXPECT_EQ(j["stdout"], "upstream unreachable\n200\n") << j.dump(2);
}

TEST_F(Packages, ADeniedPackageFailsNamingTheRule) {
  auto j = shell("pip install evilpkg");
  EXPECT_NE(j["exit_code"], 0) << j.dump(2);
  EXPECT_NE(output(j).find("profiles.default.packages.deny[0] = 'evil*'"), std::string::npos)
      << output(j);
  bool recorded = false;
  for (const json& r : packageRecords())
    recorded |= r["package"] == "evilpkg" && r["verdict"] == "denied" &&
                r["rule"].get<std::string>().find("deny[0]") != std::string::npos;
  EXPECT_TRUE(recorded);
}

TEST_F(Packages, ACorruptWheelAndAnSdistAreRefusedWithTheirReasons) {
  auto corrupt = shell("pip install corrupt");
  EXPECT_NE(corrupt["exit_code"], 0) << corrupt.dump(2);
  EXPECT_NE(output(corrupt).find("sha256"), std::string::npos) << output(corrupt);
  // Nothing with the corrupt file's content was kept.
  const std::string bad = manifest_["corrupt-1.0-py3-none-any.whl"]["sha256"];
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir_.file("cache")))
    EXPECT_EQ(e.path().string().find(bad), std::string::npos) << e.path();
  auto sdist = shell("pip install tinysdist");
  EXPECT_NE(sdist["exit_code"], 0) << sdist.dump(2);
  EXPECT_NE(output(sdist).find("sdist"), std::string::npos) << output(sdist);
}

TEST_F(Packages, NpmInstallsAnAllowedPackageAndRefusesADeniedOne) {
  auto j = shell(
      "npm install --loglevel=error tinynpm >/dev/null && "
      "node -e \"console.log(require('tinynpm').value)\"");
  ASSERT_EQ(j["airlock_exit_code"], 0) << j.dump(2);
  EXPECT_EQ(j["stdout"], "npm-ok\n") << j.dump(2);
  auto denied = shell("npm install evilnpm");
  EXPECT_NE(denied["exit_code"], 0) << denied.dump(2);
  EXPECT_NE(output(denied).find("deny[0]"), std::string::npos) << output(denied);
}

TEST_F(Packages, ASecondSandboxInstallsFromTheCacheWithTheUpstreamGone) {
  auto first = shell("pip install -q tinypkg");
  ASSERT_EQ(first["airlock_exit_code"], 0) << first.dump(2);
  server_->stopServer();  // the index is gone: only the proxy's cache has it now
  auto second =
      shell("pip install -q tinypkg && python3 -c 'import tinypkg; print(tinypkg.VALUE)'");
  ASSERT_EQ(second["airlock_exit_code"], 0) << second.dump(2);
  EXPECT_EQ(second["stdout"], "tiny-1.0\n");
  auto records = packageRecords();
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records.back()["cached"], true) << records.back().dump();
}

// A code context of `airlock serve`: a cell installs, the next imports, in the same interpreter
// (the user site directory did not exist when it started).
TEST_F(Packages, ACellInstallsAndTheNextCellOfTheContextImports) {
  const std::string policy = readFile(dir_.file("p.toml"));
  Serve serve(dir_, policy.substr(policy.find('\n') + 1));
  auto created = http(serve.sock(), "POST", "/v1/sandboxes", R"({"language": "python"})");
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = Json::parse(created.body)["id"];
  auto cell = [&](const std::string& code) {
    auto r = http(serve.sock(), "POST", "/v1/sandboxes/" + id + "/code",
                  Json{{"code", code}, {"stream", false}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return Json::parse(r.body, nullptr, false);
  };
  auto before = cell("import importlib.util\nimportlib.util.find_spec('tinypkg') is None");
  EXPECT_EQ(before["results"][0]["text/plain"], "True") << before.dump();
  auto install = cell(
      "import subprocess, sys\n"
      "subprocess.run([sys.executable, '-m', 'pip', 'install', '-q', 'tinypkg'], check=True)");
  EXPECT_EQ(install["status"], "ok") << install.dump();
  auto imported = cell("import tinypkg\ntinypkg.VALUE");
  EXPECT_EQ(imported["status"], "ok") << imported.dump();
  EXPECT_EQ(imported["results"][0]["text/plain"], "'tiny-1.0'") << imported.dump();
  EXPECT_EQ(http(serve.sock(), "DELETE", "/v1/sandboxes/" + id).status, 204);
}

// IPython's %pip in a context: plain pip of the context's interpreter, through the proxy.
TEST_F(Packages, PipMagicInstallsAndTheNextCellImports) {
  const std::string policy = readFile(dir_.file("p.toml"));
  Serve serve(dir_, policy.substr(policy.find('\n') + 1));
  auto created = http(serve.sock(), "POST", "/v1/sandboxes", R"({"language": "python"})");
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id = Json::parse(created.body)["id"];
  auto ctx =
      http(serve.sock(), "POST", "/v1/sandboxes/" + id + "/contexts", R"({"language": "python"})");
  ASSERT_EQ(ctx.status, 201) << ctx.body;
  const std::string context_id = Json::parse(ctx.body)["context_id"];
  auto cell = [&](const std::string& code) {
    auto r = http(serve.sock(), "POST", "/v1/sandboxes/" + id + "/code",
                  Json{{"code", code}, {"context_id", context_id}, {"stream", false}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return Json::parse(r.body, nullptr, false);
  };
  auto install = cell("%pip install -q tinypkg");
  EXPECT_EQ(install["status"], "ok") << install.dump();
  auto imported = cell("import tinypkg\ntinypkg.VALUE");
  EXPECT_EQ(imported["status"], "ok") << imported.dump();
  EXPECT_EQ(imported["results"][0]["text/plain"], "'tiny-1.0'") << imported.dump();
  EXPECT_EQ(http(serve.sock(), "DELETE", "/v1/sandboxes/" + id).status, 204);
}

TEST_F(Packages, AProfileWithoutPackagesHasNoProxy) {
  writePolicy("off.toml", "allow = []");
  auto j = shell(
      "echo ${PIP_INDEX_URL:-none}; pip install --timeout 2 --retries 0 tinypkg "
      ">/dev/null 2>&1 && echo installed || echo refused",
      "off.toml");
  ASSERT_EQ(j["airlock_exit_code"], 0) << j.dump(2);
  EXPECT_EQ(j["stdout"], "none\nrefused\n") << j.dump(2);
}

}  // namespace
}  // namespace airlock::testing
