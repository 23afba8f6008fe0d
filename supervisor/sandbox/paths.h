// The one rule for paths inside a sandbox, for every front end (API, `airlock run`, MCP) and
// every operation (files, working directories, program files).
#pragma once

#include <string>

#include "airlock/result.h"

namespace airlock::sandbox {

inline constexpr const char* kWorkspace = "/home/user";

enum class Relative {
  kRefuse,       // the API: a path must be absolute
  kInWorkspace,  // `airlock run --file`: relative paths are under /home/user
};

// Checks and normalizes a sandbox path: not empty, no NUL byte, at most 4096 bytes; a relative
// path is refused or taken under /home/user; "//", "/./", "x/.." and a trailing "/" are folded
// lexically, and ".." never climbs above "/". The result is absolute and normal. The path is
// still resolved by the agent inside the sandbox's own root, where a symlink cannot lead out:
// this rule is about clear names and errors, not containment. `field` names the path in errors
// ("path", "cwd", "--file").
Result<std::string> normalizePath(const std::string& path, const std::string& field = "path",
                                  Relative relative = Relative::kRefuse);

}  // namespace airlock::sandbox
