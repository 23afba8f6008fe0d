#include "airlock/policy/package_rule.h"

#include <algorithm>

namespace airlock::policy {
namespace {

// '*' matches any run of characters, everything else itself. Iterative, one backtrack point.
bool globMatch(std::string_view pattern, std::string_view text) {
  size_t p = 0, t = 0, star = std::string_view::npos, resume = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool nameCharacter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.' || c == '*' || c == '@' || c == '/' || c == '~';
}

bool isHex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

}  // namespace

std::string normalizePypiName(std::string_view name) {
  std::string out;
  bool in_run = false;
  for (char c : name) {
    if (c == '-' || c == '_' || c == '.') {
      if (!in_run) out += '-';
      in_run = true;
      continue;
    }
    in_run = false;
    out += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  return out;
}

Result<PackageRule> PackageRule::parse(std::string_view text) {
  PackageRule e;
  e.text = std::string(text);
  std::string_view rest = text;
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  if (const size_t colon = rest.find(':'); colon != std::string_view::npos) {
    const std::string_view prefix = rest.substr(0, colon);
    if (prefix == "pypi")
      e.only = PackageEcosystem::pypi;
    else if (prefix == "npm")
      e.only = PackageEcosystem::npm;
    else
      return fail("unknown ecosystem '" + std::string(prefix) + "' (pypi: or npm:)");
    rest.remove_prefix(colon + 1);
  }
  const size_t spec_at = rest.find_first_of("=!<>~ ");
  e.name = std::string(rest.substr(0, spec_at));
  if (e.name.empty()) return fail("package name missing");
  if (e.name.size() > 214) return fail("package name longer than 214 characters");
  for (char c : e.name)
    if (!nameCharacter(c))
      return fail("'" + std::string(1, c) + "' cannot be part of a package name");
  e.normalized_name = normalizePypiName(e.name);
  if (spec_at != std::string_view::npos) {
    std::string_view spec = rest.substr(spec_at);
    while (!spec.empty() && spec.front() == ' ') spec.remove_prefix(1);
    if (!spec.empty()) {
      if (spec.starts_with("~=")) return fail("'~=' is not supported (write >=X,<Y)");
      std::string error;
      auto parsed = parseVersionSpec(spec, error);
      if (!parsed) return fail(error);
      e.spec = std::move(*parsed);
    }
  }
  return e;
}

bool PackageRule::matchesName(PackageEcosystem eco, std::string_view package) const {
  if (only && *only != eco) return false;
  if (eco == PackageEcosystem::pypi) return globMatch(normalized_name, normalizePypiName(package));
  return globMatch(name, package);
}

bool PackageRule::matchesVersion(std::string_view version, bool fail_closed) const {
  if (spec.empty()) return true;
  const auto v = parseVersion(version);
  if (!v) return fail_closed;
  return std::all_of(spec.begin(), spec.end(),
                     [&](const Constraint& c) { return c.satisfiedBy(*v); });
}

Result<std::vector<std::string>> parsePins(std::string_view value) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= value.size()) {
    size_t comma = value.find(',', start);
    if (comma == std::string_view::npos) comma = value.size();
    std::string_view item = value.substr(start, comma - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    std::string hex(item.starts_with("sha256:") ? item.substr(7) : std::string_view());
    std::transform(hex.begin(), hex.end(), hex.begin(), [](char c) {
      return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
    });
    if (hex.size() != 64 || !std::all_of(hex.begin(), hex.end(), isHex))
      return fail("each pin is 'sha256:' followed by 64 hex digits, got '" + std::string(item) +
                  "'");
    out.push_back(std::move(hex));
    start = comma + 1;
  }
  return out;
}

}  // namespace airlock::policy
