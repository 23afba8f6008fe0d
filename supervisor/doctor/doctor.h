// airlock doctor: probes what this host's kernel and tools can do, and which backends follow.
// Every probe is quick, side-effect free and cleans up after itself.
#pragma once

#include <string>
#include <vector>

#include "airlock/result.h"

namespace airlock::doctor {

struct Check {
  std::string feature;  // "clone3 CLONE_NEWUSER|CLONE_NEWPID", "backend namespaces", ...
  bool ok = false;
  std::string detail;       // what was measured
  std::string consequence;  // what it means for airlock (empty when nothing to say)
};

// Runs every probe. Fails only when the probes themselves cannot run (e.g. fork refused).
Result<std::vector<Check>> probeHost();

// An aligned table: feature | ok/NO | detail | consequence.
std::string formatDoctor(const std::vector<Check>& checks);

}  // namespace airlock::doctor
