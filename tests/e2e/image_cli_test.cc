// airlock image build|import|ls|inspect|rm and profiles that name a store image, end to end:
// the binary from the build tree, real mmdebstrap, skopeo and umoci, real sandboxes running the
// pandas example. The spec-built image (python3, python3-pandas) is the slow part, so it is
// made once, in a store of the tests' own under the build tree (never the host's), and kept:
// ctest runs each case in a process of its own, and later runs reuse it. Tests that change a
// store (import, rm, failures) use a temporary one or remove what they add.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <archive.h>
#include <archive_entry.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "airlock/policy/keys.h"
#include "test_support.h"

namespace airlock::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

// The example every image must run: pandas, a CSV copied in, a printed summary.
const std::vector<std::string> kPandasRun = {
    "--file", sourceDir() + "/examples/data/transactions.csv:transactions.csv",
    sourceDir() + "/examples/summarize_spending.py"};

class SharedStore {
 public:
  static SharedStore& get() {
    static SharedStore s;
    return s;
  }
  const std::string& root() const { return root_; }
  std::string env() const { return "AIRLOCK_IMAGE_STORE=" + root_; }
  // The spec-built image, built at the first call; "" when the build failed (with `error`).
  const std::string& specImage() {
    if (!built_) build();
    return spec_image_;
  }
  std::string error;
  double build_seconds = 0;

 private:
  SharedStore() { root_ = buildDir() + "/tests/image-e2e-store"; }
  void build() {
    built_ = true;
    // Built before (this run or an earlier one): the same spec gives the same image.
    auto known = runCommand({airlockBinary(), "image", "inspect", "pandas-spec", "--store", root_});
    if (known.exit_code == 0) {
      spec_image_ = "pandas-spec";
      return;
    }
    dir_.write("pandas.toml",
               "name = \"pandas-spec\"\n[debian]\npackages = [\"python3\", \"python3-pandas\"]\n");
    const auto t0 = Clock::now();
    auto r = runCommand(
        {airlockBinary(), "image", "build", dir_.file("pandas.toml"), "--store", root_}, "", 900);
    build_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    std::cerr << "[ timing  ] airlock image build (python3, python3-pandas): " << build_seconds
              << " s\n";
    if (r.exit_code != 0) {
      error = "image build failed (" + std::to_string(r.exit_code) + "): " + r.err;
      return;
    }
    spec_image_ = "pandas-spec";
  }
  TempDir dir_;
  std::string root_;
  bool built_ = false;
  std::string spec_image_;
};

class ImageCli : public ::testing::Test {
 protected:
  void SetUp() override { AIRLOCK_REQUIRE_ROOT(); }

  ProcResult airlock(std::vector<std::string> args, int timeout_s = 300) {
    args.insert(args.begin(), airlockBinary());
    return runCommand(args, "", timeout_s, {SharedStore::get().env()});
  }
  // A policy whose profile "img" uses `image` as its root.
  std::string policyFor(const std::string& image) {
    dir_.write("policy.toml",
               "schema = 1\ndefault_profile = \"img\"\n[profiles.img.filesystem]\nimage = \"" +
                   image + "\"\n[profiles.img.limits]\ntimeout_s = 300\n");
    return dir_.file("policy.toml");
  }
  void expectPandasSummary(const ProcResult& r) {
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("transactions,"), std::string::npos) << r.out << r.err;
    EXPECT_NE(r.out.find("share_%"), std::string::npos) << r.out;
  }
  TempDir dir_;
};

TEST_F(ImageCli, SpecBuiltImageRunsThePandasExample) {
  auto& store = SharedStore::get();
  ASSERT_NE(store.specImage(), "") << store.error;
  const std::string policy = policyFor(store.specImage());
  auto check = airlock({"policy", "check", policy});
  EXPECT_EQ(check.exit_code, 0) << check.err;

  std::vector<std::string> run = {"run", "--policy", policy, "--profile", "img"};
  run.insert(run.end(), kPandasRun.begin(), kPandasRun.end());
  const auto t0 = Clock::now();
  expectPandasSummary(airlock(run));
  std::cerr << "[ timing  ] pandas example in the spec-built image: "
            << std::chrono::duration<double>(Clock::now() - t0).count() << " s\n";

  // The root is the image's, not the host's view: its own /usr (the host's has node, the image
  // has not), its python, its user 1000, read-only.
  auto probe =
      airlock({"run", "--policy", policy, "--profile", "img", "--lang", "shell", "-c",
               "test ! -e /usr/bin/node && id -un && "
               "python3 -c 'import pandas, sys; print(sys.executable, pandas.__version__)' "
               "&& touch /usr/x 2>/dev/null || echo read-only"});
  EXPECT_EQ(probe.exit_code, 0) << probe.err;
  EXPECT_NE(probe.out.find("user\n/usr/bin/python3 "), std::string::npos) << probe.out;
  EXPECT_NE(probe.out.find("read-only"), std::string::npos) << probe.out;

  auto ls = airlock({"image", "ls", "--json", "--store", store.root()});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  json image;
  for (const auto& i : json::parse(ls.out))
    if (i["name"] == "pandas-spec") image = i;
  ASSERT_TRUE(image.is_object()) << ls.out;
  EXPECT_EQ(image["meta"]["source"]["kind"], "spec");
  bool has_pandas = false;
  for (const auto& p : image["meta"]["packages"])
    has_pandas = has_pandas || p.get<std::string>().starts_with("python3-pandas ");
  EXPECT_TRUE(has_pandas) << image.dump();
}

