// Per-link forwarding switches (docs/network.md "Forwarding"). airlock turns forwarding on only
// for its own sandbox links, whose sysctls disappear with the link, and never writes a host-wide
// switch such as net.ipv4.ip_forward or net.ipv6.conf.all.forwarding.
#pragma once

#include <string>

#include "airlock/result.h"

namespace airlock::net {

// Lets the host route packets that arrive on `link` (a sandbox's host end):
// net.ipv4.conf.<link>.forwarding=1 and, with IPv6, net.ipv6.conf.<link>.force_forwarding=1
// (Linux 6.17+). Without force_forwarding IPv6 needs net.ipv6.conf.all.forwarding=1 already;
// otherwise the error says so.
Result<> enableLinkForwarding(const std::string& link, bool ipv6);

// Whether replies to IPv4 sandbox traffic, which arrive on the uplink, are forwarded: "" when
// net.ipv4.ip_forward is on, else why sandboxes would get no answers (for `airlock doctor`).
std::string ipv4ForwardingProblem();

// Whether IPv6 packets from a sandbox link can be forwarded on this kernel and host: "" when
// yes, else why not (for `airlock doctor` and for the attach error).
std::string ipv6ForwardingProblem();

}  // namespace airlock::net
