// The C++ face of a transfer plugin instance (ABI 1.8): open a location, get an fd to read (in)
// or write (out), finish. Unlike the other kinds, calls are not serialized: a transfer plugin
// serves several transfers at once (plugin_abi_v1.h), each its own OpenTransfer.
#pragma once

#include <airlock/plugin_abi_v1.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/result.h"
#include "airlock/unique_fd.h"
#include "supervisor/plugin/instances.h"

namespace airlock::plugin {

class TransferPlugin;

struct TransferRequest {
  bool in = true;                 // into the sandbox (the plugin gives bytes), or out
  std::string location;           // as the user named it
  std::string rules_json = "{}";  // the profile's rules for this plugin
  uint64_t max_bytes = 0;
  std::string tenant, sandbox_id;
};

// One open transfer. The host reads or writes fd(), then calls finish(true); destroying it
// unfinished discards it (the plugin's close with ok = 0).
class OpenTransfer {
 public:
  ~OpenTransfer();
  OpenTransfer(const OpenTransfer&) = delete;
  OpenTransfer& operator=(const OpenTransfer&) = delete;

  int fd() const { return fd_.get(); }
  const std::string& format() const { return format_; }    // out: what the destination wants
  const std::string& display() const { return display_; }  // the location, credentials removed
  uint64_t size() const { return size_; }                  // in: bytes to come, 0 unknown
  // Closes fd and asks the plugin to complete (ok) or discard (!ok) the transfer. Once.
  Result<> finish(bool ok);

 private:
  friend class TransferPlugin;
  OpenTransfer(std::shared_ptr<const TransferPlugin> plugin, airlock_transfer_v1 t);
  std::shared_ptr<const TransferPlugin> plugin_;
  airlock_transfer_v1 transfer_{};
  UniqueFd fd_;
  std::string format_, display_;
  uint64_t size_ = 0;
  bool finished_ = false;
};

class TransferPlugin : public std::enable_shared_from_this<TransferPlugin> {
 public:
  explicit TransferPlugin(std::unique_ptr<Instance> instance);

  Result<std::unique_ptr<OpenTransfer>> open(const TransferRequest& request) const;

  // The location prefixes it takes ("https://", "hostdir:"; "" for local paths).
  const std::vector<std::string>& prefixes() const { return prefixes_; }
  const std::string& name() const { return instance_->plugin().shortName(); }  // "http"
  const std::string& fullName() const { return instance_->plugin().name(); }

 private:
  friend class OpenTransfer;
  const airlock_transfer_ops_v1& ops() const;
  std::unique_ptr<Instance> instance_;
  std::vector<std::string> prefixes_;
};

// The length of the longest of `prefixes` that `location` starts with, or -1. "" matches any
// location without a scheme ("./repo.tar.gz", "/data/x.zip"), never one with "scheme:".
int matchLength(const std::vector<std::string>& prefixes, std::string_view location);

}  // namespace airlock::plugin
