// `airlock review`: placeholder until its issue lands; answers "not built yet" with exit 125.
#include "supervisor/cli/cli.h"
#include "supervisor/run/run_result.h"

namespace airlock::cli {

int reviewCommand(const std::vector<std::string>&) {
  printError("'airlock review' is not built yet");
  return run::kExitAirlockError;
}

}  // namespace airlock::cli
