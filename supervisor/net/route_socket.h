// Links, addresses and routes through rtnetlink (libnl-route-3): the few operations a sandbox
// link needs, each reporting the object it acted on.
//
// A netlink socket acts in the network namespace it was opened in, whatever thread uses it
// later: openIn() opens one inside a sandbox's namespace from a short-lived thread (setns()
// changes only the calling thread's namespace, and that thread ends right after), so the
// supervisor's own threads never leave the host namespace.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "airlock/result.h"

struct nl_sock;

namespace airlock::net {

struct LinkInfo {
  std::string name;
  std::string alias;              // IFLA_IFALIAS, "" when unset
  std::vector<std::string> ipv4;  // local addresses, without the prefix length
};

class RouteSocket {
 public:
  // A socket in the calling thread's network namespace.
  static Result<RouteSocket> open();
  // A socket in the network namespace `netns_fd` refers to (/proc/<pid>/ns/net).
  static Result<RouteSocket> openIn(int netns_fd);

  RouteSocket(RouteSocket&&) noexcept = default;
  RouteSocket& operator=(RouteSocket&&) noexcept = default;
  ~RouteSocket();

  // Creates a veth pair, both ends down (IFF_UP in the create request fails with ENOTCONN: the
  // kernel opens an end before it is joined to its peer): `host_name` here, `peer_name` created
  // directly inside `peer_netns_fd` (so it never collides with a host link of that name). `alias`
  // is stored on the host end (IFLA_IFALIAS) to name its owner.
  Result<> createVethPair(const std::string& host_name, const std::string& alias,
                          const std::string& peer_name, int peer_netns_fd, int mtu);
  Result<int> ifindex(const std::string& name);
  Result<> setUp(const std::string& name);
  // Adds ADDRESS/length to a link, without duplicate address detection (IPv6 addresses are then
  // usable at once instead of after a second of DAD; the pool guarantees uniqueness).
  Result<> addAddress(int ifindex, const std::string& address, int length);
  Result<> addDefaultRoute(int ifindex, const std::string& gateway);
  // Deletes a link (and, for a veth, its peer). A link already gone is an error (ENODEV).
  Result<> deleteLink(const std::string& name);
  // The links whose name starts with `prefix`, with their IPv4 addresses.
  Result<std::vector<LinkInfo>> listLinks(const std::string& prefix);

 private:
  struct Free {
    void operator()(nl_sock* sock) const;
  };
  explicit RouteSocket(std::unique_ptr<nl_sock, Free> sock) : sock_(std::move(sock)) {}
  std::unique_ptr<nl_sock, Free> sock_;
};

}  // namespace airlock::net
