// The listening sockets of `airlock serve`: a Unix socket, and optionally TCP (loopback, or any
// address when TLS terminates it: tls_listener.h).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "airlock/result.h"
#include "airlock/unique_fd.h"

namespace airlock::api {

struct UnixListener {
  UniqueFd fd;
  dev_t dev = 0;  // the socket file we created, so we only ever unlink our own
  ino_t ino = 0;
};

// Binds `path`, replacing a stale socket file that nothing listens on and refusing one that a
// live supervisor still answers. The file gets `mode` and, when `group` is set, that group.
Result<UnixListener> listenUnix(const std::string& path, uint32_t mode, const std::string& group);

// Removes the socket file if it is still the one `listener` created.
void unlinkUnixListener(const std::string& path, const UnixListener& listener);

struct TcpListener {
  UniqueFd fd;
  uint16_t port = 0;  // the bound port (useful when the spec asked for port 0)
};

// "127.0.0.1:8720", "[::1]:8720" or "localhost:8720". Unless `any_address` (the listener is
// TLS), an address other than 127.0.0.1 and ::1 is refused: plain HTTP carries bearer tokens in
// clear text, so it is for local clients that cannot reach the Unix socket, never the network.
Result<TcpListener> listenTcp(const std::string& spec, bool any_address);

}  // namespace airlock::api
