// The policy schema: one struct per TOML table, each field with its default and unit.
// policy/examples/reference.toml mirrors this file key for key; tests/unit/policy_reference_test
// fails when they drift apart.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/result.h"

namespace airlock::policy {

inline constexpr int64_t kSchemaVersion = 1;

struct Limits {
  uint32_t timeout_s = 30;          // wall-clock limit of one execution, seconds
  uint64_t memory_mb = 1024;        // memory (RSS + page cache + tmpfs files) of the sandbox, MiB
  uint32_t pids = 256;              // processes and threads alive at once in the sandbox
  uint32_t cpu_percent = 100;       // CPU time per wall time, percent of one CPU (200 = 2 CPUs)
  uint64_t file_size_mb = 256;      // largest file a process may write (RLIMIT_FSIZE), MiB
  uint32_t open_files = 1024;       // file descriptors per process (RLIMIT_NOFILE)
  uint64_t output_bytes = 1 << 20;  // stdout and stderr each kept per execution, bytes
  uint64_t workspace_mb = 512;      // size of the writable /home/user, MiB (counts as memory)
  uint64_t tmp_mb = 128;            // size of the writable /tmp, MiB (counts as memory)
};

struct Filesystem {
  // Empty: the root is a read-only view of the host's system directories (/usr and the parts
  // of /etc programs need). Otherwise a directory bound read-only as the whole root.
  std::string image;
  std::vector<std::string> readonly_paths;  // extra host paths bound read-only at the same place
};

struct Network {
  std::string mode = "none";  // "none": a private network namespace with loopback only
};

struct Seccomp {
  std::vector<std::string> allow;  // syscalls allowed beyond the default profile (relaxation)
  std::vector<std::string> deny;   // syscalls refused on top of the default profile
};

struct Profile {
  std::string name;
  std::string description;
  std::string isolation = "namespaces";   // isolation plugin: short ("namespaces") or dotted name
  std::string user = "user";              // "user": uid 1000 without capabilities; "root": uid 0
  std::vector<std::string> capabilities;  // kept when user = "root" (relaxation), e.g. CAP_CHOWN
  std::string hostname = "sandbox";
  std::vector<std::string> languages = {"python", "node", "shell"};  // allowed language plugins
  std::map<std::string, std::string> env;  // added to every execution's environment
  bool landlock = true;                    // Landlock on top of namespaces where the kernel has it
  Limits limits;
  Filesystem filesystem;
  Network network;
  Seccomp seccomp;
};

struct Policy {
  int64_t schema = kSchemaVersion;
  std::string default_profile = "default";
  std::map<std::string, Profile> profiles;  // always contains default_profile ("default" unless
                                            // the file names another)
  std::string source;                       // file path, or "<built-in>"
  std::string hash;                         // sha256 hex of the file bytes (or of the built-in)

  // The named profile; "" means default_profile.
  Result<const Profile*> profile(std::string_view name) const;
};

// Loads and validates a policy file. Errors carry "file:line:col: message".
Result<Policy> loadFile(const std::string& path);
// The same from text (tests, built-in default); source_name is used in messages.
Result<Policy> parse(std::string_view toml_text, const std::string& source_name);
// The policy used when none is given: one "default" profile with every default above.
Policy builtinDefault();

// Cross-field checks of one profile (after CLI overrides too); errors name the key:
// "profile 'default': limits.memory_mb = 0: must be at least 16".
Result<> validate(const Profile& profile);

// Every way this profile is looser than the defaults, one human-readable line each, logged by
// the supervisor at startup and printed by `airlock policy check`.
std::vector<std::string> relaxations(const Profile& profile);

}  // namespace airlock::policy
