// Base64 through OpenSSL's EVP_EncodeBlock/EVP_DecodeBlock: a public, tested codec in a library
// we already link. They touch no provider tables, so they cost nothing at start-up. DecodeBlock
// is lenient (skips surrounding whitespace, counts padding as zero bytes), so input is checked
// to be canonical first and the padding subtracted afterwards.
#include "supervisor/encoding/base64.h"

#include <openssl/evp.h>

#include <climits>
#include <cstring>

namespace airlock::encoding {
namespace {

bool isAlphabet(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
         c == '/';
}

}  // namespace

std::string base64Encode(std::string_view bytes) {
  std::string out;
  // EVP_EncodeBlock takes an int length: encode in slices of whole 3-byte groups.
  constexpr size_t kSlice = 3 * (1 << 20);
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t off = 0; off < bytes.size(); off += kSlice) {
    size_t n = std::min(kSlice, bytes.size() - off);
    size_t start = out.size();
    out.resize(start + (n + 2) / 3 * 4 + 1);
    int written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data() + start),
                                  reinterpret_cast<const unsigned char*>(bytes.data() + off),
                                  static_cast<int>(n));
    out.resize(start + static_cast<size_t>(written));
  }
  return out;
}

std::optional<std::string> base64Decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  size_t pad = 0;
  if (!text.empty() && text.back() == '=')
    pad = text.size() >= 2 && text[text.size() - 2] == '=' ? 2 : 1;
  for (size_t i = 0; i < text.size() - pad; ++i) {
    if (!isAlphabet(static_cast<unsigned char>(text[i]))) return std::nullopt;
  }
  std::string out;
  constexpr size_t kSlice = 4 * (1 << 20);
  out.reserve(text.size() / 4 * 3);
  for (size_t off = 0; off < text.size(); off += kSlice) {
    size_t n = std::min(kSlice, text.size() - off);
    size_t start = out.size();
    out.resize(start + n / 4 * 3);
    int written = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data() + start),
                                  reinterpret_cast<const unsigned char*>(text.data() + off),
                                  static_cast<int>(n));
    if (written < 0) return std::nullopt;
    out.resize(start + static_cast<size_t>(written));
  }
  out.resize(out.size() - pad);
  return out;
}

bool isValidUtf8(std::string_view bytes) {
  size_t i = 0;
  const size_t n = bytes.size();
  while (i < n) {
    // ASCII runs (most program output) are checked eight bytes at a time.
    while (i + 8 <= n) {
      uint64_t word;
      std::memcpy(&word, bytes.data() + i, sizeof word);
      if ((word & 0x8080808080808080ull) != 0) break;
      i += 8;
    }
    if (i >= n) break;
    unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(bytes[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += len;
  }
  return true;
}

}  // namespace airlock::encoding
