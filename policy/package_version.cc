#include "airlock/policy/package_version.h"

#include <cctype>
#include <tuple>

namespace airlock::policy {
namespace {

bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isAlpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }
bool isSeparator(char c) { return c == '.' || c == '-' || c == '_'; }

// Reads a run of digits as a number; false when there is none or it overflows.
bool readNumber(std::string_view s, size_t& i, uint64_t& out) {
  const size_t start = i;
  out = 0;
  while (i < s.size() && isDigit(s[i])) {
    if (out > (UINT64_MAX - 9) / 10) return false;
    out = out * 10 + static_cast<uint64_t>(s[i] - '0');
    ++i;
  }
  return i > start;
}

int rankOf(const std::string& word) {
  if (word == "dev") return 0;
  if (word == "beta" || word == "b") return 2;
  if (word == "rc" || word == "c" || word == "pre" || word == "preview") return 3;
  if (word == "post" || word == "r" || word == "rev") return 5;
  return 1;  // alpha, a, and the words semver pre-releases use (canary, next, ...)
}

// Spellings of one word compare equal: 1.0-beta1 == 1.0b1.
std::string canonicalWord(const std::string& word) {
  if (word == "alpha") return "a";
  if (word == "beta") return "b";
  if (word == "c" || word == "pre" || word == "preview") return "rc";
  if (word == "r" || word == "rev") return "post";
  return word;
}

}  // namespace

std::optional<Version> parseVersion(std::string_view s) {
  if (const size_t plus = s.find('+'); plus != std::string_view::npos) s = s.substr(0, plus);
  size_t i = 0;
  if (i < s.size() && (s[i] == 'v' || s[i] == 'V')) ++i;
  Version v;
  for (;;) {
    uint64_t n = 0;
    if (!readNumber(s, i, n)) return std::nullopt;
    v.release.push_back(n);
    if (i + 1 < s.size() && s[i] == '.' && isDigit(s[i + 1])) {
      ++i;
      continue;
    }
    break;
  }
  while (i < s.size()) {
    if (isSeparator(s[i])) ++i;
    Version::Suffix suffix;
    while (i < s.size() && isAlpha(s[i]))
      suffix.tag += static_cast<char>(std::tolower(static_cast<unsigned char>(s[i++])));
    if (!suffix.tag.empty() && i + 1 < s.size() && isSeparator(s[i]) && isDigit(s[i + 1])) ++i;
    const bool numbered = i < s.size() && isDigit(s[i]);
    if (numbered && !readNumber(s, i, suffix.number)) return std::nullopt;
    if (suffix.tag.empty() && !numbered) return std::nullopt;  // "1.0-", "1.0..", "1.0!"
    // A bare number after the release ("1.0.0-1") is a semver pre-release, like a word.
    suffix.rank = suffix.tag.empty() ? 1 : rankOf(suffix.tag);
    suffix.tag = canonicalWord(suffix.tag);
    v.suffixes.push_back(std::move(suffix));
  }
  return v;
}

int compareVersions(const Version& a, const Version& b) {
  const size_t n = std::max(a.release.size(), b.release.size());
  for (size_t i = 0; i < n; ++i) {
    const uint64_t x = i < a.release.size() ? a.release[i] : 0;
    const uint64_t y = i < b.release.size() ? b.release[i] : 0;
    if (x != y) return x < y ? -1 : 1;
  }
  const Version::Suffix release{Version::kReleaseRank, "", 0};
  const size_t m = std::max(a.suffixes.size(), b.suffixes.size());
  for (size_t i = 0; i < m; ++i) {
    const auto& x = i < a.suffixes.size() ? a.suffixes[i] : release;
    const auto& y = i < b.suffixes.size() ? b.suffixes[i] : release;
    const auto kx = std::tie(x.rank, x.tag, x.number);
    const auto ky = std::tie(y.rank, y.tag, y.number);
    if (kx != ky) return kx < ky ? -1 : 1;
  }
  return 0;
}

bool Constraint::satisfiedBy(const Version& v) const {
  const int c = compareVersions(v, version);
  switch (op) {
    case Op::eq:
      return c == 0;
    case Op::ne:
      return c != 0;
    case Op::ge:
      return c >= 0;
    case Op::le:
      return c <= 0;
    case Op::gt:
      return c > 0;
    case Op::lt:
      return c < 0;
  }
  return false;
}

std::optional<std::vector<Constraint>> parseVersionSpec(std::string_view text, std::string& error) {
  auto trim = [](std::string_view s) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    return s;
  };
  static constexpr std::pair<std::string_view, Constraint::Op> kOps[] = {
      {"==", Constraint::Op::eq}, {"!=", Constraint::Op::ne}, {">=", Constraint::Op::ge},
      {"<=", Constraint::Op::le}, {">", Constraint::Op::gt},  {"<", Constraint::Op::lt}};
  std::vector<Constraint> out;
  for (;;) {
    const size_t comma = text.find(',');
    const std::string_view part = trim(text.substr(0, comma));
    Constraint c;
    size_t op_len = 0;
    for (const auto& [spelling, op] : kOps) {
      if (part.starts_with(spelling)) {
        c.op = op;
        op_len = spelling.size();
        break;
      }
    }
    if (op_len == 0) {
      error = part.empty()
                  ? "empty version constraint"
                  : "'" + std::string(part) + "' does not start with ==, !=, >=, <=, > or <";
      return std::nullopt;
    }
    const std::string_view number = trim(part.substr(op_len));
    if (number.empty()) {
      error = "version missing after '" + std::string(part.substr(0, op_len)) + "'";
      return std::nullopt;
    }
    auto v = parseVersion(number);
    if (!v) {
      error = "'" + std::string(number) + "' is not a version (dotted numbers such as 1.2.3)";
      return std::nullopt;
    }
    c.version = std::move(*v);
    out.push_back(std::move(c));
    if (comma == std::string_view::npos) return out;
    text = text.substr(comma + 1);
  }
}

}  // namespace airlock::policy
