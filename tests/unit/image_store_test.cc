// The image store (supervisor/images/store.h) on a temporary directory: names, atomic publish,
// sharing of identical content, a failed or killed build leaving nothing, rm.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>

#include "supervisor/images/store.h"
#include "test_support.h"

namespace airlock::images {
namespace {

using ::airlock::testing::TempDir;
namespace fs = std::filesystem;

const std::string kDigestA = "sha256:" + std::string(64, 'a');
const std::string kDigestB = "sha256:" + std::string(64, 'b');

class ImageStore : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = Store::open(dir_.path() + "/store", true);
    ASSERT_TRUE(s) << s.error().message();
    store_.emplace(std::move(*s));
  }
  // A staged image whose rootfs holds one file saying `what`.
  Staging staged(const std::string& what) {
    auto st = store_->stage();
    EXPECT_TRUE(st) << st.error().message();
    fs::create_directories(st->rootfs() + "/etc");
    dir_.write("x", what);
    fs::copy_file(dir_.file("x"), st->rootfs() + "/etc/what", fs::copy_options::overwrite_existing);
    return std::move(*st);
  }
  std::set<std::string> tmpEntries() const {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(store_->root() + "/tmp"))
      out.insert(e.path().filename().string());
    return out;
  }
  TempDir dir_;
  std::optional<Store> store_;
};

TEST_F(ImageStore, PublishMakesTheNameResolveToTheRootfs) {
  auto lock = store_->lock();
  ASSERT_TRUE(lock);
  Staging st = staged("one");
  ASSERT_TRUE(store_->publish(st, "data-science", kDigestA, {{"source", {{"kind", "spec"}}}}));
  auto root = store_->rootfsFor("data-science");
  ASSERT_TRUE(root) << root.error().message();
  EXPECT_EQ(*root, store_->root() + "/blobs/" + std::string(64, 'a') + "/rootfs");
  EXPECT_EQ(::airlock::testing::readFile(*root + "/etc/what"), "one");
  EXPECT_EQ(
      ::airlock::testing::readFile(store_->root() + "/blobs/" + std::string(64, 'a') + "/digest"),
      kDigestA + "\n");
  auto info = store_->inspect("data-science");
  ASSERT_TRUE(info);
  EXPECT_EQ(info->digest, kDigestA);
  EXPECT_EQ(info->meta["source"]["kind"], "spec");
  EXPECT_TRUE(tmpEntries().empty()) << "the staging directory was renamed into place";
  // A sandbox's uid walks to the rootfs: every directory on the way is searchable.
  for (std::string p = *root; p != dir_.path(); p = fs::path(p).parent_path().string()) {
    struct stat s {};
    ASSERT_EQ(::stat(p.c_str(), &s), 0);
    EXPECT_TRUE(s.st_mode & S_IXOTH) << p;
  }
}

TEST_F(ImageStore, MissingNameSaysHowToListImages) {
  auto r = store_->rootfsFor("ghost");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), "no image named 'ghost' in the image store " + store_->root() +
                                     " (`airlock image ls` lists them)");
  EXPECT_FALSE(store_->rootfsFor("../blobs"));
}

TEST_F(ImageStore, AFailedBuildLeavesNothing) {
  auto lock = store_->lock();
  {
    Staging st = staged("half");
    EXPECT_EQ(tmpEntries().size(), 1u);
  }  // the build failed: its staging directory goes with it
  EXPECT_TRUE(tmpEntries().empty());
  EXPECT_TRUE(fs::is_empty(store_->root() + "/blobs"));
  EXPECT_TRUE(fs::is_empty(store_->root() + "/names"));
}

TEST_F(ImageStore, AKilledBuildsDebrisGoesWithTheNextLock) {
  {
    auto lock = store_->lock();
    Staging st = staged("killed");
    st.release();  // as if the process died: nothing removed it
  }
  EXPECT_EQ(tmpEntries().size(), 1u);
  auto lock = store_->lock();
  EXPECT_TRUE(tmpEntries().empty());
}

TEST_F(ImageStore, SameContentTwiceIsOneBlobWithTwoNames) {
  auto lock = store_->lock();
  Staging a = staged("same");
  ASSERT_TRUE(store_->publish(a, "first", kDigestA, nlohmann::json::object()));
  Staging b = staged("same");
  ASSERT_TRUE(store_->publish(b, "second", kDigestA, nlohmann::json::object()));
  EXPECT_TRUE(tmpEntries().empty());
  EXPECT_EQ(*store_->rootfsFor("first"), *store_->rootfsFor("second"));
  auto all = store_->list();
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].name, "first");
  EXPECT_EQ((*all)[1].name, "second");
  // rm of one name keeps the blob the other still means.
  ASSERT_TRUE(store_->remove("first"));
  EXPECT_TRUE(store_->rootfsFor("second"));
  ASSERT_TRUE(store_->remove("second"));
  EXPECT_TRUE(fs::is_empty(store_->root() + "/blobs"));
  EXPECT_TRUE(tmpEntries().empty());
}

TEST_F(ImageStore, RebuildingANameReplacesItsBlob) {
  auto lock = store_->lock();
  Staging a = staged("v1");
  ASSERT_TRUE(store_->publish(a, "app", kDigestA, nlohmann::json::object()));
  Staging b = staged("v2");
  ASSERT_TRUE(store_->publish(b, "app", kDigestB, nlohmann::json::object()));
  EXPECT_EQ(::airlock::testing::readFile(*store_->rootfsFor("app") + "/etc/what"), "v2");
  EXPECT_FALSE(fs::exists(store_->root() + "/blobs/" + std::string(64, 'a')))
      << "the blob no name points at any more is gone";
}

TEST_F(ImageStore, RmOfAnUnknownNameFailsNamingIt) {
  auto lock = store_->lock();
  auto r = store_->remove("nope");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), "image rm: no image named 'nope' in the image store " +
                                     store_->root() + " (`airlock image ls` lists them)");
}

TEST_F(ImageStore, BadNamesAndDigestsAreRefused) {
  auto lock = store_->lock();
  Staging a = staged("x");
  EXPECT_FALSE(store_->publish(a, "../escape", kDigestA, nlohmann::json::object()));
  EXPECT_FALSE(store_->publish(a, "ok", "sha256:../../x", nlohmann::json::object()));
  EXPECT_TRUE(fs::is_empty(store_->root() + "/blobs"));
}

TEST(ImageStoreRoot, EnvironmentOverridesTheDefault) {
  ::unsetenv("AIRLOCK_IMAGE_STORE");
  EXPECT_EQ(defaultStoreRoot(), "/var/lib/airlock/images");
  ::setenv("AIRLOCK_IMAGE_STORE", "/tmp/other-store", 1);
  EXPECT_EQ(defaultStoreRoot(), "/tmp/other-store");
  ::unsetenv("AIRLOCK_IMAGE_STORE");
}

}  // namespace
}  // namespace airlock::images
