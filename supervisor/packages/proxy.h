// The package proxy: serves the PyPI "simple" (PEP 503) and npm registry protocols to sandboxes
// from the operator's upstream, with a cache every sandbox shares, deciding per package under
// each sandbox's rules (rules.h). docs/packages.md, "How the proxy works".
//
// Inside a sandbox (network "none": loopback only) the supervisor opens a listener on
// 127.0.0.1:3141 in the sandbox's network namespace (listenInNetns) and attaches it here, with
//   PIP_INDEX_URL=http://127.0.0.1:3141/pypi/simple/
//   npm_config_registry=http://127.0.0.1:3141/npm/
// The sandbox can only ever name a package and a file; every URL the proxy fetches comes from
// the operator's configuration or from upstream's own index pages.
//
// Threads: one io_context thread accepts on every attached listener; each accepted connection
// is served on its own blocking thread (HTTP/1.1 keep-alive; closed after idle_timeout_s of
// silence), at most max_connections_per_sandbox at once per sandbox (beyond: 503 and close).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "airlock/result.h"
#include "airlock/unique_fd.h"
#include "supervisor/packages/rules.h"

namespace airlock::packages {

struct ProxyOptions {
  std::string pypi_index = "https://pypi.org/simple/";  // upstream PEP 503 base
  std::string npm_registry = "https://registry.npmjs.org/";
  std::string cache_dir = "/var/cache/airlock/packages";  // shared by every sandbox and process
  std::string ca_file;                                    // "": the system's CAs
  int timeout_s = 60;  // per upstream request: connecting, and then without progress
  size_t max_connections_per_sandbox = 16;
  int idle_timeout_s = 60;  // a sandbox's connection silent this long is closed
  int page_ttl_s = 60;      // how long an index page or packument is reused without asking upstream
};

// One per file served or refused, and per refused index page or packument.
struct DownloadEvent {
  std::string sandbox, tenant;
  Ecosystem ecosystem = Ecosystem::pypi;
  std::string package, version, file, sha256;  // version "" for an index page or packument
  uint64_t bytes = 0;
  bool cached = false;  // served from the disk cache, without asking upstream
  std::string verdict;  // "allowed", "denied", "failed"
  std::string rule, reason;
};
// Called on the connection's thread; must be thread-safe and quick, and must not destroy the
// Attachment or the Proxy (their destructors join that very thread).
using AuditSink = std::function<void(const DownloadEvent&)>;

struct SandboxIdentity {
  std::string sandbox_id, tenant;
  std::shared_ptr<const Rules> rules;  // null: every package refused
};

class Proxy {
 public:
  // Opens (creates) the cache directory and loads the CA file.
  static Result<std::shared_ptr<Proxy>> create(ProxyOptions options, AuditSink audit);

  // Destroying it stops accepting on its listener, closes its open connections (in-flight
  // upstream downloads end too) and joins their threads.
  class Attachment {
   public:
    ~Attachment();
    Attachment(const Attachment&) = delete;
    Attachment& operator=(const Attachment&) = delete;
    // Bytes of files served to this sandbox so far (counted against max_sandbox_bytes).
    uint64_t bytesServed() const;

   private:
    friend class Proxy;
    struct State;
    struct Owner;
    Attachment(std::shared_ptr<Owner> owner, std::shared_ptr<State> state);
    std::shared_ptr<Owner> owner_;
    std::shared_ptr<State> state_;
  };

  // Serves every connection accepted on `listener` (a listening TCP socket) as `who`.
  Result<std::unique_ptr<Attachment>> attach(UniqueFd listener, SandboxIdentity who);

  ~Proxy();  // stops everything (every Attachment too), joins every thread
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

 private:
  explicit Proxy(std::shared_ptr<Attachment::Owner> owner);
  std::shared_ptr<Attachment::Owner> owner_;
};

// A listening TCP socket on 127.0.0.1:port inside the network namespace `netns_fd` (an fd of
// /proc/<pid>/ns/net), made on a short-lived thread that setns()es, so the caller's namespace
// never changes; netns_fd -1: the caller's own. Port 0: an ephemeral port (boundPort tells it).
Result<UniqueFd> listenInNetns(int netns_fd, uint16_t port);

// The local port a socket is bound to.
Result<uint16_t> boundPort(int fd);

}  // namespace airlock::packages
