// The check every layer of an imported OCI image passes before anything of it is unpacked:
// umoci writes as root, so an entry that could land outside the image's rootfs, or make a
// device node, is refused here, naming the layer and the entry.
//
// Refused: absolute paths, '..' components, character and block devices, fifos and sockets,
// hard links whose target is absolute or has '..', whiteouts (.wh.NAME) of '.', '..' or
// nothing, AUFS metadata other than the opaque marker, and any entry (or hard-link target)
// whose path goes through a symlink made by this or an earlier layer: unpacked, it would be
// written wherever that symlink points.
#pragma once

#include <set>
#include <string>

#include "airlock/result.h"

namespace airlock::images {

class LayerChecker {
 public:
  // Reads one layer (a tar, compressed in any way libarchive reads: gzip, zstd, none) and
  // fails on its first bad entry: "layer <name>: entry '<path>': <why>". Layers are checked in
  // their order in the manifest: symlinks of earlier ones count.
  Result<> check(const std::string& blob_path, const std::string& layer_name);

  // How many entries the layers checked so far held.
  size_t entries() const { return entries_; }

 private:
  std::set<std::string> symlinks_;  // paths (relative, no leading "./") that are symlinks now
  size_t entries_ = 0;
};

}  // namespace airlock::images
