#include "supervisor/review/python_ast_reviewer.h"

#include <nlohmann/json.hpp>

#include "supervisor/review/external_verdict.h"
#include "supervisor/review/python_ast_script.h"
#include "supervisor/sandbox/run_result.h"

namespace airlock::review {

const std::string& PythonAstReviewer::checkerScript() {
  static const std::string script(kPythonAstCheckScript);
  return script;
}

std::string PythonAstReviewer::checkerRequest(const Subject& subject) const {
  return nlohmann::json{{"code", sandbox::toValidUtf8(subject.text)},
                        {"deny_imports", config_.deny_imports},
                        {"deny_calls", config_.deny_calls},
                        {"deny_attributes", config_.deny_attributes}}
      .dump();
}

Result<Verdict> PythonAstReviewer::review(const Subject& subject) {
  if (subject.kind != SubjectKind::kCode || subject.language != "python") return allow();
  if (subject.text.size() > config_.max_bytes) {
    return fail("the code is " + std::to_string(subject.text.size()) +
                " bytes, above review.python_ast.max_bytes = " + std::to_string(config_.max_bytes) +
                ", so it was not parsed");
  }
  if (!runner_) return fail("no sandbox runner to parse the code in");
  SandboxJob job;
  job.code = checkerScript();
  job.stdin_data = checkerRequest(subject);
  job.timeout = std::chrono::milliseconds(config_.timeout_ms);
  auto ran = runner_->run(job);
  if (!ran) return Unexpected(std::move(ran.error()).wrap("python_ast checker sandbox"));
  if (ran->timed_out) {
    return Unexpected(Error(
        "python_ast checker gave no verdict within " + std::to_string(config_.timeout_ms) + " ms",
        {}, ETIMEDOUT));
  }
  if (ran->exit_code != 0) {
    std::string err =
        ran->stderr_data.substr(ran->stderr_data.size() > 300 ? ran->stderr_data.size() - 300 : 0);
    return fail("python_ast checker exited with status " + std::to_string(ran->exit_code) +
                (err.empty() ? "" : ": " + err));
  }
  auto verdict = parseExternalVerdict(ran->stdout_data);
  if (!verdict) return Unexpected(std::move(verdict.error()).wrap("python_ast checker"));
  return verdict;
}

}  // namespace airlock::review
