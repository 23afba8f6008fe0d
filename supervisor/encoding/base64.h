// Base64 (RFC 4648, standard alphabet, padded) and UTF-8 validation: how the API carries bytes
// in JSON (file contents, output that is not text). One codec for the server, the service and
// the client.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace airlock::encoding {

std::string base64Encode(std::string_view bytes);
// nullopt unless `text` is canonical padded base64: length a multiple of 4, only the standard
// alphabet, '=' only as the final one or two characters. No whitespace is skipped.
std::optional<std::string> base64Decode(std::string_view text);

// True when `bytes` is well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
bool isValidUtf8(std::string_view bytes);

}  // namespace airlock::encoding
