#include "supervisor/sandbox/host/rootfs_view.h"

#include <algorithm>

namespace airlock::sandbox {

std::vector<MountEntry> systemView() {
  std::vector<MountEntry> v{{"/usr", "/usr", false}};
  // Each of these is read by ordinary programs at start (dynamic linker cache, TLS roots,
  // alternatives symlinks for awk & co, time zone, MIME and service tables).
  for (const char* etc :
       {"/etc/alternatives", "/etc/ssl", "/etc/ca-certificates", "/etc/fonts", "/etc/ld.so.cache",
        "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/timezone",
        "/etc/mime.types", "/etc/protocols", "/etc/services", "/etc/debian_version",
        "/etc/os-release", "/etc/bash.bashrc", "/etc/inputrc", "/etc/gai.conf"}) {
    v.push_back({etc, etc, true});
  }
  return v;
}

std::vector<MountEntry> composeView(const std::vector<std::string>& language_paths,
                                    const std::vector<std::string>& profile_paths) {
  std::vector<MountEntry> v = systemView();
  auto add = [&](const std::string& p, bool optional) {
    bool covered = std::any_of(v.begin(), v.end(), [&](const MountEntry& m) {
      return p == m.target || p.starts_with(m.target + "/");
    });
    if (!covered) v.push_back({p, p, optional});
  };
  for (const auto& p : language_paths) add(p, true);
  // Operator-listed paths are required: a typo must fail loudly, not vanish.
  for (const auto& p : profile_paths) add(p, false);
  return v;
}

}  // namespace airlock::sandbox
