#include "supervisor/net/sandbox_network.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "supervisor/net/forwarding.h"
#include "supervisor/net/route_socket.h"
#include "supervisor/sys/lock_file.h"

namespace airlock::net {
namespace {

bool isLinkNameChar(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; }

// FNV-1a, 64 bits: stable across runs and builds, so a restarted supervisor finds the same name.
uint64_t stableHash(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

Result<> validateAddress(const std::string& text, const char* what) {
  unsigned char buf[sizeof(in6_addr)];
  if (::inet_pton(AF_INET, text.c_str(), buf) == 1 || ::inet_pton(AF_INET6, text.c_str(), buf) == 1)
    return {};
  return fail(std::string("not an IP address in ") + what, text);
}

}  // namespace

// ---- NetworkHost ----------------------------------------------------------------------------

NetworkHost::NetworkHost(NetworkOptions options, AddressPool pool, NftTable nft)
    : options_(std::move(options)), pool_(std::move(pool)), nft_(std::move(nft)) {}

Result<std::shared_ptr<NetworkHost>> NetworkHost::create(NetworkOptions options) {
  AIRLOCK_TRY_CTX(v4, parseIpv4Prefix(options.ipv4_range), "network options");
  std::optional<Ipv6Prefix> v6;
  if (!options.ipv6_range.empty()) {
    AIRLOCK_TRY_CTX(parsed, parseIpv6Prefix(options.ipv6_range), "network options");
    v6 = parsed;
  }
  AIRLOCK_TRY_CTX(pool, AddressPool::create(v4, v6), "network options");
  for (const auto& server : options.nameservers)
    if (auto r = validateAddress(server, "nameservers"); !r)
      return Unexpected(std::move(r.error()).wrap("network options"));
  if (options.link_prefix.empty() || options.link_prefix.size() > 6 ||
      !std::ranges::all_of(options.link_prefix, isLinkNameChar))
    return fail("network options: link_prefix must be 1-6 of [a-z0-9-]", options.link_prefix);
  if (options.mtu < 1280 || options.mtu > 65535)
    return fail("network options: mtu must be 1280-65535 (IPv6 needs 1280)",
                std::to_string(options.mtu));
  if (options.nft_table.empty() ||
      !std::ranges::all_of(options.nft_table, [](char c) { return isLinkNameChar(c) || c == '_'; }))
    return fail("network options: nft_table must be [a-z0-9_-]+", options.nft_table);
  AIRLOCK_TRY_CTX(nft, NftTable::open(options.nft_table, options.link_prefix), "network options");
  return std::shared_ptr<NetworkHost>(
      new NetworkHost(std::move(options), std::move(pool), std::move(nft)));
}

std::string NetworkHost::linkName(std::string_view sandbox_id) const {
  const size_t room = IFNAMSIZ - 1 - options_.link_prefix.size();
  if (!sandbox_id.empty() && sandbox_id.size() <= room &&
      std::ranges::all_of(sandbox_id, isLinkNameChar))
    return options_.link_prefix + std::string(sandbox_id);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(stableHash(sandbox_id)));
  return options_.link_prefix + std::string(hex, room);
}

uint32_t NetworkHost::attached() const {
  std::lock_guard lock(mu_);
  return attached_;
}

Result<UniqueFd> NetworkHost::lockHost() const {
  if (options_.lock_dir.empty()) return UniqueFd();
  AIRLOCK_TRY_CTX(fd, sys::lockFileIn(options_.lock_dir, "table.lock", LOCK_EX), "network lock");
  return fd;
}

Result<UniqueFd> NetworkHost::lockSlotFile(uint32_t slot, bool* busy) const {
  *busy = false;
  if (options_.lock_dir.empty()) return UniqueFd();
  const std::string name = std::to_string(slot) + ".lock";
  AIRLOCK_TRY_CTX(fd, sys::tryLockFileIn(options_.lock_dir, name), "network lock");
  if (fd) return fd;
  *busy = true;
  errno = EWOULDBLOCK;
  return sysError("flock", options_.lock_dir + "/" + name);
}

Result<std::pair<uint32_t, UniqueFd>> NetworkHost::leaseSlot() {
  const uint32_t capacity = pool_.capacity();
  uint32_t start = 0;
  if (::getrandom(&start, sizeof start, GRND_NONBLOCK) != sizeof start) start = ::getpid();
  for (uint32_t i = 0; i < capacity; ++i) {
    const uint32_t slot = (start + i) % capacity;
    if (!pool_.leaseExactly(slot)) continue;  // another sandbox of this process has it
    bool busy = false;
    auto file = lockSlotFile(slot, &busy);
    if (file) return std::pair{slot, std::move(*file)};
    pool_.release(slot);
    if (!busy) return Unexpected(std::move(file.error()));
  }
  return fail("all " + std::to_string(capacity) + " address slots are in use; widen the ranges",
              options_.ipv4_range);
}

Result<UniqueFd> NetworkHost::leaseExactSlot(uint32_t slot) {
  if (auto r = pool_.leaseExactly(slot); !r) return Unexpected(std::move(r.error()));
  bool busy = false;
  auto file = lockSlotFile(slot, &busy);
  if (!file) pool_.release(slot);
  return file;
}

Result<> NetworkHost::addToTable(const NftSandbox& sandbox) {
  std::lock_guard lock(mu_);
  AIRLOCK_TRY_CTX(host_lock, lockHost(), "locking the nftables table");
  // Installed only when absent: another airlock process may be using it (its elements stay).
  if (!nft_.exists())
    if (auto r = nft_.install(); !r) return r;
  if (auto r = nft_.addSandbox(sandbox); !r) return r;
  ++attached_;
  return {};
}

Result<> NetworkHost::removeFromTable(const NftSandbox& sandbox) {
  std::lock_guard lock(mu_);
  AIRLOCK_TRY_CTX(host_lock, lockHost(), "locking the nftables table");
  if (attached_ > 0) --attached_;
  Result<> removed = nft_.removeSandbox(sandbox);
  if (!nft_.hasElements())
    if (auto r = nft_.remove(); !r) return r;
  return removed;
}

Result<ReclaimReport> NetworkHost::reclaimLeftovers(const std::set<std::string>& keep_ids) {
  std::lock_guard lock(mu_);
  std::set<std::string> keep_links;
  for (const auto& id : keep_ids) keep_links.insert(linkName(id));
  AIRLOCK_TRY_CTX(sock, RouteSocket::open(), "reclaiming leftover sandbox networks");
  AIRLOCK_TRY_CTX(links, sock.listLinks(options_.link_prefix),
                  "reclaiming leftover sandbox networks");
  ReclaimReport report;
  for (const auto& link : links) {
    if (keep_links.contains(link.name)) continue;
    // The link may vanish on its own meanwhile (its namespace's last process exits): fine.
    if (auto r = sock.deleteLink(link.name); !r && r.error().errnum() != ENODEV)
      return Unexpected(std::move(r.error()).wrap("reclaiming leftover sandbox networks"));
    report.links_removed.push_back(link.name);
  }
  // The sets must list exactly the links that are left: a dead sandbox's element would keep the
  // table from ever being deleted, and a kept sandbox needs its own to stay online.
  std::vector<NftSandbox> kept;
  for (const auto& link : links) {
    if (!keep_links.contains(link.name)) continue;
    for (const auto& address : link.ipv4)
      if (auto slot = pool_.slotOfHostAddress(address)) {
        SlotAddresses a = pool_.addresses(*slot);
        kept.push_back({link.name, a.sandbox_v4, a.sandbox_v6});
        break;
      }
  }
  AIRLOCK_TRY_CTX(host_lock, lockHost(), "reclaiming leftover sandbox networks");
  if (nft_.exists()) {
    if (auto r = kept.empty() ? nft_.remove() : nft_.replaceSandboxes(kept); !r)
      return Unexpected(std::move(r.error()).wrap("reclaiming leftover sandbox networks"));
    report.table_removed = kept.empty();
  }
  return report;
}

// ---- SandboxNetwork -------------------------------------------------------------------------

SandboxNetwork::SandboxNetwork(std::shared_ptr<NetworkHost> host, std::string id)
    : host_(std::move(host)), id_(std::move(id)), link_(host_->linkName(id_)) {}

SandboxNetwork::~SandboxNetwork() { (void)detach(); }

Result<std::unique_ptr<SandboxNetwork>> SandboxNetwork::attach(std::shared_ptr<NetworkHost> host,
                                                               std::string sandbox_id, int netns_fd,
                                                               std::string filter) {
  std::unique_ptr<SandboxNetwork> net(new SandboxNetwork(std::move(host), std::move(sandbox_id)));
  net->filter_ = std::move(filter);
  // On failure `net` goes out of scope and its destructor undoes the steps already done.
  if (auto r = net->build(netns_fd); !r)
    return Unexpected(std::move(r.error()).wrap("sandbox network '" + net->id_ + "'"));
  return net;
}

Result<> SandboxNetwork::build(int netns_fd) {
  NetworkHost& host = *host_;
  const bool ipv6 = host.pool_.hasIpv6();
  AIRLOCK_TRY_CTX(lease, host.leaseSlot(), "leasing addresses");
  slot_ = lease.first;
  slot_lock_ = std::move(lease.second);
  leased_ = true;
  addresses_ = host.pool_.addresses(slot_);

  AIRLOCK_TRY_CTX(host_sock, RouteSocket::open(), "opening rtnetlink in the host netns");
  if (auto r = host_sock.createVethPair(link_, "airlock sandbox " + id_, kSandboxLink, netns_fd,
                                        host.options_.mtu);
      !r)
    return Unexpected(std::move(r.error()).wrap("creating the veth pair"));
  link_created_ = true;
  if (auto r = enableLinkForwarding(link_, ipv6); !r)
    return Unexpected(std::move(r.error()).wrap("enabling forwarding on " + link_));

  AIRLOCK_TRY_CTX(host_index, host_sock.ifindex(link_), "configuring the host end");
  if (auto r = host_sock.setUp(link_); !r)
    return Unexpected(std::move(r.error()).wrap("configuring the host end"));
  if (auto r = host_sock.addAddress(host_index, addresses_.host_v4, SlotAddresses::kV4Length); !r)
    return Unexpected(std::move(r.error()).wrap("configuring the host end"));
  if (ipv6)
    if (auto r = host_sock.addAddress(host_index, addresses_.host_v6, SlotAddresses::kV6Length); !r)
      return Unexpected(std::move(r.error()).wrap("configuring the host end"));

  AIRLOCK_TRY_CTX(sandbox_sock, RouteSocket::openIn(netns_fd), "entering the sandbox netns");
  constexpr const char* kInside = "configuring eth0 in the sandbox netns";
  AIRLOCK_TRY_CTX(eth0, sandbox_sock.ifindex(kSandboxLink), kInside);
  for (const char* link : {"lo", kSandboxLink})
    if (auto r = sandbox_sock.setUp(link); !r)
      return Unexpected(std::move(r.error()).wrap(kInside));
  if (auto r = sandbox_sock.addAddress(eth0, addresses_.sandbox_v4, SlotAddresses::kV4Length); !r)
    return Unexpected(std::move(r.error()).wrap(kInside));
  if (auto r = sandbox_sock.addDefaultRoute(eth0, addresses_.host_v4); !r)
    return Unexpected(std::move(r.error()).wrap(kInside));
  if (ipv6) {
    if (auto r = sandbox_sock.addAddress(eth0, addresses_.sandbox_v6, SlotAddresses::kV6Length); !r)
      return Unexpected(std::move(r.error()).wrap(kInside));
    if (auto r = sandbox_sock.addDefaultRoute(eth0, addresses_.host_v6); !r)
      return Unexpected(std::move(r.error()).wrap(kInside));
  }

  if (auto r = host.addToTable(nftEntry()); !r) return r;
  elements_added_ = true;
  return {};
}

Result<std::unique_ptr<SandboxNetwork>> SandboxNetwork::adopt(std::shared_ptr<NetworkHost> host,
                                                              std::string sandbox_id,
                                                              std::string filter) {
  std::unique_ptr<SandboxNetwork> net(new SandboxNetwork(std::move(host), std::move(sandbox_id)));
  net->filter_ = std::move(filter);
  const std::string context = "adopting the network of sandbox '" + net->id_ + "'";
  NetworkHost& h = *net->host_;
  AIRLOCK_TRY_CTX(sock, RouteSocket::open(), context);
  AIRLOCK_TRY_CTX(links, sock.listLinks(net->link_), context);
  std::optional<uint32_t> slot;
  for (const auto& link : links)
    if (link.name == net->link_)
      for (const auto& address : link.ipv4)
        if (!slot) slot = h.pool_.slotOfHostAddress(address);
  if (!slot) return fail(context + ": no link with an address of this pool", net->link_);
  AIRLOCK_TRY_CTX(slot_lock, h.leaseExactSlot(*slot), context);
  net->slot_lock_ = std::move(slot_lock);
  net->slot_ = *slot;
  net->leased_ = true;
  net->link_created_ = true;  // ours now: detach() deletes it
  net->addresses_ = h.pool_.addresses(*slot);
  if (auto r = h.addToTable(net->nftEntry()); !r)
    return Unexpected(std::move(r.error()).wrap(context));
  net->elements_added_ = true;
  return net;
}

Result<> SandboxNetwork::detach() {
  Result<> first;
  auto keep = [&first](Result<> r, std::string_view step) {
    if (!r && first) first = Unexpected(std::move(r.error()).wrap(step));
  };
  if (link_created_) {
    link_created_ = false;
    // Deleting one end deletes the pair, with its addresses and routes. ENODEV: the sandbox's
    // namespace already died, and the kernel removed the pair with it.
    auto sock = RouteSocket::open();
    if (!sock) {
      keep(Unexpected(std::move(sock.error())), "deleting " + link_);
    } else if (auto r = sock->deleteLink(link_); !r && r.error().errnum() != ENODEV) {
      keep(std::move(r), "deleting the veth pair");
    }
  }
  if (elements_added_) {
    elements_added_ = false;
    keep(host_->removeFromTable(nftEntry()), "removing nftables elements");
  }
  if (leased_) {
    leased_ = false;
    host_->pool_.release(slot_);
    slot_lock_.reset();
  }
  if (!first) return Unexpected(std::move(first.error()).wrap("sandbox network '" + id_ + "'"));
  return first;
}

NftSandbox SandboxNetwork::nftEntry() const {
  return NftSandbox{link_, addresses_.sandbox_v4, addresses_.sandbox_v6, filter_};
}

LinkCounters linkCounters(const std::string& link) {
  auto read = [&](const char* name) -> uint64_t {
    const std::string path = "/sys/class/net/" + link + "/statistics/" + name;
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    char buf[32] = {};
    if (!fd || ::read(fd.get(), buf, sizeof buf - 1) <= 0) return 0;
    return std::strtoull(buf, nullptr, 10);
  };
  return {read("rx_bytes"), read("tx_bytes"), read("rx_packets"), read("tx_packets")};
}

Result<> SandboxNetwork::replaceFilter(std::string filter) {
  if (filter_.empty() || !elements_added_)
    return fail("sandbox network '" + id_ + "' has no filter chain to replace");
  if (filter.empty()) return fail("an empty filter would let everything through", link_);
  NftSandbox entry = nftEntry();
  entry.filter = std::move(filter);
  if (auto r = host_->replaceFilter(entry); !r) return r;
  filter_ = std::move(entry.filter);
  return {};
}

Result<> NetworkHost::replaceFilter(const NftSandbox& sandbox) {
  std::lock_guard lock(mu_);
  AIRLOCK_TRY_CTX(host_lock, lockHost(), "locking the nftables table");
  return nft_.replaceFilter(sandbox);
}

std::string NetworkHost::resolvConf() const {
  const auto& servers = options_.nameservers;
  if (servers.empty())
    return "# airlock: no DNS resolver is configured for sandboxes (docs/network.md)\n";
  std::string out = "# airlock: resolvers reached through the sandbox's NAT (docs/network.md)\n";
  for (const auto& server : servers) out += "nameserver " + server + "\n";
  return out;
}

Result<> probeNetworkSupport() {
  AIRLOCK_TRY_CTX(sock, RouteSocket::open(), "rtnetlink");
  AIRLOCK_TRY_CTX(nft, NftTable::open("airlock", "al-"), "nftables");
  return {};
}

Result<UniqueFd> newNetns() {
  // unshare() on a thread of its own: only that thread moves, and it ends right after opening
  // the namespace, so the supervisor's other threads never see it.
  Result<UniqueFd> out = fail("newNetns: the thread did not run");
  std::thread([&out] {
    if (::unshare(CLONE_NEWNET) != 0) {
      out = sysError("unshare", "CLONE_NEWNET");
      return;
    }
    UniqueFd fd(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    out = fd ? Result<UniqueFd>(std::move(fd)) : sysError("open", "/proc/thread-self/ns/net");
  }).join();
  return out;
}

Result<UniqueFd> openNetns(pid_t pid) {
  std::string path = "/proc/" + std::to_string(pid) + "/ns/net";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return sysError("open", path);
  return fd;
}

}  // namespace airlock::net
