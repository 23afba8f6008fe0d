#include "supervisor/api/auth.h"

#include <openssl/crypto.h>

#include "airlock/policy/keys.h"

namespace airlock::api {

Result<TokenTable> TokenTable::create(const std::map<std::string, std::string>& sha256_to_tenant) {
  TokenTable t;
  for (const auto& [digest, tenant] : sha256_to_tenant) {
    std::string lower;
    for (char c : digest) {
      char l = static_cast<char>(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c);
      if ((l < '0' || l > '9') && (l < 'a' || l > 'f')) break;
      lower += l;
    }
    if (lower.size() != 64 || digest.size() != 64) {
      return fail("token digest is not 64 hex digits (sha256 of the token)", digest);
    }
    if (tenant.empty()) return fail("token digest maps to an empty tenant name", digest);
    t.entries_.emplace(std::move(lower), tenant);
  }
  return t;
}

std::optional<std::string> TokenTable::tenantFor(std::string_view authorization) const {
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size()) return std::nullopt;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    char c = authorization[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != kScheme[i]) return std::nullopt;
  }
  std::string_view token = authorization.substr(kScheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  if (token.empty()) return std::nullopt;
  std::string digest = policy::sha256Hex(token);
  // Every entry is compared, whatever matched, so timing says nothing about which digest is near.
  const std::string* found = nullptr;
  for (const auto& [hex, tenant] : entries_) {
    if (CRYPTO_memcmp(hex.data(), digest.data(), 64) == 0) found = &tenant;
  }
  if (found == nullptr) return std::nullopt;
  return *found;
}

}  // namespace airlock::api