TEST_F(ImageCli, SpecBuiltImageRunsUnderGvisor) {
  AIRLOCK_REQUIRE(fs::exists("/usr/bin/runsc") || fs::exists("/usr/local/bin/runsc"),
                  "runsc (gVisor) is not installed");
  auto& store = SharedStore::get();
  ASSERT_NE(store.specImage(), "") << store.error;
  std::vector<std::string> run = {
      "run", "--policy", policyFor(store.specImage()), "--profile", "img", "--isolation", "gvisor"};
  run.insert(run.end(), kPandasRun.begin(), kPandasRun.end());
  expectPandasSummary(airlock(run));
}

// The microVM backend boots the image as an erofs disk, made once per image (keyed by its
// digest) in the backend's cache; under emulation (no KVM) pandas takes ~20 s here.
TEST_F(ImageCli, SpecBuiltImageRunsUnderMicrovm) {
  AIRLOCK_REQUIRE(fs::exists("/usr/bin/qemu-system-x86_64"), "QEMU is not installed");
  auto& store = SharedStore::get();
  ASSERT_NE(store.specImage(), "") << store.error;
  std::vector<std::string> run = {"run",       "--policy", policyFor(store.specImage()),
                                  "--profile", "img",      "--isolation",
                                  "microvm"};
  run.insert(run.end(), kPandasRun.begin(), kPandasRun.end());
  const auto t0 = Clock::now();
  expectPandasSummary(airlock(run, 600));
  std::cerr << "[ timing  ] pandas example in the spec-built image, microVM: "
            << std::chrono::duration<double>(Clock::now() - t0).count() << " s\n";
}

// The spec-built rootfs made into an OCI image archive (umoci: a layout and one layer; the
// archive is the layout in a tar), imported under another name and run.
TEST_F(ImageCli, ImportedOciArchiveRunsThePandasExample) {
  auto& store = SharedStore::get();
  ASSERT_NE(store.specImage(), "") << store.error;
  auto inspect = airlock({"image", "inspect", store.specImage(), "--store", store.root()});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  const std::string rootfs = json::parse(inspect.out)["rootfs"];
  const std::string layout = dir_.file("layout"), archive = dir_.file("pandas.oci.tar");
  const auto t0 = Clock::now();
  for (const auto& argv : std::vector<std::vector<std::string>>{
           {"/usr/bin/umoci", "init", "--layout", layout},
           {"/usr/bin/umoci", "new", "--image", layout + ":latest"},
           {"/usr/bin/umoci", "insert", "--image", layout + ":latest", rootfs, "/"},
           {"/usr/bin/tar", "-C", layout, "-cf", archive, "."}}) {
    auto r = runCommand(argv, "", 300);
    ASSERT_EQ(r.exit_code, 0) << argv[0] << " " << argv[1] << ": " << r.err;
  }
  std::cerr << "[ timing  ] OCI archive made with umoci: "
            << std::chrono::duration<double>(Clock::now() - t0).count() << " s\n";
  const auto t1 = Clock::now();
  auto imported = airlock({"image", "import", archive, "--store", store.root()});
  ASSERT_EQ(imported.exit_code, 0) << imported.err;
  std::cerr << "[ timing  ] airlock image import: "
            << std::chrono::duration<double>(Clock::now() - t1).count() << " s\n";
  EXPECT_TRUE(imported.out.starts_with("pandas sha256:")) << imported.out;  // named after the file
  EXPECT_NE(imported.err.find("checked 1 layer(s)"), std::string::npos) << imported.err;

  std::vector<std::string> run = {"run", "--policy", policyFor("pandas"), "--profile", "img"};
  run.insert(run.end(), kPandasRun.begin(), kPandasRun.end());
  expectPandasSummary(airlock(run));

  auto rm = airlock({"image", "rm", "pandas", "--store", store.root()});
  EXPECT_EQ(rm.exit_code, 0) << rm.err;
  auto gone = airlock({"run", "--policy", policyFor("pandas"), "--profile", "img", "--lang",
                       "shell", "-c", "true"});
  EXPECT_EQ(gone.exit_code, 125);
  EXPECT_NE(gone.err.find("no image named 'pandas'"), std::string::npos) << gone.err;
}

