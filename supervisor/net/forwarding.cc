#include "supervisor/net/forwarding.h"

#include <fcntl.h>
#include <unistd.h>

#include "airlock/unique_fd.h"

namespace airlock::net {
namespace {

// /proc/sys/net belongs to the network namespace of the thread that opens it: the supervisor's
// threads stay in the host namespace (route_socket.h), so these are the host's switches.
Result<> writeSysctl(const std::string& path, const char* value) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return sysError("open", path);
  if (::write(fd.get(), value, 1) != 1) return sysError("write", path);
  return {};
}

char readSysctlFlag(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  char c = '?';
  if (!fd || ::read(fd.get(), &c, 1) != 1) return '?';
  return c;
}

bool hasForceForwarding() {
  // Every link has the switch once the kernel knows it; lo always exists.
  return ::access("/proc/sys/net/ipv6/conf/lo/force_forwarding", F_OK) == 0;
}

}  // namespace

std::string ipv4ForwardingProblem() {
  if (readSysctlFlag("/proc/sys/net/ipv4/ip_forward") == '1') return {};
  return "net.ipv4.ip_forward is 0: replies to sandboxes arrive on the uplink and are not "
         "forwarded, so their connections time out; airlock does not switch on host-wide "
         "forwarding: set it (sysctl -w net.ipv4.ip_forward=1)";
}

std::string ipv6ForwardingProblem() {
  if (hasForceForwarding()) return {};
  if (readSysctlFlag("/proc/sys/net/ipv6/conf/all/forwarding") == '1') return {};
  return "this kernel has no per-link net.ipv6.conf.<link>.force_forwarding (Linux 6.17+) and "
         "net.ipv6.conf.all.forwarding is 0: airlock does not switch on host-wide IPv6 "
         "forwarding; set it (sysctl -w net.ipv6.conf.all.forwarding=1) or give the network no "
         "IPv6 range";
}

Result<> enableLinkForwarding(const std::string& link, bool ipv6) {
  const std::string v4 = "/proc/sys/net/ipv4/conf/" + link + "/forwarding";
  if (auto r = writeSysctl(v4, "1"); !r) return r;
  if (!ipv6) return {};
  if (hasForceForwarding())
    return writeSysctl("/proc/sys/net/ipv6/conf/" + link + "/force_forwarding", "1");
  if (std::string problem = ipv6ForwardingProblem(); !problem.empty()) return fail(problem);
  return {};
}

}  // namespace airlock::net
