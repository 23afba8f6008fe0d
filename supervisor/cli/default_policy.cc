#include "supervisor/cli/default_policy.h"

namespace airlock::cli {

// The path is this one file's compile definition (supervisor/cli/CMakeLists.txt), so configuring
// the tree for another prefix (the package's /usr) recompiles this file, not the library.
const char* defaultPolicyPath() { return AIRLOCK_DEFAULT_POLICY; }

}  // namespace airlock::cli
