#include "supervisor/images/oci_import.h"

#include <archive.h>
#include <archive_entry.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "airlock/whole_file.h"
#include "supervisor/images/layer_check.h"
#include "supervisor/images/rootfs_finish.h"
#include "supervisor/images/store.h"

namespace airlock::images {
namespace {

constexpr const char* kSkopeo = "/usr/bin/skopeo";
constexpr const char* kUmoci = "/usr/bin/umoci";
constexpr const char* kTag = "airlock";

Result<nlohmann::json> readJson(const std::string& path) {
  AIRLOCK_TRY_CTX(text, readWholeFile(path, 4 << 20), "image import");
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return fail("image import: not a JSON object", path);
  return j;
}

std::string blobPath(const std::string& layout, const std::string& digest) {
  return layout + "/blobs/sha256/" + digest.substr(7);
}

}  // namespace

Result<std::string> archiveFormat(const std::string& archive) {
  std::unique_ptr<struct archive, decltype(&archive_read_free)> a(archive_read_new(),
                                                                  archive_read_free);
  archive_read_support_filter_all(a.get());
  archive_read_support_format_tar(a.get());
  if (archive_read_open_filename(a.get(), archive.c_str(), 1 << 16) != ARCHIVE_OK)
    return fail(
        "image import: not a readable tar archive: " + std::string(archive_error_string(a.get())),
        archive);
  bool oci = false, docker = false;
  archive_entry* e = nullptr;
  while (archive_read_next_header(a.get(), &e) == ARCHIVE_OK) {
    std::string_view name = archive_entry_pathname(e);
    if (name.starts_with("./")) name.remove_prefix(2);
    oci = oci || name == "oci-layout";
    docker = docker || name == "manifest.json";
  }
  // Docker 25 and later write both: the OCI layout is the richer one.
  if (oci) return std::string("oci-archive");
  if (docker) return std::string("docker-archive");
  return fail(
      "image import: neither an OCI image archive (no oci-layout) nor a docker save "
      "archive (no manifest.json)",
      archive);
}

Result<ImportResult> importOciArchive(const std::string& archive_in, const std::string& staging,
                                      const Progress& progress) {
  std::error_code ec;
  const std::string archive = std::filesystem::absolute(archive_in, ec).string();
  auto format_r = archiveFormat(archive);
  if (!format_r) return Unexpected(format_r.error());
  const std::string format = *format_r;
  auto say = [&](const std::string& line) {
    if (progress) progress(line);
  };
  const std::string layout = staging + "/oci", rootfs = staging + "/rootfs";
  say("skopeo: copying the " + format + " " + archive + " into an OCI layout");
  // --insecure-policy: a local archive has no signatures to check; the host's policy.json is
  // about registries.
  if (auto r = runTool({.argv = {kSkopeo, "--insecure-policy", "copy", format + ":" + archive,
                                 "oci:" + layout + ":" + kTag},
                        .env = {"TMPDIR=" + staging},
                        .progress = progress});
      !r)
    return Unexpected(std::move(r.error()).wrap("image import: skopeo copy"));

  auto index = readJson(layout + "/index.json");
  if (!index) return Unexpected(index.error());
  ImportResult out{.format = format};
  const auto& manifests = (*index)["manifests"];
  if (!manifests.is_array() || manifests.size() != 1 || !manifests[0]["digest"].is_string())
    return fail("image import: the copied layout does not hold exactly one manifest", layout);
  out.digest = manifests[0]["digest"].get<std::string>();
  if (auto r = checkDigest(out.digest); !r)
    return Unexpected(std::move(r.error()).wrap("image import: manifest"));
  auto manifest = readJson(blobPath(layout, out.digest));
  if (!manifest) return Unexpected(manifest.error());
  const auto& layers = (*manifest)["layers"];
  if (!layers.is_array()) return fail("image import: the manifest lists no layers", out.digest);

  LayerChecker checker;
  for (const auto& layer : layers) {
    if (!layer.is_object() || !layer["digest"].is_string())
      return fail("image import: a manifest layer without a digest", out.digest);
    const std::string digest = layer["digest"].get<std::string>();
    if (auto r = checkDigest(digest); !r)
      return Unexpected(std::move(r.error()).wrap("image import: layer"));
    if (auto r = checker.check(blobPath(layout, digest), digest); !r)
      return Unexpected(std::move(r.error()).wrap("image import"));
    ++out.layers;
  }
  out.entries = checker.entries();
  say("checked " + std::to_string(out.layers) + " layer(s), " + std::to_string(out.entries) +
      " entries: nothing leaves the image");

  say("umoci: unpacking into the rootfs");
  if (auto r = runTool({.argv = {kUmoci, "raw", "unpack", "--image", layout + ":" + kTag, rootfs},
                        .env = {"TMPDIR=" + staging},
                        .progress = progress});
      !r)
    return Unexpected(std::move(r.error()).wrap("image import: umoci raw unpack"));
  std::filesystem::remove_all(layout, ec);
  if (auto r = finishRootfs(rootfs); !r)
    return Unexpected(std::move(r.error()).wrap("image import"));
  return out;
}

}  // namespace airlock::images
