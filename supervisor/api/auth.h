// Bearer tokens → tenants. The table holds SHA-256 digests only, so the policy file and memory
// never hold a usable token; lookups compare every digest in constant time.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "airlock/result.h"

namespace airlock::api {

class TokenTable {
 public:
  // Keys are lowercase or uppercase SHA-256 hex digests of tokens; values tenant names.
  static Result<TokenTable> create(const std::map<std::string, std::string>& sha256_to_tenant);
  TokenTable() = default;

  bool empty() const { return entries_.empty(); }
  // The tenant of `authorization` ("Bearer <token>"), or nullopt.
  std::optional<std::string> tenantFor(std::string_view authorization) const;

 private:
  std::map<std::string, std::string> entries_;  // lowercase hex → tenant
};

}  // namespace airlock::api
