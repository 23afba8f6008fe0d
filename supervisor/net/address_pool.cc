#include "supervisor/net/address_pool.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>

namespace airlock::net {
namespace {

// Splits "ADDR/LEN" and parses LEN in [0, max].
Result<std::pair<std::string, int>> splitPrefix(std::string_view text, int max) {
  auto slash = text.find('/');
  if (slash == std::string_view::npos)
    return fail("missing '/LENGTH' in address range", std::string(text));
  std::string_view len_text = text.substr(slash + 1);
  int len = -1;
  auto [end, ec] = std::from_chars(len_text.data(), len_text.data() + len_text.size(), len);
  if (ec != std::errc() || end != len_text.data() + len_text.size() || len < 0 || len > max)
    return fail("prefix length must be 0.." + std::to_string(max) + " in address range",
                std::string(text));
  return std::pair{std::string(text.substr(0, slash)), len};
}

}  // namespace

Result<Ipv4Prefix> parseIpv4Prefix(std::string_view text) {
  AIRLOCK_TRY_CTX(parts, splitPrefix(text, 32), "IPv4 range");
  Ipv4Prefix p;
  if (::inet_pton(AF_INET, parts.first.c_str(), &p.address) != 1)
    return fail("not an IPv4 address in range", std::string(text));
  p.length = parts.second;
  uint32_t host_mask = p.length == 32 ? 0 : (0xffffffffu >> p.length);
  if ((ntohl(p.address.s_addr) & host_mask) != 0)
    return fail("host bits are set in IPv4 range", std::string(text));
  return p;
}

Result<Ipv6Prefix> parseIpv6Prefix(std::string_view text) {
  AIRLOCK_TRY_CTX(parts, splitPrefix(text, 128), "IPv6 range");
  Ipv6Prefix p;
  if (::inet_pton(AF_INET6, parts.first.c_str(), &p.address) != 1)
    return fail("not an IPv6 address in range", std::string(text));
  p.length = parts.second;
  for (int bit = p.length; bit < 128; ++bit)
    if (p.address.s6_addr[bit / 8] & (0x80 >> (bit % 8)))
      return fail("host bits are set in IPv6 range", std::string(text));
  return p;
}

Result<AddressPool> AddressPool::create(const Ipv4Prefix& v4, std::optional<Ipv6Prefix> v6) {
  if (v4.length > SlotAddresses::kV4Length)
    return fail("IPv4 range is smaller than one /30 sandbox link: /" + std::to_string(v4.length));
  uint64_t slots = uint64_t{1} << std::min(SlotAddresses::kV4Length - v4.length, 16);
  if (v6) {
    if (v6->length > SlotAddresses::kV6Length)
      return fail("IPv6 range is smaller than one /64 sandbox link: /" +
                  std::to_string(v6->length));
    slots = std::min(slots, uint64_t{1} << std::min(SlotAddresses::kV6Length - v6->length, 16));
  }
  return AddressPool(v4, v6, static_cast<uint32_t>(std::min<uint64_t>(slots, kMaxSlots)));
}

AddressPool::AddressPool(const Ipv4Prefix& v4, std::optional<Ipv6Prefix> v6, uint32_t slots)
    : v4_(v4), v6_(v6), in_use_(slots, false) {}

AddressPool::AddressPool(AddressPool&& other) noexcept
    : v4_(other.v4_),
      v6_(other.v6_),
      in_use_(std::move(other.in_use_)),
      next_(other.next_),
      leased_(other.leased_) {}

SlotAddresses AddressPool::addresses(uint32_t slot) const {
  SlotAddresses a;
  char buf[INET6_ADDRSTRLEN];
  uint32_t net = ntohl(v4_.address.s_addr) + slot * 4;
  for (auto [offset, out] : {std::pair{1u, &a.host_v4}, std::pair{2u, &a.sandbox_v4}}) {
    in_addr addr{htonl(net + offset)};
    *out = ::inet_ntop(AF_INET, &addr, buf, sizeof buf);
  }
  if (v6_) {
    in6_addr base = v6_->address;
    // The slot number goes into the 16 bits just below the /64 boundary (bytes 6 and 7): it is
    // below kMaxSlots = 2^16 and below 2^(64 - length), so it never touches the pool's prefix.
    base.s6_addr[6] |= static_cast<uint8_t>(slot >> 8);
    base.s6_addr[7] |= static_cast<uint8_t>(slot & 0xff);
    for (auto [last, out] : {std::pair{1, &a.host_v6}, std::pair{2, &a.sandbox_v6}}) {
      in6_addr addr = base;
      addr.s6_addr[15] = static_cast<uint8_t>(last);
      *out = ::inet_ntop(AF_INET6, &addr, buf, sizeof buf);
    }
  }
  return a;
}

std::optional<uint32_t> AddressPool::slotOfHostAddress(std::string_view host_v4) const {
  in_addr addr{};
  if (::inet_pton(AF_INET, std::string(host_v4).c_str(), &addr) != 1) return std::nullopt;
  uint32_t offset = ntohl(addr.s_addr) - ntohl(v4_.address.s_addr);
  if (offset % 4 != 1 || offset / 4 >= capacity()) return std::nullopt;
  return offset / 4;
}

Result<uint32_t> AddressPool::lease() {
  std::lock_guard lock(mu_);
  const uint32_t n = capacity();
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t slot = (next_ + i) % n;
    if (in_use_[slot]) continue;
    in_use_[slot] = true;
    next_ = (slot + 1) % n;
    ++leased_;
    return slot;
  }
  return fail("every sandbox network address is in use (" + std::to_string(n) +
              " slots): widen the IPv4/IPv6 ranges");
}

Result<> AddressPool::leaseExactly(uint32_t slot) {
  std::lock_guard lock(mu_);
  if (slot >= capacity()) return fail("address slot outside the pool", std::to_string(slot));
  if (in_use_[slot]) return fail("address slot already leased", std::to_string(slot));
  in_use_[slot] = true;
  ++leased_;
  return {};
}

void AddressPool::release(uint32_t slot) {
  std::lock_guard lock(mu_);
  if (slot < capacity() && in_use_[slot]) {
    in_use_[slot] = false;
    --leased_;
  }
}

uint32_t AddressPool::leased() const {
  std::lock_guard lock(mu_);
  return leased_;
}

}  // namespace airlock::net
