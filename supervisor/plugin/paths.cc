#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "supervisor/plugin/registry.h"

#ifndef AIRLOCK_PLUGIN_INSTALL_RELDIR
#define AIRLOCK_PLUGIN_INSTALL_RELDIR "lib/airlock/plugins"
#endif
#ifndef AIRLOCK_LIBEXEC_INSTALL_RELDIR
#define AIRLOCK_LIBEXEC_INSTALL_RELDIR "libexec/airlock"
#endif

namespace airlock::plugin {
namespace {

// <prefix> such that the executable is <prefix>/<dir>/<name>, e.g. /usr for /usr/bin/airlock.
std::string exePrefix() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "..";
  std::string exe(buf, static_cast<size_t>(n));
  std::string dir = exe.substr(0, exe.rfind('/'));
  size_t slash = dir.rfind('/');
  return slash == std::string::npos || slash == 0 ? "" : dir.substr(0, slash);
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// The install directory (which may be multiarch, lib/x86_64-linux-gnu/...) when it exists,
// else the build tree's fixed layout.
std::string underPrefix(std::string_view install_rel, std::string_view build_rel) {
  std::string prefix = exePrefix();
  if (!install_rel.empty() && install_rel.front() == '/') {
    if (exists(std::string(install_rel))) return std::string(install_rel);
  } else if (install_rel != build_rel) {
    std::string installed = prefix + "/" + std::string(install_rel);
    if (exists(installed)) return installed;
  }
  return prefix + "/" + std::string(build_rel);
}

}  // namespace

std::string defaultPluginDir() {
  const char* env = std::getenv("AIRLOCK_PLUGIN_DIR");
  if (env != nullptr && *env != '\0') return env;
  return underPrefix(AIRLOCK_PLUGIN_INSTALL_RELDIR, "lib/airlock/plugins");
}

std::string defaultAgentPath() {
  const char* env = std::getenv("AIRLOCK_AGENT");
  if (env != nullptr && *env != '\0') return env;
  return underPrefix(AIRLOCK_LIBEXEC_INSTALL_RELDIR, "libexec/airlock") + "/airlock-agent";
}

}  // namespace airlock::plugin
