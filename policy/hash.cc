// The policy hash: sha256 through OpenSSL's libcrypto (EVP, the non-deprecated API).
#include <openssl/evp.h>

#include <cstdlib>

#include "airlock/policy/keys.h"

namespace airlock::policy {

std::string sha256Hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_sha256(), nullptr) != 1) {
    std::abort();  // only fails on allocation failure inside libcrypto
  }
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 0xf];
  }
  return out;
}

}  // namespace airlock::policy
