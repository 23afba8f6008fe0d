// Names of images in the image store (docs/images.md): what `[profiles.X.filesystem] image`
// holds when it is not an absolute host directory, and what `airlock image build` names.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace airlock::policy {

// Why `name` cannot name an image in the image store, or nullopt: 1-128 of [a-z0-9._-],
// starting with a letter or digit (it is a file name under the store's names/).
std::optional<std::string> imageNameProblem(std::string_view name);

}  // namespace airlock::policy
