// Shared by the plugin tests: fixture paths and copying fixtures into controlled directories.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "supervisor/plugin/loader.h"
#include "test_support.h"

namespace airlock::plugin::test {

inline std::string fixtureDir() { return AIRLOCK_FIXTURE_DIR; }
inline std::string fixture(const std::string& name) { return fixtureDir() + "/" + name + ".so"; }

// The tests own their build tree, so plugins must be owned by whoever runs them.
inline LoadOptions ownedByMe() { return LoadOptions{geteuid()}; }

// Copies fixture `name` to dir/file_name with `mode`; returns the new path.
inline std::string copyFixture(const std::string& name, const std::string& dir,
                               const std::string& file_name, mode_t mode = 0644) {
  std::string dest = dir + "/" + file_name;
  std::filesystem::copy_file(fixture(name), dest,
                             std::filesystem::copy_options::overwrite_existing);
  ::chmod(dest.c_str(), mode);
  return dest;
}

}  // namespace airlock::plugin::test
