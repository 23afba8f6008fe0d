// The questions `airlock serve` asks its policy while running: which tenant a token names, which
// profiles a tenant may use, what keep-alive and lifetime a request gets, where to listen.
#include <arpa/inet.h>

#include <algorithm>
#include <charconv>

#include "airlock/policy/policy.h"

namespace airlock::policy {
namespace {

std::string q(std::string_view s) { return "'" + std::string(s) + "'"; }

// The request's value, or the default, within 1..max; errors name the request field.
Result<int64_t> withinMaximum(std::string_view field, std::optional<int64_t> requested,
                              uint32_t fallback, uint32_t max, std::string_view max_key) {
  if (!requested) return fallback;
  const std::string head = std::string(field) + " = " + std::to_string(*requested) + ": ";
  if (*requested < 1) return fail(head + "must be at least 1");
  if (*requested > max) {
    return fail(head + "above this profile's maximum of " + std::to_string(max) + " s (lifetime." +
                std::string(max_key) + ")");
  }
  return *requested;
}

}  // namespace

Result<int64_t> Lifetime::keepAliveFor(std::optional<int64_t> requested) const {
  return withinMaximum("keep_alive_s", requested, keep_alive_s, max_keep_alive_s,
                       "max_keep_alive_s");
}

Result<int64_t> Lifetime::lifetimeFor(std::optional<int64_t> requested) const {
  return withinMaximum("lifetime_s", requested, lifetime_s, max_lifetime_s, "max_lifetime_s");
}

uint32_t Server::socketModeBits() const {
  uint32_t bits = 0;
  auto [end, ec] =
      std::from_chars(socket_mode.data(), socket_mode.data() + socket_mode.size(), bits, 8);
  if (ec != std::errc() || end != socket_mode.data() + socket_mode.size()) return UINT32_MAX;
  return bits;
}

Result<std::optional<TcpEndpoint>> parseTcp(std::string_view tcp, bool tls, std::string_view key) {
  if (tcp.empty()) return std::nullopt;
  const std::string head = std::string(key) + " = " + q(tcp) + ": ";
  std::string_view host, port;
  if (tcp.front() == '[') {
    size_t close = tcp.find(']');
    if (close == std::string_view::npos || close + 1 >= tcp.size() || tcp[close + 1] != ':') {
      return fail(head + "expected [IPV6]:PORT, e.g. '[::1]:8720'");
    }
    host = tcp.substr(1, close - 1);
    port = tcp.substr(close + 2);
  } else {
    size_t colon = tcp.rfind(':');
    if (colon == std::string_view::npos) {
      return fail(head + "expected HOST:PORT, e.g. '127.0.0.1:8720'");
    }
    host = tcp.substr(0, colon);
    port = tcp.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      return fail(head + "write an IPv6 address in brackets, e.g. '[::1]:8720'");
    }
  }
  const bool bracketed = tcp.front() == '[';
  TcpEndpoint endpoint;
  in_addr v4{};
  in6_addr v6{};
  const std::string host_text(host);
  if (!bracketed && (host == "127.0.0.1" || host == "localhost")) {
    endpoint.host = "127.0.0.1";
    endpoint.loopback = true;
  } else if (bracketed && host == "::1") {
    endpoint.host = "::1";
    endpoint.loopback = true;
  } else if ((!bracketed && inet_pton(AF_INET, host_text.c_str(), &v4) == 1) ||
             (bracketed && inet_pton(AF_INET6, host_text.c_str(), &v6) == 1)) {
    // Exactly 127.0.0.1 and ::1 are "loopback" here: another 127/8 address or a wildcard may be
    // reachable from namespaces, containers or the network, and bearer tokens must not cross it
    // in clear text.
    if (!tls) {
      return fail(head + "only 127.0.0.1, [::1] or localhost may serve plain HTTP; another " +
                  "address needs TLS: set server.tls_cert and server.tls_key (or put a TLS " +
                  "proxy in front, docs/api.md)");
    }
    endpoint.host = host_text;
  } else {
    return fail(head + "the host must be an IP address (" +
                (tls ? std::string("e.g. '0.0.0.0:8720', '[::]:8720'") : "127.0.0.1, [::1]") +
                ") or localhost");
  }
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value < 1 ||
      value > 65535) {
    return fail(head + "the port must be a number from 1 to 65535");
  }
  endpoint.port = static_cast<uint16_t>(value);
  return endpoint;
}

bool validNodeName(std::string_view node) {
  if (node.empty()) return true;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  return node.size() <= 63 && alnum(node.front()) && alnum(node.back()) &&
         std::ranges::all_of(node, [&](char c) { return alnum(c) || c == '.' || c == '-'; });
}

std::string fleetIdPrefix(std::string_view node) {
  return node.empty() ? std::string() : std::string(node) + "_";
}

bool Tenant::allowsProfile(std::string_view profile) const {
  return profiles.empty() || std::ranges::find(profiles, profile) != profiles.end();
}

Result<const Tenant*> Policy::tenant(std::string_view name) const {
  if (name.empty()) name = kDefaultTenant;
  if (auto it = tenants.find(std::string(name)); it != tenants.end()) return &it->second;
  return fail("unknown tenant " + q(name) + " (policy " + source + ")");
}

std::optional<std::string> Policy::tenantForTokenSha256(std::string_view hex) const {
  if (hex.size() != 64) return std::nullopt;
  std::optional<std::string> found;
  for (const auto& [name, t] : tenants) {
    if (t.token_sha256.size() != 64) continue;
    // Every byte of every tenant's hash is compared, so the time taken says nothing about which
    // tenant, or how much of a hash, matched.
    unsigned char diff = 0;
    for (size_t i = 0; i < 64; ++i) {
      diff |= static_cast<unsigned char>(t.token_sha256[i] ^ hex[i]);
    }
    if (diff == 0 && !found) found = name;
  }
  return found;
}

}  // namespace airlock::policy
