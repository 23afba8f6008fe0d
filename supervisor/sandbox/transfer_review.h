// A transfer as the review chain sees it (docs/transfer.md, "Review"): kind "transfer",
// language "transfer", its text the lines pattern rules match and its details the JSON the
// command, webhook and plugin reviewers get. Asked twice for an archive coming in: once the
// plugin has opened the source (its location and announced size), and again once the archive is
// staged inside the sandbox with its listing, before anything moves into place.
#pragma once

#include <cstdint>

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

}  // namespace airlock::sandbox
