// Which commands a piece of POSIX shell would run, read conservatively: anything whose effect
// depends on run-time text (command or process substitution, eval, sourcing, here-documents,
// function definitions, variables in command position) is refused rather than guessed at.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace airlock::review {

struct ShellScan {
  std::vector<std::string> commands;  // every command word, unquoted, in order
  std::string refused_rule;           // "substitution", "eval", ...; "" when judged
  std::string refused_reason;
  bool refused() const { return !refused_rule.empty(); }
};

ShellScan scanShell(std::string_view script);

}  // namespace airlock::review
