// A transfer as the review chain sees it (docs/transfer.md, "Review"): kind "transfer",
// language "transfer", its text the lines pattern rules match and its details the JSON the
// command, webhook and plugin reviewers get. Asked twice for an archive coming in: once the
// plugin has opened the source (its location and announced size), and again once the archive is
// staged inside the sandbox with its listing, before anything moves into place.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "supervisor/review/verdict.h"
#include "supervisor/sandbox/run_result.h"
#include "supervisor/sandbox/transfer.h"

namespace airlock::sandbox {

// `t`: direction, plugin, location (credentials removed) and sandbox path. `size`: the bytes the
// source announced, 0 unknown. `listing`: the staged archive's entries, or null.
//   text: "in https://h/a.tar.gz -> /home/user/data"  (out: "out /home/user/r -> LOCATION")
//         then "file 1234 src/main.py", "dir 0 src", "symlink 0 l -> src", ... per entry
review::Subject transferSubject(const TransferOutcome& t, uint64_t size,
                                const ArchiveListing* listing);

// The chain's looks at one transfer (Manager::judge, or empty: nothing reviews), each verdict
// kept on the record `t`; an error is a refusal, and denied() then says so.
class TransferReview {
 public:
  using Judge = std::function<std::optional<review::Verdict>(review::Subject)>;
  TransferReview(Judge judge, TransferOutcome& t, uint64_t size)
      : judge_(std::move(judge)), t_(t), size_(size) {}
  // Before a byte moves (listing null), or with the staged archive's listing.
  Result<> operator()(const ArchiveListing* listing);
  bool denied() const { return denied_; }

 private:
  Judge judge_;
  TransferOutcome& t_;
  uint64_t size_;
  bool denied_ = false;
};

}  // namespace airlock::sandbox
