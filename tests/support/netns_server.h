// A network namespace a test makes, linked to the host by a veth pair on a /30 of 10.214.0.0/16,
// with one server process in it: what end-to-end tests fetch from, reached from the host only,
// kept off every real network, and removed (process, namespace, link) when the object goes.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace airlock::testing {

class NetnsServer {
 public:
  // Runs argv in the namespace (through `ip netns exec`), every "{addr}" in it replaced by the
  // namespace's address, and waits up to 10 s for it to accept on `port`. Null, with the reason
  // in *why, when something failed (everything made so far is removed).
  static std::unique_ptr<NetnsServer> start(const std::vector<std::string>& argv, uint16_t port,
                                            std::string* why);
  ~NetnsServer();
  NetnsServer(const NetnsServer&) = delete;
  NetnsServer& operator=(const NetnsServer&) = delete;

  // Ends the server process and keeps the namespace: connections to it are refused at once
  // (a removed namespace's address would be routed elsewhere, and time out or be answered).
  void stopServer();

  const std::string& address() const { return address_; }
  // "http://<address>:<port><path>"
  std::string url(const std::string& path) const;

 private:
  NetnsServer() = default;
  bool listening() const;

  std::string ns_, veth_host_, address_;
  uint16_t port_ = 0;
  bool netns_made_ = false;
  pid_t pid_ = -1;
};

}  // namespace airlock::testing
