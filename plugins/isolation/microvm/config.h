// The microVM backend's settings: the profile's [profiles.<name>.microvm] table
// (policy/microvm.h), which the supervisor hands over as the plugin's JSON config with vcpus
// and memory_mb already resolved from the profile's limits, and limits.file_size_mb.
#pragma once

#include <string_view>

#include <airlock/policy/microvm.h>
#include <airlock/result.h>

namespace airlock::isolation::microvm {

struct Config : policy::Microvm {
  // limits.file_size_mb: the largest file the sandbox's processes may write. QEMU writes what
  // the guest writes into a shared directory, so with a writable one QEMU's own RLIMIT_FSIZE
  // (else its logs' 1 MiB cap) is this.
  uint64_t file_size_bytes = 256ull << 20;
};

// Parses and checks the plugin config JSON ("{}" gives the defaults); errors name the key.
Result<Config> parseConfig(std::string_view json);

}  // namespace airlock::isolation::microvm
