// Running the Debian tools images are made with (mmdebstrap, skopeo, umoci): their output
// becomes progress lines as it comes, and a failure carries the last lines they printed.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "airlock/result.h"

namespace airlock::images {

using Progress = std::function<void(const std::string& line)>;

struct ToolRun {
  std::vector<std::string> argv;  // argv[0] absolute
  std::vector<std::string> env;   // added to a minimal PATH=...; nothing of ours is passed on
  Progress progress;              // each output line (stdout and stderr); may be empty
};

// Runs the tool to its end; an exit status other than 0 is an error naming the tool, its status
// and its last lines of output.
Result<> runTool(const ToolRun& run);

// Like runTool, but returns stdout (stderr goes to progress) and fails past `max_bytes`.
Result<std::string> toolOutput(const ToolRun& run, size_t max_bytes = 16u << 20);

}  // namespace airlock::images
