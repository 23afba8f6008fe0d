// A backend's per-sandbox directory, <scratch_dir>/<sandbox_id>, and what backends with a
// monitor process share: only plain files live there (runsc and QEMU mount nothing on the
// host), so removing it is a plain recursive delete. Header-only: each backend is its own
// shared library.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

#include <airlock/plugin_abi_v1.h>
#include <airlock/result.h>

namespace airlock::isolation {

// [a-z0-9-]{1,63}: safe as one path component and as runsc's container id.
inline bool validSandboxId(std::string_view id) {
  if (id.empty() || id.size() > 63) return false;
  for (char c : id)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return true;
}

// Removes `dir` and everything in it (symlinks themselves, never their targets).
inline void removeTree(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

// Makes <scratch_dir>/<sandbox_id>/ afresh (a stale one, from a sandbox of this id that was
// never released, is removed first).
inline Result<std::string> makeScratchDir(const airlock_sandbox_spec_v1& spec) {
  if (spec.scratch_dir == nullptr || spec.scratch_dir[0] != '/')
    return fail("scratch_dir is not an absolute path");
  if (spec.sandbox_id == nullptr || !validSandboxId(spec.sandbox_id))
    return fail("sandbox_id is not [a-z0-9-]{1,63}");
  std::string dir = std::string(spec.scratch_dir) + "/" + spec.sandbox_id;
  removeTree(dir);
  if (::mkdir(dir.c_str(), 0700) != 0) return sysError("mkdir", dir);
  return dir;
}

// For a backend flagged AIRLOCK_ISOLATION_OWN_NETSTACK: the linked network namespace its monitor
// must run in (LINKED), or -1 for none (LOOPBACK).
inline Result<int> linkedNetns(const airlock_sandbox_spec_v1& spec) {
  if (spec.network_mode == AIRLOCK_NETWORK_LOOPBACK) return -1;
  if (spec.network_mode != AIRLOCK_NETWORK_LINKED)
    return fail("unknown network_mode " + std::to_string(spec.network_mode));
  const bool has_fd =
      spec.struct_size >= offsetof(airlock_sandbox_spec_v1, netns_fd) + sizeof spec.netns_fd;
  if (!has_fd || spec.netns_fd < 0)
    // An older supervisor links the namespace of the returned pid after start(), which is the
    // monitor's own: the sandbox would never see the link.
    return fail(
        "network.mode allowlist and open need a supervisor that links the namespace "
        "before start (plugin ABI 1.6)");
  return spec.netns_fd;
}

// The host path behind an fd the supervisor handed over (the agent's binary).
inline Result<std::string> hostPathOf(int fd) {
  char buf[4096];
  std::string link = "/proc/self/fd/" + std::to_string(fd);
  ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
  if (n <= 0 || static_cast<size_t>(n) == sizeof buf) return sysError("readlink", link);
  std::string path(buf, static_cast<size_t>(n));
  if (!path.starts_with('/') || path.ends_with(" (deleted)"))
    return fail("the agent binary has no path on the host", path);
  return path;
}

}  // namespace airlock::isolation
