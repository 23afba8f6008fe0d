// The backend's per-sandbox directory, <scratch_dir>/<sandbox_id>: only plain files live there
// (runsc mounts nothing on the host), so removing it is a plain recursive delete.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace airlock::isolation::gvisor {

// [a-z0-9-]{1,63}: safe as one path component and as runsc's container id.
inline bool validSandboxId(std::string_view id) {
  if (id.empty() || id.size() > 63) return false;
  for (char c : id)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return true;
}

// Removes `dir` and everything in it (symlinks themselves, never their targets).
inline void removeTree(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace airlock::isolation::gvisor
