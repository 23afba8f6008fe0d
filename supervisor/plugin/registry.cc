#include "supervisor/plugin/registry.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>

namespace airlock::plugin {
namespace {

bool endsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

const airlock_language_ops_v1& languageOps(const PluginHandle& p) {
  return *static_cast<const airlock_language_ops_v1*>(p.descriptor().ops);
}

bool inArray(const char* const* array, std::string_view value) {
  for (; array != nullptr && *array != nullptr; ++array)
    if (value == *array) return true;
  return false;
}

// The short name a lookup key refers to: "airlock.language.python" → "python", "py" → "py".
std::string shortOf(std::string_view key) {
  size_t dot = key.rfind('.');
  return std::string(dot == std::string_view::npos ? key : key.substr(dot + 1));
}

using Matcher = std::function<bool(const PluginHandle&)>;

}  // namespace

struct Registry::Impl {
  std::mutex mu;
  std::string dir;  // empty: only files given to loadFile()
  LoadOptions options;
  std::set<std::string> tried;  // paths handed to the loader, as built
  bool all_loaded = false;
  std::vector<PluginHandle> plugins;  // load order
  std::vector<Rejection> rejections;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<IsolationBackend>> isolations;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<Language>> languages;
  std::map<std::string, std::shared_ptr<TransferPlugin>> transfers;  // one instance each

  Result<> loadFileLocked(const std::string& path, const LoadOptions& opts) {
    if (!tried.insert(path).second) {
      for (const auto& p : plugins)
        if (p.path() == path) return {};
      for (const auto& r : rejections)
        if (r.path == path) return fail(r.message());
      return {};
    }
    auto reject = [&](std::string reason) -> Result<> {
      rejections.push_back({path, std::move(reason)});
      return fail(rejections.back().message());
    };
    auto plugin = loadPlugin(path, opts);
    if (!plugin) return reject(plugin.error().message());
    for (const auto& p : plugins)
      if (p.name() == plugin->name())
        return reject("duplicate name '" + p.name() + "', already loaded from '" + p.path() + "'");
    plugins.push_back(std::move(*plugin));
    return {};
  }

  // Sorted "*.so" entries of dir matching `prefix` that were not tried yet.
  std::vector<std::string> pending(std::string_view prefix) {
    std::vector<std::string> out;
    if (dir.empty()) return out;
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
      std::string reason = "cannot list directory: " + sysError("opendir", dir).error().message();
      if (tried.insert(dir).second) rejections.push_back({dir, std::move(reason)});
      return out;
    }
    while (dirent* e = ::readdir(d)) {
      std::string_view n = e->d_name;
      if (n.empty() || n[0] == '.' || !endsWith(n, ".so") || n.substr(0, prefix.size()) != prefix)
        continue;
      std::string path = dir + "/" + std::string(n);
      if (!tried.contains(path)) out.push_back(std::move(path));
    }
    ::closedir(d);
    std::sort(out.begin(), out.end());
    return out;
  }

  void loadPending(std::string_view prefix) {
    for (const auto& path : pending(prefix)) (void)loadFileLocked(path, options);
  }

  void loadAllLocked() {
    if (all_loaded) return;
    loadPending("");
    all_loaded = true;
  }

