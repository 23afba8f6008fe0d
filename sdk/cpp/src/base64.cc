#include "base64.h"

#include <array>
#include <cstdint>

namespace airlock::sdk {

namespace {

constexpr std::array<int8_t, 256> kValues = [] {
  std::array<int8_t, 256> v{};
  v.fill(-1);
  constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i < kAlphabet.size(); ++i)
    v[static_cast<unsigned char>(kAlphabet[i])] = static_cast<int8_t>(i);
  return v;
}();

}  // namespace

std::optional<std::string> decodeBase64(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  size_t padding = 0;
  if (!text.empty() && text.back() == '=')
    padding = text.size() >= 2 && text[text.size() - 2] == '=' ? 2 : 1;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    uint32_t group = 0;
    for (size_t j = 0; j < 4; ++j) {
      size_t at = i + j;
      int value = 0;
      if (at >= text.size() - padding) {
        if (text[at] != '=') return std::nullopt;
      } else {
        value = kValues[static_cast<unsigned char>(text[at])];
        if (value < 0) return std::nullopt;
      }
      group = (group << 6) | static_cast<uint32_t>(value);
    }
    out += static_cast<char>(group >> 16);
    out += static_cast<char>((group >> 8) & 0xff);
    out += static_cast<char>(group & 0xff);
  }
  out.resize(out.size() - padding);
  return out;
}

}  // namespace airlock::sdk
