#include "supervisor/review/shell_reviewer.h"

#include <algorithm>

#include "supervisor/review/shell_scan.h"

namespace airlock::review {

bool ShellReviewer::allowed(const std::string& command) const {
  return std::ranges::find(shell_.allow, command) != shell_.allow.end();
}

Result<Verdict> ShellReviewer::review(const Subject& subject) {
  const bool is_shell = subject.kind == SubjectKind::kCommand || subject.language == "shell";
  if (!is_shell) return allow();
  const std::string what = subject.kind == SubjectKind::kCommand ? "command" : "shell code";
  if (shell_.mode == "off") {
    return decide(Decision::kDeny, "off", "this profile allows no " + what);
  }
  std::vector<std::string> commands;
  if (!subject.argv.empty()) {
    // Given as argv: no shell reads it, so argv[0] is the only command.
    commands.push_back(subject.argv[0]);
  } else {
    ShellScan scan = scanShell(subject.text);
    if (scan.refused()) {
      return decide(Decision::kDeny, scan.refused_rule, "the " + what + " " + scan.refused_reason);
    }
    commands = std::move(scan.commands);
  }
  for (const std::string& c : commands) {
    if (!allowed(c)) {
      return decide(Decision::kDeny, "not-allowlisted",
                    "the " + what + " runs '" + c + "', which is not in review.shell.allow");
    }
  }
  return allow();
}

}  // namespace airlock::review
