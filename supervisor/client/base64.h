// Base64 (RFC 4648, standard alphabet, padded): how the API carries bytes that are not UTF-8.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace airlock::client {

std::string base64Encode(std::string_view bytes);
// nullopt when `text` is not valid padded base64 (whitespace is not allowed either).
std::optional<std::string> base64Decode(std::string_view text);

}  // namespace airlock::client
