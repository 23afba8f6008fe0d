// The synthesized /etc of a sandbox without an image: just enough for getpwuid, getaddrinfo
// of localhost and a prompt, and nothing of the host's (no shadow, no host users).
#pragma once

#include <airlock/plugin_abi_v1.h>

#include "common/sandbox_etc.h"  // resolvConf, for the root template
#include "mounts.h"
#include "plan.h"

namespace airlock::isolation {

// Stage etc: writes passwd, group, hosts, hostname, resolv.conf, nsswitch.conf into the root
// tmpfs. Nothing to do with an image (its /etc is its own).
void planEtcFiles(const airlock_sandbox_spec_v1& spec, const RootLayout& layout, Plan& plan);

}  // namespace airlock::isolation
