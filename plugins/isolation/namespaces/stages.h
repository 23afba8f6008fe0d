// The ordered stages of starting a namespaces sandbox, and the record a failing child stage sends
// back to the parent.
//
// Parent stages run in the supervisor; child stages run in the cloned child, in this order, each
// as a run of prepared Steps (plan.h). A child stage that fails writes one FailureRecord to the
// error pipe and _exits; the parent turns it into "stage <name>: <op> '<subject>': <ERRNO>".
#pragma once

#include <cstdint>

namespace airlock::isolation {

enum class Stage : int32_t {
  // Parent, before clone.
  kPrepare,
  kClone,
  // Parent, while the child waits (nsjail subproc.cc::initParent).
  kIdMaps,
  kCgroups,
  kOomScore,
  kRelease,
  // Child, in order (nsjail contain.cc::containProc). Network runs before wait_parent (see
  // net.h), so it is listed there.
  kNetwork,
  kWaitParent,
  kIdentity,
  kRootfs,
  kEtc,
  kMounts,
  kProc,
  kDev,
  kPivotRoot,
  kHostname,
  kFds,
  kExec,
  // Parent, after releasing the child.
  kWaitExec,
};

inline constexpr const char* kStageNames[] = {
    "prepare",     "clone",    "id_maps", "cgroups", "oom_score_adj", "release", "network",
    "wait_parent", "identity", "rootfs",  "etc",     "mounts",        "proc",    "dev",
    "pivot_root",  "hostname", "fds",     "exec",    "wait_exec",
};
static_assert(sizeof kStageNames / sizeof kStageNames[0] == static_cast<int>(Stage::kWaitExec) + 1);

inline const char* stageName(Stage s) {
  auto i = static_cast<int32_t>(s);
  return i >= 0 && i <= static_cast<int32_t>(Stage::kWaitExec) ? kStageNames[i] : "unknown";
}

// Written by the child in one write() (atomic: smaller than PIPE_BUF), so the parent reads all
// or nothing. step indexes Plan::steps(): the parent keeps the op name and subject for it.
struct FailureRecord {
  int32_t stage;
  int32_t err;
  uint32_t step;
};

// The child's exit code after it has reported a stage failure.
inline constexpr int kChildExitStageFailed = 125;

}  // namespace airlock::isolation
