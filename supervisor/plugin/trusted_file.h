// Trusted-file checks. A plugin is code the privileged supervisor runs, so nobody but its owner
// may have been able to write it or to swap it (through any directory on its path).
#pragma once

#include <sys/types.h>

#include <string>

#include "airlock/result.h"
#include "airlock/unique_fd.h"

namespace airlock::plugin {

// Resolves `path` (symlinks included) and walks the result from "/" without following symlinks:
//   - every ancestor directory is owned by root or `owner`, and is not writable by group or
//     others unless it is sticky (/tmp);
//   - the file's own directory is owned by root or `owner` and not writable by group or others;
//   - the file is a regular file owned by `owner` and not writable by group or others.
// Returns the resolved path and the checked file itself (O_PATH): load through that fd, not the
// path, and what runs is what was checked. The error says which object failed and why; when
// `path` is a symlink it starts with "resolves to '<real path>'".
struct TrustedFile {
  std::string real_path;
  UniqueFd fd;
};
Result<TrustedFile> checkTrustedFile(const std::string& path, uid_t owner);

}  // namespace airlock::plugin
