// Every way a profile or the server is looser than the defaults in policy.h, one line each.
#include <type_traits>

#include "airlock/policy/policy.h"
#include "check.h"
#include "schema.h"

namespace airlock::policy {

std::vector<std::string> relaxations(const Profile& profile) {
  const std::string prefix = detail::profilePrefix(profile);
  std::vector<std::string> out;
  auto add = [&](std::string line) { out.push_back(prefix + std::move(line)); };

  if (profile.user == "root") add("user = 'root': code runs as uid 0 inside the sandbox");
  // Namespaces is the thinnest wall; a client choosing it over the profile's own is a loosening.
  for (const auto& choice : profile.isolation_choices)
    if (choice == "namespaces" && profile.isolation != "namespaces")
      add("isolation_choices: a create request may choose 'namespaces' instead of '" +
          profile.isolation + "'");
  for (const auto& cap : profile.capabilities) {
    add("capabilities: " + cap + " is kept inside the sandbox");
  }
  for (const auto& sys : profile.seccomp.allow) {
    add("seccomp.allow: '" + sys + "' is allowed beyond the default seccomp filter");
  }
  if (!profile.landlock) add("landlock = false: no Landlock ruleset on top of the namespaces");
  if (!profile.filesystem.image.empty()) {
    const bool store = profile.filesystem.image.front() != '/';
    add("filesystem.image = '" + profile.filesystem.image + "': the sandbox root is this " +
        (store ? "image of the image store" : "host directory") +
        " instead of the read-only system view");
  }
  for (const auto& path : profile.filesystem.readonly_paths) {
    add("filesystem.readonly_paths: host path '" + path + "' is visible read-only");
  }
  if (profile.network.mode != Network{}.mode) {
    add("network.mode = '" + profile.network.mode + "': the sandbox has a network beyond loopback");
  }
  for (size_t i = 0; i < profile.network.rules.size(); ++i) {
    const std::string& rule = profile.network.rules[i];
    if (rule.starts_with("allow")) {
      add("network.rules[" + std::to_string(i) + "] = '" + rule +
          "': allows what the network mode would refuse");
    }
  }
  if (!profile.audit.exec) add("audit.exec = false: execs in the sandbox are not recorded");
  if (!profile.audit.network) {
    add("audit.network = false: connection attempts are not recorded (the rules still apply)");
  }

  if (profile.review.fail_open) {
    add("review.fail_open = true: code runs when a reviewer fails or times out");
  }

  for (auto& line : detail::transferRelaxations(profile.transfer)) add(std::move(line));
  for (auto& line : detail::packagesRelaxations(profile.packages)) add(std::move(line));

  // Limits: every one that is above its default, read through the key table.
  Profile mine = profile;
  Profile defaults;
  for (const detail::Field& f : detail::fields()) {
    if (f.table != "limits") continue;
    std::visit(
        [&](auto get) {
          using T = std::remove_pointer_t<decltype(get(mine))>;
          if constexpr (std::is_same_v<T, uint32_t> || std::is_same_v<T, uint64_t>) {
            if (*get(mine) > *get(defaults)) {
              add(f.path() + " = " + std::to_string(*get(mine)) + ": above the default " +
                  std::to_string(*get(defaults)));
            }
          }
        },
        f.ref);
  }
  return out;
}

namespace detail {

std::vector<std::string> serverRelaxations(const Server& s) {
  std::vector<std::string> out;
  if (!s.tcp.empty()) {
    out.push_back("server.tcp = '" + s.tcp + "': the API also listens on " +
                  (s.tls_cert.empty() ? "loopback TCP" : "TCP with TLS") +
                  " (tenants with a token_sha256)");
  }
  // Connecting to a Unix socket needs write permission on it.
  if (s.socketModeBits() != UINT32_MAX && (s.socketModeBits() & 0002) != 0) {
    out.push_back("server.socket_mode = '" + s.socket_mode +
                  "': every local user may connect to the API as tenant 'default'");
  }
  return out;
}

}  // namespace detail

std::vector<std::string> relaxations(const Policy& policy) {
  std::vector<std::string> out;
  for (const auto& [name, profile] : policy.profiles) {
    for (auto& line : relaxations(profile)) out.push_back(std::move(line));
  }
  for (auto& line : detail::serverRelaxations(policy.server)) out.push_back(std::move(line));
  for (const auto& name : policy.transfer.writable_roots) {
    auto root = policy.transfer.roots.find(name);
    out.push_back("transfer.writable_roots: transfers out may write into root '" + name + "'" +
                  (root == policy.transfer.roots.end() ? "" : " (" + root->second + ")"));
  }
  return out;
}

}  // namespace airlock::policy
