// The plugin registry: which plugins a directory offers, and their instances.
//
//   auto registry = Registry::loadDirectory(defaultPluginDir());
//   auto python = registry.language("py");             // or "python", "airlock.language.python"
//   auto backend = registry.isolation("namespaces");
//
// Loading is lazy, because `airlock run` loads plugins on every run: a lookup first tries the
// conventional file "<kind>-<short name>.so" (isolation-namespaces.so, language-python.so), then
// every "<kind>-*.so", then every other "*.so" of the directory, in name order, and stops at the
// first step that finds a match. loadAll() loads everything (call it before listing plugins or
// reporting rejections). A bad plugin never fails the directory: it is recorded as a Rejection
// and the others stay usable. When two files declare the same name, the first one loaded wins
// and the second is rejected.
//
// Thread-safe. Instances are created on first use, once per (plugin, config) pair, and shared;
// they keep their library loaded even after the Registry is gone.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/result.h"
#include "supervisor/plugin/instances.h"
#include "supervisor/plugin/loader.h"
#include "supervisor/plugin/transfer_plugin.h"

namespace airlock::plugin {

struct Rejection {
  std::string path;
  std::string reason;
  // "plugin '<path>' rejected: <reason>"
  std::string message() const { return "plugin '" + path + "' rejected: " + reason; }
};

class Registry {
 public:
  Registry();
  ~Registry();
  Registry(Registry&&) noexcept;
  Registry& operator=(Registry&&) noexcept;

  // Plugins of `dir`, loaded on demand (see above). A missing or unreadable directory is
  // recorded as a rejection, not an error.
  static Registry loadDirectory(const std::string& dir, const LoadOptions& options = {});

  // Loads one file now. The error is the rejection message, which rejections() also records.
  Result<> loadFile(const std::string& path, const LoadOptions& options = {});
  // Loads every plugin of the directory not loaded yet.
  void loadAll();

  // What has been loaded or rejected so far (everything, after loadAll()).
  std::vector<Rejection> rejections();
  std::vector<std::string> names();  // full names, in load order
  std::vector<PluginHandle> plugins();

  // By short name ("namespaces") or full name ("airlock.isolation.namespaces"). config_json is
  // the plugin's policy table as JSON.
  Result<std::shared_ptr<IsolationBackend>> isolation(std::string_view name,
                                                      std::string_view config_json = "{}");
  // By short name, full name or alias ("py").
  Result<std::shared_ptr<Language>> language(std::string_view name_or_alias,
                                             std::string_view config_json = "{}");
  // Transfer plugins by short or full name ("http", "airlock.transfer.http").
  Result<std::shared_ptr<TransferPlugin>> transfer(std::string_view name);
  // The transfer plugin whose prefix is the longest that `location` starts with (every
  // "transfer-*.so" is loaded for this); "" prefixes take locations without a scheme.
  Result<std::shared_ptr<TransferPlugin>> transferFor(std::string_view location);
  // By the extension of `filename` ("main.py" → ".py").
  Result<std::shared_ptr<Language>> languageForFile(std::string_view filename,
                                                    std::string_view config_json = "{}");

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Where plugins and the agent live, relative to the running executable: <exe>/../lib/airlock/
// plugins and <exe>/../libexec/airlock/airlock-agent (the build tree and the install tree share
// this layout; an install with a multiarch libdir is found too). The environment variables
// AIRLOCK_PLUGIN_DIR and AIRLOCK_AGENT override them.
std::string defaultPluginDir();
std::string defaultAgentPath();

}  // namespace airlock::plugin
