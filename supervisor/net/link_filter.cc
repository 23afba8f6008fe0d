#include "supervisor/net/link_filter.h"

#include <vector>

namespace airlock::net {
namespace {

// A refusal the sandbox's stack sees at once (a silent drop would leave connect() hanging).
constexpr const char* kRefuse = "jump refuse";

std::string daddr(const policy::Cidr& cidr) {
  return std::string(cidr.family == 4 ? "ip daddr " : "ip6 daddr ") + cidr.toString();
}

std::string match(const audit::NetRule& r) {
  std::string m = daddr(r.cidr);
  const bool all_ports = r.port_lo == 0 && r.port_hi == 65535;
  if (r.protocol == 6) m += " meta l4proto tcp";
  if (r.protocol == 17) m += " meta l4proto udp";
  // A port range only means something for TCP and UDP, as in the connect hooks.
  if (r.protocol == 0 && !all_ports) m += " meta l4proto { tcp, udp }";
  if (!all_ports)
    m += " th dport " + (r.port_lo == r.port_hi
                             ? std::to_string(r.port_lo)
                             : std::to_string(r.port_lo) + "-" + std::to_string(r.port_hi));
  return m;
}

}  // namespace

std::string linkFilterRules(const audit::NetPolicy& policy) {
  std::string out;
  for (const auto& rule : policy.rules)
    out += match(rule) + (rule.allow ? " accept\n" : std::string(" ") + kRefuse + "\n");
  // One set per family. nftables refuses overlapping intervals in a set, and a range inside
  // another (the metadata /32 in link-local) is refused by the outer one anyway.
  std::vector<policy::Cidr> ranges;
  for (const auto& range : audit::protectedRanges())
    if (auto cidr = policy::Cidr::parse(range.cidr)) ranges.push_back(*cidr);
  std::string v4, v6;
  for (const auto& cidr : ranges) {
    bool inside = false;
    for (const auto& other : ranges)
      inside = inside ||
               (other.family == cidr.family && other.prefix < cidr.prefix && other.contains(cidr));
    if (inside) continue;
    std::string& set = cidr.family == 4 ? v4 : v6;
    set += (set.empty() ? "" : ", ") + cidr.toString();
  }
  if (!v4.empty()) out += "ip daddr { " + v4 + " } " + kRefuse + "\n";
  if (!v6.empty()) out += "ip6 daddr { " + v6 + " } " + kRefuse + "\n";
  out += policy.mode == audit::NetMode::kOpen ? "accept\n" : std::string(kRefuse) + "\n";
  return out;
}

std::string linkFilterChain(std::string_view link) {
  std::string name = "filter_";
  for (char c : link)
    name += (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ? c : '_';
  return name;
}

}  // namespace airlock::net
