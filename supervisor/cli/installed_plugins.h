// What this host has installed (plugins of the plugin directory, images of the store), in the
// form the policy library checks a policy file against (airlock/policy/installed.h).
#pragma once

#include "airlock/policy/installed.h"

namespace airlock::cli {

// Loads every plugin of plugin::defaultPluginDir() and asks the image store about images.
policy::Installed installedOnThisHost();

}  // namespace airlock::cli
