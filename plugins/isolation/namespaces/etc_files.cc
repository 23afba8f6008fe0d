#include "etc_files.h"

#include <string>

#include "common/sandbox_etc.h"

namespace airlock::isolation {

void planEtcFiles(const airlock_sandbox_spec_v1& spec, const RootLayout& layout, Plan& plan) {
  if (!layout.image.empty()) return;
  for (const auto& [name, contents] : sandboxEtcFiles(spec)) {
    std::string path = "/etc/" + name;
    plan.writeFile(Stage::kEtc, layout.root + path, contents, 0644, path);
  }
}

}  // namespace airlock::isolation
