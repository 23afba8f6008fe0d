#include "address_check.h"

#include <algorithm>
#include <array>
#include <stdexcept>

namespace airlock::transfer_http {
namespace {

// The address's bytes, network order: 4 for IPv4, 16 for IPv6.
std::vector<unsigned char> bytesOf(const IpAddress& a) {
  if (a.is_v4()) {
    const auto b = a.to_v4().to_bytes();
    return {b.begin(), b.end()};
  }
  const auto b = a.to_v6().to_bytes();
  return {b.begin(), b.end()};
}

bool samePrefix(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b,
                int prefix) {
  int i = 0;
  for (; prefix >= 8; prefix -= 8, ++i)
    if (a[i] != b[i]) return false;
  if (prefix == 0) return true;
  const unsigned char mask = static_cast<unsigned char>(0xff << (8 - prefix));
  return (a[i] & mask) == (b[i] & mask);
}

IpAddress withPrefix(const IpAddress& a, int prefix) {
  std::vector<unsigned char> b = bytesOf(a);
  for (size_t i = 0; i < b.size(); ++i) {
    const int keep = std::clamp(prefix - static_cast<int>(i) * 8, 0, 8);
    b[i] &= static_cast<unsigned char>(0xff << (8 - keep));
  }
  if (a.is_v4()) {
    boost::asio::ip::address_v4::bytes_type v4{};
    std::copy(b.begin(), b.end(), v4.begin());
    return boost::asio::ip::address_v4(v4);
  }
  boost::asio::ip::address_v6::bytes_type v6{};
  std::copy(b.begin(), b.end(), v6.begin());
  return boost::asio::ip::address_v6(v6);
}

}  // namespace

IpAddress unmapped(const IpAddress& address) {
  if (address.is_v6() && address.to_v6().is_v4_mapped())
    return boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, address.to_v6());
  return address;
}

bool Cidr::contains(const IpAddress& address) const {
  const IpAddress a = unmapped(address);
  if (a.is_v4() != network.is_v4()) return false;
  return samePrefix(bytesOf(a), bytesOf(network), prefix);
}

Cidr parseCidr(std::string_view text) {
  Cidr c;
  c.text = text;
  const size_t slash = text.find('/');
  boost::system::error_code ec;
  IpAddress a = boost::asio::ip::make_address(std::string(text.substr(0, slash)), ec);
  if (ec) throw std::invalid_argument("'" + std::string(text) + "' is not an IP range (a/len)");
  const int max = a.is_v4() ? 32 : 128;
  int prefix = max;
  if (slash != std::string_view::npos) {
    const std::string_view len = text.substr(slash + 1);
    if (len.empty() || len.size() > 3 ||
        !std::all_of(len.begin(), len.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
      throw std::invalid_argument("'" + std::string(text) + "': the prefix length is not a number");
    prefix = std::stoi(std::string(len));
    if (prefix > max)
      throw std::invalid_argument("'" + std::string(text) + "': a prefix longer than " +
                                  std::to_string(max) + " bits");
  }
  if (a.is_v6() && a.to_v6().is_v4_mapped() && prefix >= 96) {
    a = unmapped(a);
    prefix -= 96;
  }
  c.network = withPrefix(a, prefix);
  c.prefix = prefix;
  return c;
}

const ProtectedRange* AddressPolicy::refuses(const IpAddress& address) const {
  const ProtectedRange* worst = nullptr;
  for (const auto& range : blocked)
    if (range.cidr.contains(address) &&
        (worst == nullptr || range.cidr.prefix > worst->cidr.prefix))
      worst = &range;
  if (worst == nullptr) return nullptr;
  for (const auto& exempt : allow_private)
    if (exempt.contains(address) && exempt.prefix >= worst->cidr.prefix) return nullptr;
  return worst;
}

}  // namespace airlock::transfer_http
