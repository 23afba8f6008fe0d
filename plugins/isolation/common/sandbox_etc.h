// The synthesized /etc of a sandbox without an image, shared by the isolation backends: just
// enough for getpwuid, getaddrinfo of localhost and a prompt, and nothing of the host's (no
// shadow, no host users). Header-only: each backend is its own shared library.
#pragma once

#include <airlock/plugin_abi_v1.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace airlock::isolation {

// What /etc/resolv.conf holds: the spec's resolv_conf for a linked network, else nothing.
inline const char* resolvConf(const airlock_sandbox_spec_v1& spec) {
  // A host older than ABI 1.3 has no resolv_conf field (and never asks for LINKED).
  const bool has_resolv =
      spec.struct_size >= offsetof(airlock_sandbox_spec_v1, resolv_conf) + sizeof spec.resolv_conf;
  return spec.network_mode == AIRLOCK_NETWORK_LINKED && has_resolv ? spec.resolv_conf : nullptr;
}

// passwd, group, hosts, hostname, resolv.conf and nsswitch.conf: (name under /etc, contents).
inline std::vector<std::pair<std::string, std::string>> sandboxEtcFiles(
    const airlock_sandbox_spec_v1& spec) {
  const std::string uid = std::to_string(spec.user_uid);
  const std::string gid = std::to_string(spec.user_gid);
  const std::string host = spec.hostname;
  const bool linked = spec.network_mode == AIRLOCK_NETWORK_LINKED;
  const char* resolv = resolvConf(spec);
  std::string passwd = "root:x:0:0:root:/root:/bin/bash\n";
  std::string group = "root:x:0:\n";
  if (spec.user_uid != 0) passwd += "user:x:" + uid + ":" + gid + "::/home/user:/bin/bash\n";
  if (spec.user_gid != 0) group += "user:x:" + gid + ":\n";
  passwd += "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
  group += "nogroup:x:65534:\n";
  return {
      {"passwd", std::move(passwd)},
      {"group", std::move(group)},
      {"hosts", "127.0.0.1\tlocalhost " + host + "\n::1\tlocalhost ip6-localhost ip6-loopback\n"},
      {"hostname", host + "\n"},
      // Loopback only: nothing to resolve against, so names come from /etc/hosts alone.
      {"resolv.conf", resolv != nullptr ? resolv : ""},
      {"nsswitch.conf", std::string("passwd: files\ngroup: files\nshadow: files\nhosts: files") +
                            (linked ? " dns" : "") +
                            "\nnetworks: files\nprotocols: files\nservices: files\n"},
  };
}

}  // namespace airlock::isolation
