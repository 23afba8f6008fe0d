#include "supervisor/images/resolve.h"

#include "supervisor/images/store.h"

namespace airlock::images {

Result<std::string> imageRootDir(const std::string& image) {
  if (image.empty() || image.front() == '/') return image;
  AIRLOCK_TRY_CTX(store, Store::open(defaultStoreRoot(), false), "filesystem.image");
  AIRLOCK_TRY_CTX(dir, store.rootfsFor(image), "filesystem.image");
  return dir;
}

}  // namespace airlock::images
