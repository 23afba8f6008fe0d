// A routed, NATed network for a sandbox whose policy allows more than loopback
// (docs/network.md).
//
// Each attached sandbox gets a veth pair: the host end `<link_prefix><short id>` (al-…) and
// `eth0` inside the sandbox's network namespace, an IPv4 /30 and an IPv6 /64 from the host's
// AddressPool, default routes through the host end, and elements in airlock's nftables table
// (masquerade, anti-spoofing, no access to host services). Where a sandbox may connect is not
// decided here: the eBPF cgroup programs (docs/audit.md "Network policy") decide every connect.
//
// Attach order: address lease → veth pair (eth0 born in the sandbox's namespace) → forwarding
// on the host end → host end up, its addresses → lo and eth0 up, sandbox addresses, default
// routes → nft set elements (and the table, for the host's first sandbox). A failing step undoes
// the earlier ones. Detach: veth pair (the kernel removes both ends and their addresses and
// routes) → nft elements (and the table, for the host's last sandbox) → address lease.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/result.h"
#include "airlock/unique_fd.h"
#include "supervisor/net/address_pool.h"
#include "supervisor/net/nft_table.h"

namespace airlock::net {

struct NetworkOptions {
  std::string ipv4_range = "10.200.0.0/16";        // each sandbox takes a /30 of it
  std::string ipv6_range = "fd61:6972:6c6b::/48";  // each sandbox a /64; "" = IPv4 only
  // DNS servers the sandbox's resolv.conf names (NetworkHost::resolvConf). Empty: none. They
  // are reached through NAT like any destination, so the connect policy must allow port 53.
  std::vector<std::string> nameservers;
  int mtu = 1500;                     // of both veth ends; lower it to the uplink's MTU if smaller
  std::string nft_table = "airlock";  // an `inet` table owned by airlock alone
  std::string link_prefix = "al-";    // 1-6 characters; host ends are <prefix><short id>
  // Where flock()ed files let several airlock processes (a `serve`, `run`s, tests) share the
  // table and the ranges: table.lock is held around every change of the table (the first
  // sandbox of any process installs it, the last one removes it), <slot>.lock by each sandbox
  // for as long as it holds that slot's addresses. "": this process alone uses them.
  std::string lock_dir;
};

struct ReclaimReport {
  std::vector<std::string> links_removed;
  bool table_removed = false;
};

class SandboxNetwork;

// The host side every sandbox network shares: options, the address pool and the nft table.
// One per supervisor process (two instances with the same table and prefix would fight).
class NetworkHost {
 public:
  // Validates the options (ranges, nameservers, prefix, mtu); touches nothing on the host.
  static Result<std::shared_ptr<NetworkHost>> create(NetworkOptions options);

  const NetworkOptions& options() const { return options_; }
  const AddressPool& pool() const { return pool_; }
  // The host end's name for a sandbox: <prefix><id> when the id fits the 15-byte link-name
  // limit, else <prefix><hash of the id> (the full id is in the link's alias).
  std::string linkName(std::string_view sandbox_id) const;
  uint32_t attached() const;
  // Every networked sandbox's /etc/resolv.conf: the configured nameservers, or a comment saying
  // there is no resolver. Known before attach(), so it can be mounted before the sandbox starts.
  std::string resolvConf() const;

  // After a supervisor restart: deletes every link with this host's prefix that belongs to no
  // sandbox in `keep_ids` (the live sandboxes of every airlock process, adopted ones included).
  // With nothing kept it deletes the nft table; otherwise it rebuilds the table's sets from the
  // kept links, so no element of a dead sandbox stays.
  Result<ReclaimReport> reclaimLeftovers(const std::set<std::string>& keep_ids = {});