  // Finds the single plugin of `kind` matching; loads more of the directory, cheapest first,
  // until one does: "<kind>-<short>.so", then "<kind>-*.so", then everything.
  // `key` describes the lookup in messages ("'python'", "for extension '.py'"); `short_name` is
  // the conventional file's short name, empty when there is none.
  Result<PluginHandle> find(uint32_t kind, const std::string& key, const std::string& short_name,
                            const Matcher& match) {
    std::string what = std::string(kindName(kind)) + " plugin";
    auto search = [&]() -> Result<std::optional<PluginHandle>> {
      std::vector<const PluginHandle*> found;
      for (const auto& p : plugins)
        if (p.kind() == kind && match(p)) found.push_back(&p);
      if (found.empty()) return std::optional<PluginHandle>();
      if (found.size() > 1) {
        std::string names;
        for (auto* p : found) names += (names.empty() ? "'" : ", '") + p->name() + "'";
        return fail(what + " " + key + " is ambiguous: " + names + " match; use the full name");
      }
      return std::optional<PluginHandle>(*found.front());
    };
    std::string kind_prefix = std::string(kindName(kind)) + "-";
    std::vector<std::function<void()>> steps = {
        [] {},
        [&] {
          if (dir.empty() || short_name.empty() || short_name.find('/') != std::string::npos)
            return;
          std::string path = dir + "/" + kind_prefix + short_name + ".so";
          struct stat st {};
          if (::lstat(path.c_str(), &st) == 0) (void)loadFileLocked(path, options);
        },
        [&] { loadPending(kind_prefix); },
        [&] { loadAllLocked(); },
    };
    for (auto& step : steps) {
      step();
      auto r = search();
      if (!r) return Unexpected(std::move(r.error()));
      if (*r) return std::move(**r);
    }
    std::string message = "no " + what + " " + key;
    if (!dir.empty()) message += " in '" + dir + "'";
    std::string available;
    for (const auto& p : plugins)
      if (p.kind() == kind) available += (available.empty() ? "" : ", ") + p.name();
    message += available.empty() ? " (none available)" : " (available: " + available + ")";
    for (const auto& r : rejections) message += "; " + r.message();
    return fail(message);
  }

  Result<std::shared_ptr<Language>> languageInstance(const PluginHandle& p,
                                                     std::string_view config) {
    auto key = std::make_pair(p.name(), std::string(config));
    if (auto it = languages.find(key); it != languages.end()) return it->second;
    auto instance = Instance::create(p, config);
    if (!instance) return Unexpected(std::move(instance.error()));
    auto language = std::make_shared<Language>(std::move(*instance));
    languages.emplace(std::move(key), language);
    return language;
  }

  Result<std::shared_ptr<TransferPlugin>> transferInstance(const PluginHandle& p) {
    if (auto it = transfers.find(p.name()); it != transfers.end()) return it->second;
    if (p.descriptor().ops == nullptr)
      return fail("transfer plugin '" + p.name() + "' was built before ABI 1.8 and has no ops");
    auto instance = Instance::create(p, "{}");
    if (!instance) return Unexpected(std::move(instance.error()));
    auto t = std::make_shared<TransferPlugin>(std::move(*instance));
    transfers.emplace(p.name(), t);
    return t;
  }
};

Registry::Registry() : impl_(std::make_unique<Impl>()) {}
Registry::~Registry() = default;
Registry::Registry(Registry&&) noexcept = default;
Registry& Registry::operator=(Registry&&) noexcept = default;

Registry Registry::loadDirectory(const std::string& dir, const LoadOptions& options) {
  Registry r;
  r.impl_->dir = dir;
  while (r.impl_->dir.size() > 1 && r.impl_->dir.back() == '/') r.impl_->dir.pop_back();
  r.impl_->options = options;
  return r;
}

Result<> Registry::loadFile(const std::string& path, const LoadOptions& options) {
  std::lock_guard lock(impl_->mu);
  return impl_->loadFileLocked(path, options);
}

void Registry::loadAll() {
  std::lock_guard lock(impl_->mu);
  impl_->loadAllLocked();
}

std::vector<Rejection> Registry::rejections() {
  std::lock_guard lock(impl_->mu);
  return impl_->rejections;
}

std::vector<std::string> Registry::names() {
  std::lock_guard lock(impl_->mu);
  std::vector<std::string> out;
  for (const auto& p : impl_->plugins) out.push_back(p.name());
  return out;
}

std::vector<PluginHandle> Registry::plugins() {
  std::lock_guard lock(impl_->mu);
  return impl_->plugins;
}

