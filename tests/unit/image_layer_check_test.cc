// The check of imported OCI layers (supervisor/images/layer_check.h) on hostile tars built here:
// each kind of entry that could land outside the image, or make a device, is refused with an
// error naming the layer and the entry.
#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>

#include <memory>

#include "supervisor/images/layer_check.h"
#include "test_support.h"

namespace airlock::images {
namespace {

using ::airlock::testing::TempDir;

struct Entry {
  std::string path;
  mode_t type = AE_IFREG;
  std::string link;  // symlink target, or hard-link target with `hard`
  bool hard = false;
};

// A gzip-compressed tar (as most OCI layers are) holding `entries`.
std::string writeLayer(const TempDir& dir, const std::string& name,
                       const std::vector<Entry>& entries) {
  const std::string path = dir.file(name);
  std::unique_ptr<archive, decltype(&archive_write_free)> a(archive_write_new(),
                                                            archive_write_free);
  archive_write_set_format_pax_restricted(a.get());
  archive_write_add_filter_gzip(a.get());
  EXPECT_EQ(archive_write_open_filename(a.get(), path.c_str()), ARCHIVE_OK);
  for (const Entry& e : entries) {
    archive_entry* ae = archive_entry_new();
    archive_entry_set_pathname(ae, e.path.c_str());
    archive_entry_set_filetype(ae, e.type);
    archive_entry_set_perm(ae, e.type == AE_IFDIR ? 0755 : 0644);
    if (e.hard)
      archive_entry_set_hardlink(ae, e.link.c_str());
    else if (e.type == AE_IFLNK)
      archive_entry_set_symlink(ae, e.link.c_str());
    if (e.type == AE_IFCHR || e.type == AE_IFBLK) archive_entry_set_rdev(ae, 0x0101);
    archive_entry_set_size(ae, 0);
    EXPECT_EQ(archive_write_header(a.get(), ae), ARCHIVE_OK) << e.path;
    archive_entry_free(ae);
  }
  archive_write_close(a.get());
  return path;
}

std::string firstError(const std::vector<std::vector<Entry>>& layers) {
  TempDir dir;
  LayerChecker checker;
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string name = "sha256:layer" + std::to_string(i);
    auto r = checker.check(writeLayer(dir, "l" + std::to_string(i), layers[i]), name);
    if (!r) return r.error().message();
  }
  return "";
}

const std::vector<Entry> kBase = {{"./"},
                                  {"./etc/", AE_IFDIR},
                                  {"./etc/passwd"},
                                  {"./bin", AE_IFLNK, "usr/bin"},
                                  {"./usr/bin/", AE_IFDIR},
                                  {"./usr/bin/python3"},
                                  {"./usr/bin/python3.11", AE_IFREG, "usr/bin/python3", true},
                                  {"./tmp/", AE_IFDIR}};

TEST(LayerCheck, AnOrdinaryLayerPasses) {
  EXPECT_EQ(firstError({kBase}), "");
  EXPECT_EQ(firstError({{{"/", AE_IFDIR}, {"etc/", AE_IFDIR}}}), "") << "umoci insert's root";
  // Whiteouts of ordinary entries, an opaque directory, a symlink replaced by a directory.
  EXPECT_EQ(
      firstError(
          {kBase, {{"etc/.wh.passwd"}, {"usr/bin/.wh..wh..opq"}, {"bin", AE_IFDIR}, {"bin/sh"}}}),
      "");
}

TEST(LayerCheck, DotDotIsRefusedNamingLayerAndEntry) {
  EXPECT_EQ(firstError({kBase, {{"usr/../../etc/cron.d/x"}}}),
            "layer sha256:layer1: entry 'usr/../../etc/cron.d/x': a '..' component");
}

TEST(LayerCheck, AbsolutePathIsRefused) {
  EXPECT_EQ(firstError({{{"/etc/shadow"}}}),
            "layer sha256:layer0: entry '/etc/shadow': an absolute path");
}

TEST(LayerCheck, DeviceNodesAndFifosAreRefused) {
  EXPECT_EQ(firstError({{{"dev/sda", AE_IFBLK}}}),
            "layer sha256:layer0: entry 'dev/sda': a block device (images may not hold device "
            "files)");
  EXPECT_EQ(firstError({{{"dev/mem", AE_IFCHR}}}),
            "layer sha256:layer0: entry 'dev/mem': a character device (images may not hold "
            "device files)");
  EXPECT_EQ(firstError({{{"run/pipe", AE_IFIFO}}}),
            "layer sha256:layer0: entry 'run/pipe': a fifo (images may not hold fifos)");
}

TEST(LayerCheck, HardLinksOutsideAreRefused) {
  EXPECT_EQ(firstError({{{"x", AE_IFREG, "/etc/shadow", true}}}),
            "layer sha256:layer0: entry 'x': a hard link to '/etc/shadow' outside the image (an "
            "absolute path)");
  EXPECT_EQ(firstError({{{"x", AE_IFREG, "../../etc/shadow", true}}}),
            "layer sha256:layer0: entry 'x': a hard link to '../../etc/shadow' outside the image "
            "(a '..' component)");
}

TEST(LayerCheck, WhiteoutsThatPointOutsideAreRefused) {
  EXPECT_EQ(firstError({kBase, {{"etc/.wh..."}}}),
            "layer sha256:layer1: entry 'etc/.wh...': a whiteout of '..', which is not an entry "
            "of its directory");
  EXPECT_EQ(firstError({kBase, {{".wh.."}}}),
            "layer sha256:layer1: entry '.wh..': a whiteout of '.', which is not an entry of its "
            "directory");
  EXPECT_EQ(firstError({kBase, {{"../.wh.etc"}}}),
            "layer sha256:layer1: entry '../.wh.etc': a '..' component");
  EXPECT_EQ(firstError({kBase, {{"etc/.wh..wh.plnk"}}}),
            "layer sha256:layer1: entry 'etc/.wh..wh.plnk': AUFS whiteout metadata (only "
            ".wh..wh..opq is allowed)");
}

TEST(LayerCheck, EntriesThroughASymlinkOfAnEarlierLayerAreRefused) {
  const std::vector<Entry> evil = {{"escape", AE_IFLNK, "/"}};
  EXPECT_EQ(firstError({evil, {{"escape/etc/shadow"}}}),
            "layer sha256:layer1: entry 'escape/etc/shadow': goes through the symlink 'escape' "
            "(unpacked, it would be written wherever that points)");
  // A whiteout through it would delete wherever it points.
  EXPECT_EQ(firstError({evil, {{"escape/etc/.wh.passwd"}}}),
            "layer sha256:layer1: entry 'escape/etc/.wh.passwd': goes through the symlink "
            "'escape' (unpacked, it would be written wherever that points)");
  EXPECT_EQ(firstError({evil, {{"x", AE_IFREG, "escape/etc/shadow", true}}}),
            "layer sha256:layer1: entry 'x': a hard link to 'escape/etc/shadow' through the "
            "symlink 'escape'");
  // Whited out, the symlink no longer leads anywhere: a directory may take its place.
  EXPECT_EQ(firstError({evil, {{".wh.escape"}, {"escape/", AE_IFDIR}, {"escape/ok"}}}), "");
}

TEST(LayerCheck, NotATarIsAnError) {
  TempDir dir;
  dir.write("junk", std::string(1000, 'x'));
  LayerChecker checker;
  auto r = checker.check(dir.file("junk"), "sha256:junk");
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().message().starts_with("layer sha256:junk: not a readable tar"))
      << r.error().message();
}

}  // namespace
}  // namespace airlock::images
