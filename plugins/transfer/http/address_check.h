// Which resolved addresses transfer.http may connect to: transfer.http.blocked lists protected
// ranges (loopback, private networks, link-local, the cloud metadata address...), each with why
// it is protected, and transfer.http.allow_private exempts ranges of them.
//
// An exemption is as specific as its prefix: the most specific range containing an address
// decides, and an exemption wins a tie. So allowing 169.254.0.0/16 still keeps
// 169.254.169.254/32 (the metadata service) blocked, unless it is exempted by name. IPv4-mapped
// IPv6 addresses (::ffff:a.b.c.d) reach IPv4 hosts and are checked as the IPv4 address.
#pragma once

#include <boost/asio/ip/address.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace airlock::transfer_http {

using IpAddress = boost::asio::ip::address;

// ::ffff:a.b.c.d as a.b.c.d; any other address as it is.
IpAddress unmapped(const IpAddress& address);

struct Cidr {
  IpAddress network;  // host bits cleared
  int prefix = 0;
  std::string text;  // as written, for messages

  bool contains(const IpAddress& address) const;
};

// "10.0.0.0/8", "fd00:ec2::254/128", or an address alone (a /32 or /128). An IPv4-mapped range
// (::ffff:0:0/96 and longer) becomes the IPv4 range it maps. Throws std::invalid_argument.
Cidr parseCidr(std::string_view text);

struct ProtectedRange {
  Cidr cidr;
  std::string why;
};

struct AddressPolicy {
  std::vector<ProtectedRange> blocked;
  std::vector<Cidr> allow_private;

  // The range that keeps `address` out, or nullptr when it may be connected to.
  const ProtectedRange* refuses(const IpAddress& address) const;
};

}  // namespace airlock::transfer_http
