// Landlock for executions: a ruleset prepared once at Configure, applied in each child.
#pragma once

#include <string>
#include <vector>

#include "airlock/result.h"
#include "airlock/unique_fd.h"

namespace airlock::agent {

class LandlockRuleset {
 public:
  // The kernel's Landlock ABI version, or 0 when Landlock is unavailable (not built, disabled).
  static int abiVersion();

  // A ruleset that handles every write-type filesystem access and allows it only beneath each
  // of writable_paths (paths that do not exist are skipped: nothing can create them either).
  // ABI >= 6 also scopes signals and abstract unix sockets to the sandboxed domain, so sandboxed
  // code cannot signal or connect to the agent. Returns an empty ruleset (valid() false) when the
  // kernel lacks Landlock; any error once Landlock exists is returned.
  static Result<LandlockRuleset> create(const std::vector<std::string>& writable_paths);

  bool valid() const { return fd_.valid(); }
  int fd() const { return fd_.get(); }
  int abi() const { return abi_; }

 private:
  UniqueFd fd_;
  int abi_ = 0;
};

// Child side, async-signal-safe: enforces the ruleset on the calling thread. -1/errno on failure.
int landlockRestrictSelf(int ruleset_fd);

}  // namespace airlock::agent
