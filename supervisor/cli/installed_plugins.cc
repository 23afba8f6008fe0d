// installedOnThisHost(): the plugin registry and the image store, as policy::Installed.
#include "supervisor/cli/installed_plugins.h"

#include "supervisor/images/resolve.h"
#include "supervisor/plugin/registry.h"

namespace airlock::cli {

policy::Installed installedOnThisHost() {
  policy::Installed installed;
  installed.plugin_dir = plugin::defaultPluginDir();
  auto registry = plugin::Registry::loadDirectory(installed.plugin_dir);
  registry.loadAll();
  for (const auto& p : registry.plugins()) {
    const std::string& name = p.shortName();
    switch (p.kind()) {
      case AIRLOCK_PLUGIN_ISOLATION:
        installed.isolation_short.push_back(name);
        installed.isolation.insert(installed.isolation.end(), {name, p.name()});
        break;
      case AIRLOCK_PLUGIN_LANGUAGE:
        installed.languages_short.push_back(name);
        installed.languages.insert(installed.languages.end(), {name, p.name()});
        // Profiles may name a language by an alias ("py"), as requests do.
        if (auto lang = registry.language(p.name()))
          installed.languages.insert(installed.languages.end(), (*lang)->aliases.begin(),
                                     (*lang)->aliases.end());
        break;
      case AIRLOCK_PLUGIN_REVIEW:
        installed.reviewers_short.push_back(name);
        installed.reviewers.insert(installed.reviewers.end(), {name, p.name()});
        break;
      default:
        break;
    }
  }
  // The store ($AIRLOCK_IMAGE_STORE or /var/lib/airlock/images) says whether a named image is
  // there; its message names the store and what it has.
  installed.image_problem = [](const std::string& image) -> std::string {
    auto dir = images::imageRootDir(image);
    return dir ? "" : dir.error().message();
  };
  return installed;
}

}  // namespace airlock::cli
