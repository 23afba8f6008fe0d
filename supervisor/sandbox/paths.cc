#include "supervisor/sandbox/paths.h"

#include <vector>

namespace airlock::sandbox {

Result<std::string> normalizePath(const std::string& path, const std::string& field,
                                  Relative relative) {
  if (path.empty()) return fail(field + " is empty");
  if (path.find('\0') != std::string::npos) return fail(field + " contains a NUL byte");
  if (path.size() > 4096) return fail(field + " is longer than 4096 bytes");
  std::string abs = path;
  if (abs.front() != '/') {
    if (relative == Relative::kRefuse)
      return fail(field + " '" + path + "' must be absolute (/home/user/...)");
    abs = std::string(kWorkspace) + "/" + path;
  }
  std::vector<std::string_view> parts;
  std::string_view rest(abs);
  while (!rest.empty()) {
    size_t slash = rest.find('/');
    std::string_view part = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (!parts.empty()) parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  std::string out;
  for (auto p : parts) out.append("/").append(p);
  return out.empty() ? "/" : out;
}

}  // namespace airlock::sandbox
