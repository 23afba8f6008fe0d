// HAProxy's agent-check (docs/deploy.md): a plain TCP listener that answers every connection
// with one line, this node's free capacity as a weight ("up ready 3700%", "drain"), and closes.
// A fleet's proxy polls it to place new sandboxes where there is room. The line is all it
// reveals, so it needs no TLS or token; it reads nothing from the peer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "airlock/result.h"
#include "airlock/unique_fd.h"

namespace airlock::api {

class AgentCheckListener {
 public:
  // Listens on `address` ("0.0.0.0:8444", "[::]:8444", "127.0.0.1:0"); `line` is asked anew
  // for every connection.
  static Result<std::unique_ptr<AgentCheckListener>> start(const std::string& address,
                                                           std::function<std::string()> line);
  ~AgentCheckListener();  // stops listening; returns when the thread has ended
  AgentCheckListener(const AgentCheckListener&) = delete;
  AgentCheckListener& operator=(const AgentCheckListener&) = delete;

  uint16_t port() const { return port_; }

 private:
  AgentCheckListener() = default;
  void run();

  UniqueFd listen_fd_;
  UniqueFd stop_fd_;  // eventfd: readable when the destructor asks the thread to end
  uint16_t port_ = 0;
  std::function<std::string()> line_;
  std::thread thread_;
};

}  // namespace airlock::api
