// Host uid/gid ranges for sandbox user namespaces.
//
// Every live sandbox gets its own range of 65536 host ids starting at kIdRangeBase, so sandbox
// root and the sandbox user of two sandboxes are different host users: a file, signal or
// rlimit count of one sandbox never matches another's. Ranges are leased with flock() on a
// per-slot lock file, which works across concurrent `airlock run` processes and frees itself
// when the holder dies (even by kill -9).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "airlock/result.h"
#include "airlock/unique_fd.h"

namespace airlock::sandbox {

inline constexpr uint32_t kIdRangeBase = 1u << 28;  // far above /etc/subuid's usual 100000+
inline constexpr uint32_t kIdRangeSize = 65536;
inline constexpr uint32_t kIdRangeSlots = 4096;

class IdRangeLease {
 public:
  // Leases a free slot; lock files live in lock_dir (created 0700 if missing).
  static Result<IdRangeLease> acquire(const std::string& lock_dir);
  // Leases one given slot: a re-adopted sandbox keeps the range its files and processes use.
  static Result<IdRangeLease> acquireSlot(const std::string& lock_dir, uint32_t slot);

  uint32_t slot() const { return slot_; }
  uint32_t hostBase() const { return kIdRangeBase + slot_ * kIdRangeSize; }

 private:
  IdRangeLease(uint32_t slot, UniqueFd lock) : slot_(slot), lock_(std::move(lock)) {}
  uint32_t slot_ = 0;
  UniqueFd lock_;  // holds the flock; closing it frees the slot
};

}  // namespace airlock::sandbox
