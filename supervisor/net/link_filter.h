// A sandbox's network policy enforced where its packets pass: the host side of its link.
//
// Backends with a network stack of their own (gVisor's netstack, a VM's kernel; plugin ABI
// AIRLOCK_ISOLATION_OWN_NETSTACK) send raw frames, so the eBPF connect hooks that decide the
// connections of namespaces sandboxes never see theirs. For those sandboxes the same policy is
// rendered as an nftables chain that airlock's table jumps to for every new connection leaving
// the sandbox's link (nft_table.h). The decision order is the eBPF programs' (docs/network.md):
//   1. the rules, in order: the first whose prefix, protocol and port match decides;
//   2. the protected ranges (private, link-local, metadata, CGNAT): refused;
//   3. the mode: open accepts, allowlist (and none) refuse.
// (Loopback never leaves the sandbox's own stack, so it needs no rule here.)
//
// What differs is how a refusal looks from inside: not EPERM at connect(), which only a hook in
// the sandbox's own kernel can give, but a refusal sent at once by the host: a TCP reset for TCP
// and an ICMP port unreachable for UDP (both ECONNREFUSED), an ICMP "administratively
// prohibited" for anything else. (gVisor's netstack ignores "administratively prohibited" on
// UDP: the program would wait for a reply until its timeout.)
#pragma once

#include <string>
#include <string_view>

#include "supervisor/audit/net_rules.h"

namespace airlock::net {

// The chain's statements, one per line, ending in a verdict (pure: unit-tested).
std::string linkFilterRules(const audit::NetPolicy& policy);

// The nftables chain that holds the filter of the link with this name.
std::string linkFilterChain(std::string_view link);

}  // namespace airlock::net
