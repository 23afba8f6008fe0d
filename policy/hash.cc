// The policy hash: SHA-256 from OpenSSL's libcrypto.
//
// The low-level SHA256_* routines, not EVP: EVP_Digest initializes OpenSSL 3's provider tables
// on first use, which cost ~2 ms of every `airlock run` just to hash a policy. These routines are
// deprecated in OpenSSL 3 in favour of EVP but remain part of its API; the FIPS 180-4 test
// vectors in tests/unit/policy_parse_test.cc check them.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>

#include <cstdlib>

#include "airlock/policy/keys.h"

namespace airlock::policy {

std::string sha256Hex(std::string_view bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256_CTX ctx;
  if (SHA256_Init(&ctx) != 1 || SHA256_Update(&ctx, bytes.data(), bytes.size()) != 1 ||
      SHA256_Final(digest, &ctx) != 1) {
    std::abort();  // these cannot fail for in-memory input
  }
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(sizeof digest * 2);
  for (unsigned char b : digest) {
    out += kHex[b >> 4];
    out += kHex[b & 0xf];
  }
  return out;
}

}  // namespace airlock::policy
