#include "supervisor/net/route_socket.h"

#include <arpa/inet.h>
#include <linux/if_addr.h>
#include <net/if.h>
#include <netlink/errno.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>
#include <sched.h>

#include <cerrno>
#include <optional>
#include <thread>

namespace airlock::net {
namespace {

// libnl returns its own codes (-NLE_*); the common ones map back to the errno the kernel sent,
// so messages read like every other airlock error ("…: EPERM (Operation not permitted)").
int errnoOf(int nl_err) {
  switch (nl_err < 0 ? -nl_err : nl_err) {
    case NLE_PERM:
      return EPERM;
    case NLE_NOACCESS:
      return EACCES;
    case NLE_EXIST:
      return EEXIST;
    case NLE_NODEV:
      return ENODEV;
    case NLE_OBJ_NOTFOUND:
      return ENOENT;
    case NLE_INVAL:
      return EINVAL;
    case NLE_BUSY:
      return EBUSY;
    case NLE_NOMEM:
      return ENOMEM;
    case NLE_RANGE:
      return ERANGE;
    case NLE_AGAIN:
      return EAGAIN;
    case NLE_OPNOTSUPP:
      return EOPNOTSUPP;
    case NLE_AF_NOSUPPORT:
      return EAFNOSUPPORT;
    case NLE_NOADDR:
      return EADDRNOTAVAIL;
    default:
      return 0;
  }
}

Unexpected nlError(int nl_err, std::string op, std::string subject = {}) {
  int e = errnoOf(nl_err);
  if (e == 0) op += std::string(" (libnl: ") + nl_geterror(nl_err) + ")";
  return Unexpected(Error(std::move(op), std::move(subject), e));
}

template <typename T, void (*Release)(T*)>
struct NlDeleter {
  void operator()(T* p) const {
    if (p != nullptr) Release(p);
  }
};
using LinkPtr = std::unique_ptr<rtnl_link, NlDeleter<rtnl_link, rtnl_link_put>>;
using AddrPtr = std::unique_ptr<rtnl_addr, NlDeleter<rtnl_addr, rtnl_addr_put>>;
using RoutePtr = std::unique_ptr<rtnl_route, NlDeleter<rtnl_route, rtnl_route_put>>;
using NlAddrPtr = std::unique_ptr<nl_addr, NlDeleter<nl_addr, nl_addr_put>>;
using CachePtr = std::unique_ptr<nl_cache, NlDeleter<nl_cache, nl_cache_free>>;

Result<NlAddrPtr> parseAddress(const std::string& text, int family) {
  nl_addr* addr = nullptr;
  if (int err = nl_addr_parse(text.c_str(), family, &addr); err < 0)
    return nlError(err, "parsing address", text);
  return NlAddrPtr(addr);
}

}  // namespace

void RouteSocket::Free::operator()(nl_sock* sock) const { nl_socket_free(sock); }

RouteSocket::~RouteSocket() = default;

Result<RouteSocket> RouteSocket::open() {
  std::unique_ptr<nl_sock, Free> sock(nl_socket_alloc());
  if (!sock) return Unexpected(Error("nl_socket_alloc", {}, ENOMEM));
  if (int err = nl_connect(sock.get(), NETLINK_ROUTE); err < 0)
    return nlError(err, "connecting a NETLINK_ROUTE socket");
  return RouteSocket(std::move(sock));
}

Result<RouteSocket> RouteSocket::openIn(int netns_fd) {
  std::optional<Result<RouteSocket>> result;
  std::thread([&] {
    // setns() moves only this thread, which ends as soon as the socket is open.
    if (::setns(netns_fd, CLONE_NEWNET) != 0) {
      result = sysError("setns(CLONE_NEWNET) into the sandbox network namespace");
      return;
    }
    result = open();
  }).join();
  return std::move(*result);
}

Result<> RouteSocket::createVethPair(const std::string& host_name, const std::string& alias,
                                     const std::string& peer_name, int peer_netns_fd, int mtu) {
  LinkPtr host(rtnl_link_veth_alloc());
  if (!host) return Unexpected(Error("rtnl_link_veth_alloc", host_name, ENOMEM));
  rtnl_link_set_name(host.get(), host_name.c_str());
  rtnl_link_set_ifalias(host.get(), alias.c_str());
  rtnl_link_set_mtu(host.get(), static_cast<unsigned>(mtu));
  rtnl_link* peer = rtnl_link_veth_get_peer(host.get());  // owned by `host`
  rtnl_link_set_name(peer, peer_name.c_str());
  rtnl_link_set_mtu(peer, static_cast<unsigned>(mtu));
  // The peer is born inside the sandbox's namespace (IFLA_NET_NS_FD in the peer's info).
  rtnl_link_set_ns_fd(peer, peer_netns_fd);
  rtnl_link_put(peer);
  if (int err = rtnl_link_add(sock_.get(), host.get(), NLM_F_CREATE | NLM_F_EXCL); err < 0)
    return nlError(err, "creating veth pair with " + peer_name + " in the sandbox netns",
                   host_name);
  return {};
}

Result<int> RouteSocket::ifindex(const std::string& name) {
  rtnl_link* raw = nullptr;
  if (int err = rtnl_link_get_kernel(sock_.get(), 0, name.c_str(), &raw); err < 0)
    return nlError(err, "looking up link", name);
  LinkPtr link(raw);
  return rtnl_link_get_ifindex(link.get());
}

Result<> RouteSocket::setUp(const std::string& name) {
  LinkPtr change(rtnl_link_alloc());
  if (!change) return Unexpected(Error("rtnl_link_alloc", name, ENOMEM));
  rtnl_link_set_name(change.get(), name.c_str());
  rtnl_link_set_flags(change.get(), IFF_UP);
  LinkPtr orig(rtnl_link_alloc());
  if (!orig) return Unexpected(Error("rtnl_link_alloc", name, ENOMEM));
  rtnl_link_set_name(orig.get(), name.c_str());
  if (int err = rtnl_link_change(sock_.get(), orig.get(), change.get(), 0); err < 0)
    return nlError(err, "setting link up", name);
  return {};
}

Result<> RouteSocket::addAddress(int ifindex, const std::string& address, int length) {
  const int family = address.find(':') == std::string::npos ? AF_INET : AF_INET6;
  AIRLOCK_TRY_CTX(local, parseAddress(address, family), "adding an address");
  nl_addr_set_prefixlen(local.get(), length);
  AddrPtr addr(rtnl_addr_alloc());
  if (!addr) return Unexpected(Error("rtnl_addr_alloc", address, ENOMEM));
  rtnl_addr_set_ifindex(addr.get(), ifindex);
  rtnl_addr_set_local(addr.get(), local.get());
  if (family == AF_INET6) rtnl_addr_set_flags(addr.get(), IFA_F_NODAD);
  if (int err = rtnl_addr_add(sock_.get(), addr.get(), NLM_F_CREATE | NLM_F_EXCL); err < 0)
    return nlError(err, "adding address", address + "/" + std::to_string(length));
  return {};
}

Result<> RouteSocket::addDefaultRoute(int ifindex, const std::string& gateway) {
  const int family = gateway.find(':') == std::string::npos ? AF_INET : AF_INET6;
  AIRLOCK_TRY_CTX(gw, parseAddress(gateway, family), "adding the default route");
  AIRLOCK_TRY_CTX(dst, parseAddress(family == AF_INET ? "0.0.0.0/0" : "::/0", family),
                  "adding the default route");
  RoutePtr route(rtnl_route_alloc());
  if (!route) return Unexpected(Error("rtnl_route_alloc", gateway, ENOMEM));
  rtnl_route_set_family(route.get(), static_cast<uint8_t>(family));
  rtnl_route_set_dst(route.get(), dst.get());
  rtnl_nexthop* hop = rtnl_route_nh_alloc();  // owned by `route` once added
  if (hop == nullptr) return Unexpected(Error("rtnl_route_nh_alloc", gateway, ENOMEM));
  rtnl_route_nh_set_gateway(hop, gw.get());
  rtnl_route_nh_set_ifindex(hop, ifindex);
  rtnl_route_add_nexthop(route.get(), hop);
  if (int err = rtnl_route_add(sock_.get(), route.get(), NLM_F_CREATE | NLM_F_EXCL); err < 0)
    return nlError(err, "adding default route via", gateway);
  return {};
}

Result<> RouteSocket::deleteLink(const std::string& name) {
  LinkPtr link(rtnl_link_alloc());
  if (!link) return Unexpected(Error("rtnl_link_alloc", name, ENOMEM));
  rtnl_link_set_name(link.get(), name.c_str());
  if (int err = rtnl_link_delete(sock_.get(), link.get()); err < 0)
    return nlError(err, "deleting link", name);
  return {};
}

Result<std::vector<LinkInfo>> RouteSocket::listLinks(const std::string& prefix) {
  nl_cache* raw = nullptr;
  if (int err = rtnl_link_alloc_cache(sock_.get(), AF_UNSPEC, &raw); err < 0)
    return nlError(err, "listing links");
  CachePtr links(raw);
  std::vector<std::pair<int, LinkInfo>> found;
  for (nl_object* obj = nl_cache_get_first(links.get()); obj != nullptr;
       obj = nl_cache_get_next(obj)) {
    auto* link = reinterpret_cast<rtnl_link*>(obj);
    std::string name = rtnl_link_get_name(link);
    if (!name.starts_with(prefix)) continue;
    const char* alias = rtnl_link_get_ifalias(link);
    found.push_back({rtnl_link_get_ifindex(link), LinkInfo{name, alias ? alias : "", {}}});
  }
  if (found.empty()) return std::vector<LinkInfo>{};
  if (int err = rtnl_addr_alloc_cache(sock_.get(), &raw); err < 0)
    return nlError(err, "listing addresses");
  CachePtr addrs(raw);
  for (nl_object* obj = nl_cache_get_first(addrs.get()); obj != nullptr;
       obj = nl_cache_get_next(obj)) {
    auto* addr = reinterpret_cast<rtnl_addr*>(obj);
    if (rtnl_addr_get_family(addr) != AF_INET) continue;
    nl_addr* local = rtnl_addr_get_local(addr);
    if (local == nullptr || nl_addr_get_len(local) != sizeof(in_addr)) continue;
    char buf[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, nl_addr_get_binary_addr(local), buf, sizeof buf);
    for (auto& [index, info] : found)
      if (index == rtnl_addr_get_ifindex(addr)) info.ipv4.push_back(buf);
  }
  std::vector<LinkInfo> out;
  for (auto& [index, info] : found) out.push_back(std::move(info));
  return out;
}

}  // namespace airlock::net
