#include "etc_files.h"

#include <cstddef>
#include <string>

namespace airlock::isolation {

const char* resolvConf(const airlock_sandbox_spec_v1& spec) {
  // A host older than ABI 1.3 has no resolv_conf field (and never asks for LINKED).
  const bool has_resolv =
      spec.struct_size >= offsetof(airlock_sandbox_spec_v1, resolv_conf) + sizeof spec.resolv_conf;
  return spec.network_mode == AIRLOCK_NETWORK_LINKED && has_resolv ? spec.resolv_conf : nullptr;
}

void planEtcFiles(const airlock_sandbox_spec_v1& spec, const RootLayout& layout, Plan& plan) {
  if (!layout.image.empty()) return;
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

  const struct {
    const char* name;
    std::string contents;
  } files[] = {
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
  for (const auto& f : files) {
    std::string path = std::string("/etc/") + f.name;
    plan.writeFile(Stage::kEtc, layout.root + path, f.contents, 0644, path);
  }
}

}  // namespace airlock::isolation
