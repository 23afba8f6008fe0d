// transfer.http's rules, from the request's rules_json (docs/transfer.md). Missing keys take the
// defaults below; the supervisor sends the protected ranges ("blocked") itself.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "address_check.h"
#include "url.h"

namespace airlock::transfer_http {

struct Rules {
  std::vector<Pattern> allow;  // empty: no URL is allowed
  AddressPolicy addresses;
  int redirects = 3;  // 0: a 3xx is an error
  // 0 disables a timeout.
  std::chrono::milliseconds connect_timeout{10000};  // TCP connect and TLS handshake
  std::chrono::milliseconds idle_timeout{30000};     // no byte received or sent
  std::chrono::milliseconds timeout{600000};         // the whole network transfer
  std::string ca_file;                               // trusted besides the system's CAs
  std::string spool_dir = "/var/tmp";
  std::string method_out = "PUT";
};

// Throws std::invalid_argument naming the key ("transfer.http.allow[1]: ...").
Rules parseRules(std::string_view json);

}  // namespace airlock::transfer_http
