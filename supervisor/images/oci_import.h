// `airlock image import ARCHIVE`: an OCI image archive (`skopeo copy … oci-archive:`) or a
// `docker save` archive, made into a store image with Debian's tools:
//
//   1. skopeo copies it into an OCI layout in the staging directory (both formats become the
//      same layout; skopeo checks every blob's digest on the way);
//   2. every layer the manifest lists is checked (layer_check.h) before anything is unpacked;
//   3. umoci unpacks the layers, in order and with their whiteouts, into the rootfs;
//   4. the rootfs is finished for sandboxes (rootfs_finish.h) and the layout removed.
//
// The image's digest is its OCI manifest's: the same archive imported twice is one image.
#pragma once

#include <string>

#include "airlock/result.h"
#include "supervisor/images/tool_run.h"

namespace airlock::images {

struct ImportResult {
  std::string digest;  // the manifest's, "sha256:<hex>"
  std::string format;  // "oci-archive" or "docker-archive"
  size_t layers = 0;
  size_t entries = 0;  // tar entries checked, over all layers
};

// "oci-archive" when the archive has an oci-layout file at its top, "docker-archive" when it
// has a manifest.json (docker save), else an error saying what it is not.
Result<std::string> archiveFormat(const std::string& archive);

// Imports `archive` into `staging` (a store staging directory): the rootfs at staging/rootfs.
Result<ImportResult> importOciArchive(const std::string& archive, const std::string& staging,
                                      const Progress& progress);

}  // namespace airlock::images
