// The addresses of sandbox links: one slot per attached sandbox, each slot an IPv4 /30 and an
// IPv6 /64 carved out of the supervisor's configured ranges (docs/network.md).
//
// Slot i of an IPv4 pool a.b.c.d/N is the /30 at a.b.c.d + 4i: .1 is the host side (the
// sandbox's gateway), .2 the sandbox. Slot i of an IPv6 pool P::/M is the /64 with i in the bits
// after M: P:i::1 is the host side, P:i::2 the sandbox.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/result.h"

namespace airlock::net {

struct Ipv4Prefix {
  in_addr address{};  // network order, host bits zero
  int length = 0;
};
struct Ipv6Prefix {
  in6_addr address{};  // host bits zero
  int length = 0;
};

// "10.200.0.0/16" → prefix. The error names the text and what is wrong with it; host bits must
// be zero, so a typo does not silently pick another range.
Result<Ipv4Prefix> parseIpv4Prefix(std::string_view text);
Result<Ipv6Prefix> parseIpv6Prefix(std::string_view text);

// The two ends of one sandbox link, as text for netlink and nftables.
struct SlotAddresses {
  std::string host_v4;     // the sandbox's IPv4 gateway, e.g. "10.200.0.1"
  std::string sandbox_v4;  // "10.200.0.2"
  static constexpr int kV4Length = 30;
  std::string host_v6;     // "" when the pool has no IPv6 range
  std::string sandbox_v6;  // e.g. "fd61:6972:6c6b:0::2" (as inet_ntop writes it)
  static constexpr int kV6Length = 64;
};

class AddressPool {
 public:
  // IPv4 prefixes up to /30 and IPv6 prefixes up to /64; slots = the smaller of the two ranges'
  // capacities, at most kMaxSlots.
  static Result<AddressPool> create(const Ipv4Prefix& v4, std::optional<Ipv6Prefix> v6);
  static constexpr uint32_t kMaxSlots = 1u << 16;

  AddressPool(AddressPool&& other) noexcept;
  AddressPool& operator=(AddressPool&&) = delete;

  uint32_t capacity() const { return static_cast<uint32_t>(in_use_.size()); }
  bool hasIpv6() const { return v6_.has_value(); }
  SlotAddresses addresses(uint32_t slot) const;
  // The slot whose host side is this IPv4 address ("10.200.0.5" → 1), if the pool has it.
  std::optional<uint32_t> slotOfHostAddress(std::string_view host_v4) const;

  // Takes a free slot. Slots are handed out round-robin, so a slot just released is the last to
  // be reused: connection-tracking entries of a finished sandbox age out before its address
  // comes back. Safe from any thread.
  Result<uint32_t> lease();
  // Takes this exact slot (a sandbox adopted after a supervisor restart); fails if taken.
  Result<> leaseExactly(uint32_t slot);
  void release(uint32_t slot);
  uint32_t leased() const;

 private:
  AddressPool(const Ipv4Prefix& v4, std::optional<Ipv6Prefix> v6, uint32_t slots);

  Ipv4Prefix v4_;
  std::optional<Ipv6Prefix> v6_;
  mutable std::mutex mu_;
  std::vector<bool> in_use_;
  uint32_t next_ = 0;
  uint32_t leased_ = 0;
};

}  // namespace airlock::net
