// What the proxy answers to one request of a sandbox: the four routes, the rules, the caches
// and upstream. Independent of sockets and threads (proxy.cc owns those), so a request is a
// function call.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "supervisor/packages/disk_cache.h"
#include "supervisor/packages/npm_packument.h"
#include "supervisor/packages/proxy.h"
#include "supervisor/packages/pypi_index.h"
#include "supervisor/packages/upstream_client.h"

namespace airlock::packages {

struct ProxyRequest {
  bool head = false;   // HEAD: the same answer without its body
  std::string target;  // the request-target as sent
  std::string host;    // the Host header, checked; links in answers point at it
  std::string accept;  // the Accept header
};

struct ProxyReply {
  unsigned status = 200;
  std::string reason;  // the reason phrase; "" for the standard one
  std::string content_type;
  std::string body;
  std::string file_path;  // when set, the body is this file (file_size bytes)
  uint64_t file_size = 0;
  bool abandon = false;  // the sandbox's attachment is closing: answer nothing, close
};

// An error answer: `message` as the reason phrase (made safe) and as {"error": message}.
ProxyReply jsonReply(unsigned status, const std::string& message);

// One sandbox, as a request's handling needs it.
struct SandboxSession {
  const SandboxIdentity& who;
  std::atomic<uint64_t>& served;  // bytes of files served, against max_sandbox_bytes
  int stop_fd;                    // readable when the attachment closes
};

// A reason phrase fit for a status line: printable ASCII only, at most 300 characters.
std::string sanitizeReasonPhrase(std::string_view message);

// Whether a Host header may go into the links the proxy writes: a name or address and a port.
bool plausibleHost(std::string_view host);

class PackageService {
 public:
  PackageService(ProxyOptions options, AuditSink audit, std::shared_ptr<UpstreamClient> upstream,
                 DiskCache cache);
  ProxyReply handle(const ProxyRequest& request, const SandboxSession& session);

 private:
  using Clock = std::chrono::steady_clock;
  struct PypiFile {
    IndexLink link;
    std::string url;  // absolute upstream URL
    DistFile dist;
  };
  struct PypiProject {
    Clock::time_point fetched;
    std::vector<PypiFile> files;
  };
  struct Page {
    Clock::time_point fetched;
    std::string url, body, content_type;
  };
  // A file to serve and how to check it.
  struct FileJob {
    Ecosystem ecosystem;
    std::string package, version, filename, url;
    std::string sha256;                   // expected, from the index ("" unknown)
    std::string sha512_base64, sha1_hex;  // expected, from npm's dist
  };

  ProxyReply pypiPage(const ProxyRequest&, const SandboxSession&, const std::string& project);
  ProxyReply pypiFile(const ProxyRequest&, const SandboxSession&, const std::string& project,
                      const std::string& filename);
  ProxyReply npmPackument(const ProxyRequest&, const SandboxSession&, const std::string& name);
  ProxyReply npmTarball(const ProxyRequest&, const SandboxSession&, const std::string& name,
                        const std::string& version);
  ProxyReply serveFile(const ProxyRequest&, const SandboxSession&, const FileJob& job);

  // The page at `url`: reused for page_ttl_s, else fetched, else (upstream unreachable or
  // failing) the last copy on disk. A reply when there is none to give.
  std::variant<std::shared_ptr<const Page>, ProxyReply> page(const SandboxSession&,
                                                             const std::string& kind,
                                                             const std::string& package,
                                                             const std::string& url,
                                                             const std::string& accept, bool fresh);
  std::variant<std::shared_ptr<const PypiProject>, ProxyReply> pypiProject(
      const SandboxSession&, const std::string& project, bool fresh);
  // Remembers every version's tarball of a packument, and returns it rewritten for `host`.
  Result<RewrittenPackument> rewriteNpm(const SandboxSession&, const std::string& name,
                                        const Page& page, const std::string& host);

  Verdict decide(const SandboxSession&, Ecosystem, std::string_view name,
                 std::string_view version) const;
  ProxyReply refuse(const SandboxSession&, DownloadEvent event, unsigned status,
                    const std::string& message);
  void audit(const SandboxSession&, DownloadEvent event);
  // The record of a page or packument served for a package the rules refuse as a whole.
  void auditRefusedPackage(const SandboxSession&, Ecosystem, const std::string& package,
                           const Verdict& whole);

  ProxyOptions options_;
  AuditSink audit_;
  std::shared_ptr<UpstreamClient> upstream_;
  DiskCache cache_;
  std::string pypi_base_, npm_base_;  // each ending in '/'

  std::mutex mu_;                                             // guards the maps below
  std::map<std::string, std::shared_ptr<const Page>> pages_;  // kind '\n' URL '\n' Accept
  std::map<std::string, std::shared_ptr<const PypiProject>> pypi_projects_;  // normalized name
  std::map<std::string, std::map<std::string, NpmTarball>> npm_tarballs_;    // name -> version
};

}  // namespace airlock::packages