// Writes an OCI image archive by hand whose one layer holds `entries` (a path each; a trailing
// "/" makes a directory), uncompressed so that its digest is its diff id. Returns its path.
std::string hostileArchive(const TempDir& dir, const std::vector<std::string>& entries) {
  const std::string layout = dir.file("hostile");
  fs::create_directories(layout + "/blobs/sha256");
  auto blob = [&](const std::string& bytes) {
    const std::string hex = policy::sha256Hex(bytes);
    dir.write("hostile/blobs/sha256/" + hex, bytes);
    return json{{"digest", "sha256:" + hex}, {"size", bytes.size()}};
  };
  std::string layer;
  {
    std::unique_ptr<archive, decltype(&archive_write_free)> a(archive_write_new(),
                                                              archive_write_free);
    archive_write_set_format_pax_restricted(a.get());
    std::vector<char> buf(1 << 16);
    size_t used = 0;
    archive_write_set_bytes_in_last_block(a.get(), 1);
    archive_write_open_memory(a.get(), buf.data(), buf.size(), &used);
    for (const auto& p : entries) {
      archive_entry* e = archive_entry_new();
      archive_entry_set_pathname(e, p.c_str());
      archive_entry_set_filetype(e, p.ends_with("/") ? AE_IFDIR : AE_IFREG);
      archive_entry_set_perm(e, 0755);
      archive_entry_set_size(e, 0);
      archive_write_header(a.get(), e);
      archive_entry_free(e);
    }
    archive_write_close(a.get());
    layer.assign(buf.data(), used);
  }
  json l = blob(layer);
  l["mediaType"] = "application/vnd.oci.image.layer.v1.tar";
  json c = blob(json{{"architecture", "amd64"},
                     {"os", "linux"},
                     {"rootfs", {{"type", "layers"}, {"diff_ids", {l["digest"]}}}}}
                    .dump());
  c["mediaType"] = "application/vnd.oci.image.config.v1+json";
  json m = blob(json{
      {"schemaVersion", 2},
      {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
      {"config", c},
      {"layers",
       {l}}}.dump());
  m["mediaType"] = "application/vnd.oci.image.manifest.v1+json";
  m["annotations"] = {{"org.opencontainers.image.ref.name", "latest"}};
  dir.write("hostile/index.json", json{{"schemaVersion", 2}, {"manifests", {m}}}.dump());
  dir.write("hostile/oci-layout", R"({"imageLayoutVersion": "1.0.0"})");
  const std::string out = dir.file("hostile.tar");
  auto r = runCommand({"/usr/bin/tar", "-C", layout, "-cf", out, "."});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out;
}

TEST_F(ImageCli, HostileArchiveIsRefusedNamingTheEntryAndWritesNothing) {
  TempDir work;
  const std::string store = work.path() + "/store";
  const std::string archive =
      hostileArchive(work, {"etc/", "etc/../../../escaped-by-airlock-test"});
  auto r = airlock({"image", "import", archive, "--name", "hostile", "--store", store});
  EXPECT_EQ(r.exit_code, 125);
  // The layer is named by its digest as stored: skopeo compresses an uncompressed layer on the
  // way into the layout, so that is not the archive's `layer` digest here.
  EXPECT_NE(r.err.find("airlock: image import: layer sha256:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(": entry 'etc/../../../escaped-by-airlock-test': a '..' component\n"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(fs::is_empty(store + "/names"));
  EXPECT_TRUE(fs::is_empty(store + "/blobs"));
  EXPECT_TRUE(fs::is_empty(store + "/tmp")) << "the staging directory is gone";
  for (const auto& at : {work.path(), std::string("/tmp"), std::string("/")})
    EXPECT_FALSE(fs::exists(at + "/escaped-by-airlock-test")) << at;
}

TEST_F(ImageCli, FailedBuildLeavesNothingInTheStore) {
  TempDir work;
  const std::string store = work.path() + "/store";
  work.write("broken.toml", "name = \"broken\"\n[debian]\nmirror = \"file:/nonexistent-mirror\"\n");
  auto r = airlock({"image", "build", work.file("broken.toml"), "--store", store});
  EXPECT_EQ(r.exit_code, 125);
  EXPECT_NE(r.err.find("airlock: image build: mmdebstrap: /usr/bin/unshare exited with status"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(fs::is_empty(store + "/names"));
  EXPECT_TRUE(fs::is_empty(store + "/blobs"));
  EXPECT_TRUE(fs::is_empty(store + "/tmp")) << "the half-made tree is gone";
}

// Needs no root: only the store is asked.
TEST(ImagePolicyCheck, FailsNamingTheProfileAndTheMissingImage) {
  TempDir dir;
  dir.write("p.toml",
            "schema = 1\ndefault_profile = \"analysis\"\n[profiles.analysis.filesystem]\n"
            "image = \"ghost\"\n");
  const std::string store = dir.path() + "/empty-store";
  auto r = runCommand({airlockBinary(), "policy", "check", dir.file("p.toml")}, "", 60,
                      {"AIRLOCK_IMAGE_STORE=" + store});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, dir.file("p.toml") +
                       ":4:9: profile 'analysis': filesystem.image: no image named "
                       "'ghost' in the image store " +
                       store + " (`airlock image ls` lists them)\n");
}

}  // namespace
}  // namespace airlock::testing
