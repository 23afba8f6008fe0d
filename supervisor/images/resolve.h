// filesystem.image as the sandbox gets it: an absolute host directory as given, or an image
// name resolved against the image store (store.h) to its rootfs directory, at the moment a
// sandbox is created (so `airlock image build` of a new version takes effect for the next
// sandbox, and a running one keeps the tree it started with).
#pragma once

#include <string>

#include "airlock/result.h"

namespace airlock::images {

// "" stays "" (the host's system view).
Result<std::string> imageRootDir(const std::string& image);

}  // namespace airlock::images
