// The review chain's text reviewers (supervisor/review): a policy's review section compiled into
// the patterns reviewer (RE2 rules written by operators), with the limits and shell reviewers,
// judging code and commands that tenants send.
//
// Input: policy TOML, a line "%%", then the text to judge (the whole input is the text when there
// is no "%%" line, judged under the rules of kDefaultPolicy below). The text is
// judged as python and node code, as a shell command line, and as a transfer's listing.
//
// Invariants checked: a policy that validates compiles into a patterns reviewer (the policy check
// and the reviewer agree on which rules are valid); every review is a verdict or an error with a
// message; a deny or hold names its rule and reason.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "airlock/policy/policy.h"
#include "supervisor/review/limits_reviewer.h"
#include "supervisor/review/patterns_reviewer.h"
#include "supervisor/review/shell_reviewer.h"
#include "support/fuzz_check.h"

namespace policy = airlock::policy;
namespace review = airlock::review;

namespace {

// Rules like those of policy/examples/reference.toml, for inputs without a policy of their own.
constexpr std::string_view kDefaultPolicy = R"(schema = 1
[profiles.default.review]
chain = ["limits", "patterns", "shell"]
[[profiles.default.review.patterns.rules]]
id = "py-subprocess"
pattern = '\bimport\s+subprocess\b|\bfrom\s+subprocess\s+import\b'
languages = ["python"]
reason = "subprocess is not allowed"
[[profiles.default.review.patterns.rules]]
id = "hold-curl"
pattern = '(?i)\bcurl\s+-[a-z]*o'
action = "hold"
[[profiles.default.review.patterns.rules]]
id = "archive-escape"
pattern = '(^|\n)\S+ \d+ (\.\./|/)'
languages = ["transfer"]
)";

void judge(review::Reviewer& reviewer, const review::Subject& subject) {
  auto verdict = reviewer.review(subject);
  if (!verdict) {
    FUZZ_CHECK(!verdict.error().message().empty());
    return;
  }
  if (verdict->decision != review::Decision::kAllow) {
    FUZZ_CHECK(!verdict->rule.empty());
    FUZZ_CHECK(!verdict->reason.empty());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string_view policy_text = kDefaultPolicy;
  std::string_view text = input;
  if (const size_t split = input.find("\n%%\n"); split != std::string_view::npos) {
    policy_text = input.substr(0, split);
    text = input.substr(split + 4);
  }
  auto p = policy::parse(policy_text, "fuzz.toml");
  if (!p) return 0;

  review::Subject transfer;
  transfer.kind = review::SubjectKind::kTransfer;
  transfer.language = "transfer";
  transfer.text = std::string(text);
  const review::Subject subjects[] = {review::Subject::code("python", std::string(text)),
                                      review::Subject::code("node", std::string(text)),
                                      review::Subject::commandLine(std::string(text)), transfer};

  for (const auto& [name, profile] : p->profiles) {
    auto patterns = review::PatternsReviewer::create(profile.review.patterns);
    FUZZ_CHECK(patterns.has_value());
    review::LimitsReviewer limits(profile.review.limits);
    review::ShellReviewer shell(profile.review.shell);
    for (const auto& subject : subjects) {
      judge(**patterns, subject);
      judge(limits, subject);
      judge(shell, subject);
    }
  }
  return 0;
}
