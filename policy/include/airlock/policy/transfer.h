// Transfers ([transfer] and [profiles.<name>.transfer], docs/transfer.md): which transfer
// plugins a profile may use, each plugin's limits, the URLs `http` may reach and the host
// directories `hostdir` may read or write.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace airlock::policy {

// One plugin's caps, per transfer and per sandbox. A transfer in counts the archive's bytes
// and, separately, the bytes it unpacks to; a transfer out counts the packed bytes.
struct TransferLimits {
  uint64_t max_mb = 1024;          // bytes moved (and unpacked) by one transfer, MiB
  uint64_t sandbox_max_mb = 4096;  // bytes moved by all transfers of one sandbox, MiB
  uint64_t max_files = 100000;     // entries of one archive
  uint32_t max_depth = 64;         // path components of an entry
  uint32_t max_ratio = 200;        // unpacked bytes per archive byte (past the first 16 MiB)
};

struct TransferHttp {
  TransferLimits limits;
  // URL patterns a transfer may fetch from or upload to: "https://host[:port][/path-prefix]",
  // host exact or "*.example.com" (its subdomains). []: no URL.
  std::vector<std::string> allow;
  uint32_t redirects = 3;  // redirects followed per transfer, each one checked again; 0: none
  uint32_t connect_timeout_s = 10;
  uint32_t idle_timeout_s = 30;  // no byte for this long ends the transfer (a trickling server)
  uint32_t timeout_s = 600;      // one whole transfer
  // CIDRs exempt from the protected ranges the network policy blocks (private networks,
  // loopback, link-local, cloud metadata). []: none may be reached.
  std::vector<std::string> allow_private;
  std::string ca_file;  // PEM CAs trusted besides the system's; "": the system's only
};

struct TransferHostdir {
  TransferLimits limits;
  // Names of [transfer] roots this profile may use; "*": every declared root.
  std::vector<std::string> roots = {"*"};
};

// [profiles.<name>.transfer]
struct Transfer {
  // Transfer plugins this profile may use, by short or full name. []: no transfers.
  std::vector<std::string> plugins = {"archive", "http", "hostdir"};
  TransferLimits archive;  // local archives (`airlock run`) and uploads through the API; also
                           // the limits of transfer plugins that are not built in
  TransferHttp http;
  TransferHostdir hostdir;
};

// [transfer]: what the host offers every profile.
struct TransferSettings {
  // Host directories a `hostdir:NAME/...` transfer may read, by name: absolute paths.
  std::map<std::string, std::string> roots;
  // Names of roots that transfers out (and writable mounts) may write into.
  std::vector<std::string> writable_roots;
  // Where uploads to URLs are spooled before they are sent (their length must be known).
  std::string spool_dir = "/var/tmp";
};

}  // namespace airlock::policy