Result<std::shared_ptr<IsolationBackend>> Registry::isolation(std::string_view name,
                                                              std::string_view config_json) {
  std::lock_guard lock(impl_->mu);
  auto plugin =
      impl_->find(AIRLOCK_PLUGIN_ISOLATION, "'" + std::string(name) + "'", shortOf(name),
                  [&](const PluginHandle& p) { return p.name() == name || p.shortName() == name; });
  if (!plugin) return Unexpected(std::move(plugin.error()));
  auto key = std::make_pair(plugin->name(), std::string(config_json));
  if (auto it = impl_->isolations.find(key); it != impl_->isolations.end()) return it->second;
  auto instance = Instance::create(*plugin, config_json);
  if (!instance) return Unexpected(std::move(instance.error()));
  auto backend = std::make_shared<IsolationBackend>(std::move(*instance));
  impl_->isolations.emplace(std::move(key), backend);
  return backend;
}

Result<std::shared_ptr<Language>> Registry::language(std::string_view name_or_alias,
                                                     std::string_view config_json) {
  std::lock_guard lock(impl_->mu);
  auto plugin = impl_->find(AIRLOCK_PLUGIN_LANGUAGE, "'" + std::string(name_or_alias) + "'",
                            shortOf(name_or_alias), [&](const PluginHandle& p) {
                              return p.name() == name_or_alias || p.shortName() == name_or_alias ||
                                     inArray(languageOps(p).aliases, name_or_alias);
                            });
  if (!plugin) return Unexpected(std::move(plugin.error()));
  return impl_->languageInstance(*plugin, config_json);
}

Result<std::shared_ptr<TransferPlugin>> Registry::transfer(std::string_view name) {
  std::lock_guard lock(impl_->mu);
  auto plugin =
      impl_->find(AIRLOCK_PLUGIN_TRANSFER, "'" + std::string(name) + "'", shortOf(name),
                  [&](const PluginHandle& p) { return p.name() == name || p.shortName() == name; });
  if (!plugin) return Unexpected(std::move(plugin.error()));
  return impl_->transferInstance(*plugin);
}

Result<std::shared_ptr<TransferPlugin>> Registry::transferFor(std::string_view location) {
  std::lock_guard lock(impl_->mu);
  // Prefixes have no conventional file name, and the longest must win: load every candidate.
  impl_->loadPending(std::string(kindName(AIRLOCK_PLUGIN_TRANSFER)) + "-");
  const PluginHandle* best = nullptr;
  int best_length = -1;
  for (const auto& p : impl_->plugins) {
    if (p.kind() != AIRLOCK_PLUGIN_TRANSFER || p.descriptor().ops == nullptr) continue;
    const auto* ops = static_cast<const airlock_transfer_ops_v1*>(p.descriptor().ops);
    const int n = matchLength(copyStringArray(ops->prefixes), location);
    if (n > best_length) {
      best_length = n;
      best = &p;
    }
  }
  if (best == nullptr) {
    std::string message = "no transfer plugin takes '" + std::string(location) + "'";
    std::string available;
    for (const auto& p : impl_->plugins)
      if (p.kind() == AIRLOCK_PLUGIN_TRANSFER)
        available += (available.empty() ? "" : ", ") + p.name();
    message += available.empty() ? " (none available)" : " (available: " + available + ")";
    return fail(message);
  }
  return impl_->transferInstance(*best);
}

Result<std::shared_ptr<Language>> Registry::languageForFile(std::string_view filename,
                                                            std::string_view config_json) {
  std::string_view base = filename.substr(filename.rfind('/') + 1);
  size_t dot = base.rfind('.');
  if (dot == std::string_view::npos || dot == 0)
    return fail("cannot tell the language of a file without an extension", std::string(filename));
  std::string_view extension = base.substr(dot);
  std::lock_guard lock(impl_->mu);
  // Extensions have no conventional file name: straight to the "language-*.so" files.
  auto plugin = impl_->find(
      AIRLOCK_PLUGIN_LANGUAGE, "for extension '" + std::string(extension) + "'", "",
      [&](const PluginHandle& p) { return inArray(languageOps(p).extensions, extension); });
  if (!plugin)
    return Unexpected(std::move(plugin.error()).wrap("file '" + std::string(filename) + "'"));
  return impl_->languageInstance(*plugin, config_json);
}

}  // namespace airlock::plugin
