// A check of policy text before toml++ reads it, for a bug of the toml++ that Debian 12 ships.
//
// toml++ 3.3.0 asks whether a non-ASCII character is whitespace wherever whitespace may come, and
// for most code points in U+00A1..U+0499, U+1482..U+187B, U+1C16..U+200F, U+2C6E..U+3067 and
// U+FBC6..U+FEFE that question reaches __builtin_unreachable(): undefined behaviour, which a
// three-byte policy file ("i" and U+00E9) triggers (fuzz/policy_fuzz.cc found it; upstream
// tomlplusplus issues 190 and 295, fixed after 3.3.0). It asks outside strings and comments, and
// in a multi-line basic string after a line-ending backslash, where it trims whitespace. Valid
// TOML has non-ASCII text only inside strings and comments, so refusing it elsewhere refuses no
// valid file; after a line-ending backslash it is refused too, with a message saying how to
// write it instead.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace airlock::policy::detail {

struct TextProblem {
  size_t line = 0;    // 1-based, like toml::source_position
  size_t column = 0;  // 1-based, in code points
  std::string message;
};

// The first non-ASCII character toml++ could not be trusted with, or nothing.
std::optional<TextProblem> findUnsafeNonAscii(std::string_view text);

}  // namespace airlock::policy::detail
