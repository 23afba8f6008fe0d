// Loading one plugin library: trusted-file checks, Boost.DLL, descriptor validation.
#pragma once

#include <airlock/plugin_abi_v1.h>
#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>

#include "airlock/result.h"
#include "supervisor/plugin/trusted_file.h"

namespace airlock::plugin {

struct LoadOptions {
  // The uid that must own every plugin file (directories may also belong to root). Tests that
  // do not run as root pass geteuid().
  uid_t required_owner = 0;
};

// "isolation", "language", "transfer", "review"; empty for an unknown kind.
std::string_view kindName(uint32_t kind);

// Checks a descriptor name: "<vendor>.<kind>.<name>", three non-empty components of
// [a-z0-9_-] starting with a letter or digit, the middle one being kindName(kind).
Result<> validatePluginName(std::string_view name, uint32_t kind);

// A loaded and validated plugin library. Copies share it; the library stays mapped until the
// last copy, and every instance created from it, is gone.
class PluginHandle {
 public:
  const airlock_plugin_v1& descriptor() const { return *state_->descriptor; }
  const std::string& path() const { return state_->path; }             // as it was given
  const std::string& realPath() const { return state_->real_path; }    // symlinks resolved
  const std::string& name() const { return state_->name; }             // "airlock.language.python"
  const std::string& shortName() const { return state_->short_name; }  // "python"
  uint32_t kind() const { return state_->descriptor->kind; }
  std::string_view kindName() const { return plugin::kindName(kind()); }
  std::string version() const;

 private:
  friend Result<PluginHandle> loadTrustedPlugin(const std::string& path, TrustedFile file);
  struct State {
    // Unloads the library; its file stays open while the library stays mapped (below).
    ~State();
    // The checked file, open while the library is mapped: the library's name is
    // /proc/self/fd/N, which a plugin resolves (realpath) to find files beside it, and which
    // must not name another file while that library is loaded.
    UniqueFd file;
    std::shared_ptr<void> library;  // the boost::dll::shared_library; unloads when released
    const airlock_plugin_v1* descriptor = nullptr;  // static in the library
    std::string path, real_path, name, short_name;
  };
  explicit PluginHandle(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  std::shared_ptr<const State> state_;
};

// Loads one plugin file: checkTrustedFile, then loadTrustedPlugin. On failure the error is the
// reason only; callers add "plugin '<path>' rejected" (Registry does).
Result<PluginHandle> loadPlugin(const std::string& path, const LoadOptions& options = {});

// Loads a file checkTrustedFile passed, through its fd (/proc/self/fd/N): the library mapped is
// the inode that was checked, whatever was renamed over `path` since.
Result<PluginHandle> loadTrustedPlugin(const std::string& path, TrustedFile file);

}  // namespace airlock::plugin
