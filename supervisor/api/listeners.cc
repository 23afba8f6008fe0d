#include "supervisor/api/listeners.h"

#include <arpa/inet.h>
#include <grp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace airlock::api {
namespace {

constexpr int kBacklog = 128;

Result<sockaddr_un> unixAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path) {
    return fail("socket path is empty or longer than 107 bytes", path);
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  return addr;
}

Result<gid_t> groupId(const std::string& group) {
  std::vector<char> buf(16384);
  while (true) {
    struct group grp {};
    struct group* found = nullptr;
    int rc = getgrnam_r(group.c_str(), &grp, buf.data(), buf.size(), &found);
    if (rc == ERANGE && buf.size() < (1 << 20)) {
      buf.resize(buf.size() * 4);
      continue;
    }
    if (rc != 0) return Unexpected(Error("getgrnam_r", group, rc));
    if (found == nullptr) return fail("unknown group", group);
    return found->gr_gid;
  }
}

}  // namespace

Result<UnixListener> listenUnix(const std::string& path, uint32_t mode, const std::string& group) {
  auto addr = unixAddress(path);
  if (!addr) return Unexpected(addr.error());

  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return fail("refusing to replace a file that is not a socket", path);
    UniqueFd probe(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!probe) return sysError("socket(AF_UNIX)", path);
    if (connect(probe.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr) == 0) {
      return fail("another supervisor is listening on the socket; stop it first", path);
    }
    if (errno != ECONNREFUSED) return sysError("connect (probing an existing socket)", path);
    if (unlink(path.c_str()) != 0 && errno != ENOENT) return sysError("unlink(stale socket)", path);
  } else if (errno != ENOENT) {
    return sysError("lstat", path);
  }

  UnixListener l;
  l.fd = UniqueFd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!l.fd) return sysError("socket(AF_UNIX)", path);
  if (bind(l.fd.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr) != 0) {
    return sysError("bind", path);
  }
  // Permissions are set before listen(): until then a connect() is refused, so nobody slips in
  // under the umask's mode.
  if (chmod(path.c_str(), mode) != 0) {
    auto err = sysError("chmod", path);
    unlink(path.c_str());
    return err;
  }
  if (!group.empty()) {
    auto gid = groupId(group);
    if (!gid) {
      unlink(path.c_str());
      return Unexpected(std::move(gid.error()).wrap("socket group"));
    }
    // chown as root: the socket's group decides which local users may talk to the supervisor.
    if (chown(path.c_str(), static_cast<uid_t>(-1), *gid) != 0) {
      auto err = sysError("chown(group '" + group + "')", path);
      unlink(path.c_str());
      return err;
    }
  }
  if (lstat(path.c_str(), &st) != 0) return sysError("lstat", path);
  l.dev = st.st_dev;
  l.ino = st.st_ino;
  if (listen(l.fd.get(), kBacklog) != 0) {
    auto err = sysError("listen", path);
    unlink(path.c_str());
    return err;
  }
  return l;
}

void unlinkUnixListener(const std::string& path, const UnixListener& listener) {
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0 && st.st_dev == listener.dev && st.st_ino == listener.ino) {
    unlink(path.c_str());
  }
}

Result<TcpListener> listenTcp(const std::string& spec, bool any_address) {
  size_t colon = spec.rfind(':');
  if (colon == std::string::npos) return fail("expected HOST:PORT", spec);
  std::string host = spec.substr(0, colon);
  std::string port_text = spec.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (port_text.empty() || port_text.size() > 5 ||
      port_text.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(port_text) > 65535) {
    return fail("port is not a number within 0..65535", spec);
  }
  uint16_t port = static_cast<uint16_t>(std::stoi(port_text));
  if (host == "localhost") host = "127.0.0.1";

  sockaddr_storage ss{};
  socklen_t len = 0;
  int family = 0;
  in_addr v4{};
  in6_addr v6{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    if (!any_address && ntohl(v4.s_addr) != INADDR_LOOPBACK) {
      return fail("refusing plain HTTP on an address other than 127.0.0.1 (configure TLS)", spec);
    }
    auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    sin->sin_addr = v4;
    len = sizeof *sin;
    family = AF_INET;
  } else if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (!any_address && !IN6_IS_ADDR_LOOPBACK(&v6)) {
      return fail("refusing plain HTTP on an address other than [::1] (configure TLS)", spec);
    }
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(port);
    sin6->sin6_addr = v6;
    len = sizeof *sin6;
    family = AF_INET6;
  } else {
    return fail("expected an IP address (127.0.0.1, ::1, localhost, or with TLS any address)",
                spec);
  }

  TcpListener l;
  l.fd = UniqueFd(socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!l.fd) return sysError("socket(TCP)", spec);
  int one = 1;
  if (setsockopt(l.fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
    return sysError("setsockopt(SO_REUSEADDR)", spec);
  }
  if (bind(l.fd.get(), reinterpret_cast<const sockaddr*>(&ss), len) != 0) {
    return sysError("bind", spec);
  }
  if (listen(l.fd.get(), kBacklog) != 0) return sysError("listen", spec);
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof bound;
  if (getsockname(l.fd.get(), reinterpret_cast<sockaddr*>(&bound), &bound_len) != 0) {
    return sysError("getsockname", spec);
  }
  l.port = ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                   : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  return l;
}

}  // namespace airlock::api
