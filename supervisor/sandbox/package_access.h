// The package proxy as a sandbox meets it (docs/packages.md): the variables that point pip and
// npm at it, and the listener inside the sandbox's network namespace that the proxy serves.
//
// The listener is a socket the supervisor makes *in* the sandbox's namespace and keeps: code in
// the sandbox connects to 127.0.0.1:<port> and lands in the supervisor, so a sandbox with
// network "none" reaches the proxy and nothing else, and the listener says which sandbox asks.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>

#include "airlock/policy/policy.h"
#include "airlock/result.h"
#include "supervisor/packages/proxy.h"

namespace airlock::sandbox {

// What every execution of a profile whose packages are on gets: PIP_INDEX_URL, PIP_USER and
// npm_config_registry among them. Empty when the profile's packages are off.
std::map<std::string, std::string> packageEnvironment(const policy::Profile& profile,
                                                      uint32_t port);
// The profile's env with packageEnvironment under it (a variable the profile sets wins).
std::map<std::string, std::string> profileEnvironment(const policy::Profile& profile,
                                                      uint32_t port);

// The proxy's settings from [packages].
packages::ProxyOptions proxyOptionsFor(const policy::PackageSettings& settings);
// The profile's [packages] table as the proxy decides with it.
packages::RuleSet ruleSetFor(const policy::Profile& profile);

// Listens on 127.0.0.1:port in the network namespace of `pid1` (the sandbox's PID 1, seen
// from the host) and has the proxy serve it as this sandbox. Fails for a sandbox with a network
// stack of its own (gVisor's netstack, a VM's kernel: `own_netstack`), whose loopback is not
// that namespace's, and when the namespace is the supervisor's own.
Result<std::unique_ptr<packages::Proxy::Attachment>> attachPackageProxy(
    packages::Proxy& proxy, pid_t pid1, bool own_netstack, uint32_t port,
    const std::string& sandbox_id, const std::string& tenant, const policy::Profile& profile);

}  // namespace airlock::sandbox
