// Base64 decoding of the API's `*_base64` fields (output that is not UTF-8). The supervisor's
// codec lives on OpenSSL, which the SDK does not make its users link, so the SDK carries this
// small decoder of the same canonical padded form (RFC 4648, standard alphabet).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace airlock::sdk {

// nullopt unless `text` is padded base64 of the standard alphabet.
std::optional<std::string> decodeBase64(std::string_view text);

}  // namespace airlock::sdk
