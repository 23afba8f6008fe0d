#include "supervisor/sandbox/package_access.h"

#include <sys/stat.h>

#include "supervisor/net/sandbox_network.h"

namespace airlock::sandbox {

std::map<std::string, std::string> packageEnvironment(const policy::Profile& profile,
                                                      uint32_t port) {
  if (!profile.packages.enabled()) return {};
  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  return {
      {"PIP_INDEX_URL", base + "/pypi/simple/"},
      // Installs go to ~/.local in the workspace: the system's packages stay as they are, and
      // still satisfy dependencies (a --target or a venv without them would fetch numpy again).
      {"PIP_USER", "1"},
      // Debian marks its Python "externally managed" (PEP 668) against installs that could
      // break the system's packages; here /usr is read-only and installs land in ~/.local.
      {"PIP_BREAK_SYSTEM_PACKAGES", "1"},
      {"PIP_DISABLE_PIP_VERSION_CHECK", "1"},
      {"PIP_NO_CACHE_DIR", "1"},  // the proxy caches; a second copy would eat the workspace
      {"PIP_PROGRESS_BAR", "off"},
      // The proxy checks a file's sha256 before it sends the first byte, so a large wheel from
      // a slow upstream is silent for a while: more than pip's default 15 s read timeout.
      {"PIP_TIMEOUT", "120"},
      {"PIP_ROOT_USER_ACTION", "ignore"},
      {"npm_config_registry", base + "/npm/"},
      {"npm_config_audit", "false"},  // advisories and funding calls go nowhere from here
      {"npm_config_fund", "false"},
      {"npm_config_update_notifier", "false"},
  };
}

std::map<std::string, std::string> profileEnvironment(const policy::Profile& profile,
                                                      uint32_t port) {
  auto env = packageEnvironment(profile, port);
  for (const auto& [k, v] : profile.env) env[k] = v;
  return env;
}

packages::ProxyOptions proxyOptionsFor(const policy::PackageSettings& settings) {
  packages::ProxyOptions o;
  o.pypi_index = settings.pypi_index;
  o.npm_registry = settings.npm_registry;
  o.cache_dir = settings.cache_dir;
  o.ca_file = settings.ca_file;
  o.timeout_s = static_cast<int>(settings.timeout_s);
  return o;
}

packages::RuleSet ruleSetFor(const policy::Profile& profile) {
  const policy::Packages& p = profile.packages;
  packages::RuleSet r;
  r.allow = p.allow;
  r.deny = p.deny;
  r.max_file_bytes = p.max_file_mb << 20;
  r.max_sandbox_bytes = p.max_sandbox_mb << 20;
  r.sdists = p.sdists;
  for (const auto& [name, hashes] : p.pins)
    r.pins[name] = policy::parsePins(hashes).value_or(std::vector<std::string>{});
  r.key =
      "profiles." + (profile.name.empty() ? std::string("default") : profile.name) + ".packages";
  return r;
}

Result<std::unique_ptr<packages::Proxy::Attachment>> attachPackageProxy(
    packages::Proxy& proxy, pid_t pid1, bool own_netstack, uint32_t port,
    const std::string& sandbox_id, const std::string& tenant, const policy::Profile& profile) {
  const std::string unreachable =
      "profile '" + profile.name +
      "' installs packages, but this backend's sandboxes have a network stack of their own, "
      "which the package proxy cannot listen in yet (docs/packages.md)";
  if (own_netstack) return fail(unreachable);
  AIRLOCK_TRY_CTX(netns, net::openNetns(pid1), "network namespace of PID 1");
  struct stat theirs {
  }, ours{};
  if (fstat(netns.get(), &theirs) != 0 || stat("/proc/self/ns/net", &ours) != 0)
    return sysError("stat", "network namespaces");
  // A listener in our own namespace would be the host's loopback, not the sandbox's.
  if (theirs.st_ino == ours.st_ino && theirs.st_dev == ours.st_dev) return fail(unreachable);
  AIRLOCK_TRY_CTX(rules, packages::compileRules(ruleSetFor(profile)), "packages rules");
  AIRLOCK_TRY_CTX(listener, packages::listenInNetns(netns.get(), static_cast<uint16_t>(port)),
                  "package proxy listener on 127.0.0.1:" + std::to_string(port));
  return proxy.attach(std::move(listener),
                      {.sandbox_id = sandbox_id, .tenant = tenant, .rules = std::move(rules)});
}

}  // namespace airlock::sandbox