 private:
  friend class SandboxNetwork;
  NetworkHost(NetworkOptions options, AddressPool pool, NftTable nft);
  // Adds a sandbox to the table's sets, installing the table when no sandbox of any process has
  // it yet. Under mu_ and the host lock.
  Result<> addToTable(const NftSandbox& sandbox);
  // Removes a sandbox from the sets, and the table when no sandbox of any process is left in it.
  Result<> removeFromTable(const NftSandbox& sandbox);
  Result<> replaceFilter(const NftSandbox& sandbox);
  // flock() on lock_dir/table.lock (none without a lock_dir); released when the fd closes.
  Result<UniqueFd> lockHost() const;
  // Takes a slot free in this process and, with a lock_dir, in every other: returns the slot's
  // flock()ed file (an empty fd without a lock_dir). Random start, so concurrent processes
  // rarely contend and a slot just released is rarely the next one taken (its conntrack
  // entries age out first).
  Result<std::pair<uint32_t, UniqueFd>> leaseSlot();
  // Takes this exact slot (adopt), failing if any process holds it.
  Result<UniqueFd> leaseExactSlot(uint32_t slot);
  Result<UniqueFd> lockSlotFile(uint32_t slot, bool* busy) const;

  NetworkOptions options_;
  AddressPool pool_;
  mutable std::mutex mu_;  // guards nft_ and attached_
  NftTable nft_;
  uint32_t attached_ = 0;
};

class SandboxNetwork {
 public:
  // Attaches a sandbox's network namespace (an fd of /proc/<pid>/ns/net, see openNetns, or of
  // newNetns). `filter`: statements of the link's own filter chain (link_filter.h), in place
  // before the link passes a packet, for a sandbox whose connections the eBPF hooks cannot see;
  // "" for none. Safe to call from several threads at once.
  static Result<std::unique_ptr<SandboxNetwork>> attach(std::shared_ptr<NetworkHost> host,
                                                        std::string sandbox_id, int netns_fd,
                                                        std::string filter = {});
  // Takes over the network of a sandbox adopted after a supervisor restart: its link survived
  // reclaimLeftovers(keep_ids); the lease and nft elements are rebuilt from the link's address,
  // with `filter` as attach() takes it (a sandbox with its own network stack: its rules).
  static Result<std::unique_ptr<SandboxNetwork>> adopt(std::shared_ptr<NetworkHost> host,
                                                       std::string sandbox_id,
                                                       std::string filter = {});
  ~SandboxNetwork();
  SandboxNetwork(const SandboxNetwork&) = delete;
  SandboxNetwork& operator=(const SandboxNetwork&) = delete;

  // Removes everything attach() made; idempotent. Reports the first step that failed (the
  // others still run).
  Result<> detach();

  const std::string& sandboxId() const { return id_; }
  const std::string& hostLink() const { return link_; }
  static constexpr const char* kSandboxLink = "eth0";
  const SlotAddresses& addresses() const { return addresses_; }

  // Whether the link has its own filter chain, and replacing its statements (new rules through
  // the API); only for a link attached with one.
  bool filtered() const { return !filter_.empty(); }
  Result<> replaceFilter(std::string filter);
  uint32_t slot() const { return slot_; }

 private:
  SandboxNetwork(std::shared_ptr<NetworkHost> host, std::string id);
  Result<> build(int netns_fd);
  NftSandbox nftEntry() const;

  std::shared_ptr<NetworkHost> host_;
  std::string id_;
  std::string link_;
  uint32_t slot_ = 0;
  SlotAddresses addresses_;
  std::string filter_;
  // What exists, so detach() (and a failed attach) undoes exactly that.
  bool leased_ = false;
  UniqueFd slot_lock_;  // lock_dir/<slot>.lock, flock()ed while the slot is ours
  bool link_created_ = false;
  bool elements_added_ = false;
};

// Whether this host can build sandbox networks: rtnetlink opens and libnftables loads. Changes
// nothing (for `airlock doctor`).
Result<> probeNetworkSupport();

// Opens the network namespace of a process (/proc/<pid>/ns/net) for attach().
Result<UniqueFd> openNetns(pid_t pid);

// A link's counters on the host (/sys/class/net/<link>/statistics): for a sandbox's host end,
// what it received is what the sandbox sent. Zeros for a link that is gone.
struct LinkCounters {
  uint64_t rx_bytes = 0, tx_bytes = 0, rx_packets = 0, tx_packets = 0;
};
LinkCounters linkCounters(const std::string& link);

// A new, empty network namespace (loopback down), for a sandbox whose backend runs in one the
// supervisor made and linked first. It lives as long as the fd or a process in it.
Result<UniqueFd> newNetns();

}  // namespace airlock::net
