#include "airlock/policy/package_rule.h"

#include <algorithm>
#include <cctype>

namespace airlock::policy {
namespace {

bool nameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
         c == '@' || c == '/' || c == '*' || c == '~';
}

bool versionChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ||
         c == '+' || c == '!';
}

// Glob with '*' only, iterative with one backtrack point: linear in practice, no recursion.
bool globMatch(std::string_view pattern, std::string_view text) {
  size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

struct SplitVersion {
  std::vector<uint64_t> release;
  std::string pre;  // "" for a final release
};

SplitVersion splitVersion(std::string_view v) {
  SplitVersion out;
  if (!v.empty() && (v.front() == 'v' || v.front() == 'V')) v.remove_prefix(1);
  if (size_t bang = v.find('!'); bang != std::string_view::npos) v.remove_prefix(bang + 1);
  if (size_t plus = v.find('+'); plus != std::string_view::npos) v = v.substr(0, plus);
  size_t i = 0;
  while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) {
    uint64_t n = 0;
    while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) {
      n = n * 10 + static_cast<uint64_t>(v[i] - '0');
      if (n > (uint64_t{1} << 60)) n = uint64_t{1} << 60;
      ++i;
    }
    out.release.push_back(n);
    if (i + 1 < v.size() && v[i] == '.' && std::isdigit(static_cast<unsigned char>(v[i + 1]))) {
      ++i;
      continue;
    }
    break;
  }
  std::string pre(v.substr(i));
  // ".post1" and "-post1" are after the release, not before: PEP 440 post-releases.
  std::transform(pre.begin(), pre.end(), pre.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  while (!pre.empty() && (pre.front() == '.' || pre.front() == '-' || pre.front() == '_'))
    pre.erase(pre.begin());
  out.pre = pre;
  while (!out.release.empty() && out.release.back() == 0) out.release.pop_back();
  return out;
}

}  // namespace

std::string normalizePypiName(std::string_view name) {
  std::string out;
  bool sep = false;
  for (char c : name) {
    if (c == '-' || c == '_' || c == '.') {
      sep = true;
      continue;
    }
    if (sep && !out.empty()) out += '-';
    sep = false;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

int compareVersions(std::string_view a, std::string_view b) {
  const SplitVersion x = splitVersion(a), y = splitVersion(b);
  const size_t n = std::max(x.release.size(), y.release.size());
  for (size_t i = 0; i < n; ++i) {
    const uint64_t l = i < x.release.size() ? x.release[i] : 0;
    const uint64_t r = i < y.release.size() ? y.release[i] : 0;
    if (l != r) return l < r ? -1 : 1;
  }
  auto rank = [](const std::string& pre) {
    if (pre.empty()) return 1;            // the release
    if (pre.starts_with("post")) return 2;  // after it
    return 0;                             // a pre-release or dev build: before it
  };
  if (int l = rank(x.pre), r = rank(y.pre); l != r) return l < r ? -1 : 1;
  if (x.pre == y.pre) return 0;
  return x.pre < y.pre ? -1 : 1;
}

Result<PackageRule> PackageRule::parse(std::string_view entry) {
  PackageRule rule;
  rule.text = std::string(entry);
  std::string_view rest = entry;
  if (rest.starts_with("pypi:")) {
    rule.ecosystem = PackageEcosystem::pypi;
    rest.remove_prefix(5);
  } else if (rest.starts_with("npm:")) {
    rule.ecosystem = PackageEcosystem::npm;
    rest.remove_prefix(4);
  }
  size_t end = 0;
  // A scoped npm name starts with '@': that '@' is part of the name, not a version marker.
  while (end < rest.size() && nameChar(rest[end])) ++end;
  rule.name = std::string(rest.substr(0, end));
  if (rule.name.empty())
    return fail(rest.empty() ? "a package name is missing"
                             : "a package name must come first (letters, digits, - _ . @ / *)");
  if (rule.name.size() > 214) return fail("the package name is longer than 214 characters");
  rest.remove_prefix(end);
  while (!rest.empty()) {
    if (rule.constraints.empty() && rest.front() == ' ') {
      rest.remove_prefix(1);
      continue;
    }
    std::string op;
    for (std::string_view candidate : {"==", "!=", ">=", "<=", ">", "<"}) {
      if (rest.starts_with(candidate)) {
        op = std::string(candidate);
        break;
      }
    }
    if (op.empty())
      return fail("unexpected '" + std::string(rest.substr(0, 1)) +
                  "' after the name: a version constraint is ==V, !=V, >=V, <=V, >V or <V");
    rest.remove_prefix(op.size());
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    size_t v = 0;
    while (v < rest.size() && versionChar(rest[v])) ++v;
    if (v == 0) return fail("version missing after '" + op + "'");
    rule.constraints.push_back({op, std::string(rest.substr(0, v))});
    rest.remove_prefix(v);
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    if (rest.empty()) break;
    if (rest.front() != ',')
      return fail("unexpected '" + std::string(rest.substr(0, 1)) +
                  "': constraints are separated by ','");
    rest.remove_prefix(1);
    while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    if (rest.empty()) return fail("a version constraint is missing after ','");
  }
  return rule;
}

bool PackageRule::matchesName(PackageEcosystem eco, std::string_view package) const {
  if (ecosystem != PackageEcosystem::any && ecosystem != eco) return false;
  if (eco == PackageEcosystem::pypi)
    return globMatch(normalizePypiName(name), normalizePypiName(package));
  return globMatch(name, package);
}

bool PackageRule::matchesVersion(std::string_view version) const {
  if (constraints.empty()) return true;
  if (version.empty()) return false;
  for (const Constraint& c : constraints) {
    const int cmp = compareVersions(version, c.version);
    const bool ok = c.op == "==" ? cmp == 0
                    : c.op == "!=" ? cmp != 0
                    : c.op == ">=" ? cmp >= 0
                    : c.op == "<=" ? cmp <= 0
                    : c.op == ">"  ? cmp > 0
                                   : cmp < 0;
    if (!ok) return false;
  }
  return true;
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
    if (!item.starts_with("sha256:"))
      return fail("each pin is 'sha256:' followed by 64 hex digits, got '" + std::string(item) +
                  "'");
    std::string hex(item.substr(7));
    std::transform(hex.begin(), hex.end(), hex.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (hex.size() != 64 || !std::all_of(hex.begin(), hex.end(), [](char c) {
          return std::isxdigit(static_cast<unsigned char>(c));
        }))
      return fail("each pin is 'sha256:' followed by 64 hex digits, got '" + std::string(item) +
                  "'");
    out.push_back(std::move(hex));
    start = comma + 1;
  }
  return out;
}

}  // namespace airlock::policy
