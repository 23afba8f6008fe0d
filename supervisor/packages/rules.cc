#include "supervisor/packages/rules.h"

#include <algorithm>
#include <optional>

namespace airlock::packages {

struct Rules::Entry {
  std::string text;   // as written, for messages
  std::string where;  // "profiles.x.packages.deny[0] = 'evil*'"
  std::optional<Ecosystem> only;
  std::string name;              // the pattern as written (npm compares it)
  std::string normalized_name;   // the pattern PEP 503-normalized (PyPI compares it)
  std::vector<Constraint> spec;  // empty: every version
};

namespace {

// '*' matches any run of characters, everything else itself.
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

Result<Rules::Entry> parseEntry(const std::string& text, const std::string& where) {
  auto bad = [&](const std::string& why) { return fail(where + ": " + why); };
  Rules::Entry e;
  e.text = text;
  e.where = where;
  std::string_view rest = text;
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  if (const size_t colon = rest.find(':'); colon != std::string_view::npos) {
    const std::string_view prefix = rest.substr(0, colon);
    if (prefix == "pypi")
      e.only = Ecosystem::pypi;
    else if (prefix == "npm")
      e.only = Ecosystem::npm;
    else
      return bad("unknown ecosystem '" + std::string(prefix) + "' (pypi: or npm:)");
    rest.remove_prefix(colon + 1);
  }
  const size_t spec_at = rest.find_first_of("=!<>~ ");
  e.name = std::string(rest.substr(0, spec_at));
  if (e.name.empty()) return bad("package name missing");
  for (char c : e.name)
    if (!nameCharacter(c))
      return bad("'" + std::string(1, c) + "' cannot be part of a package name");
  e.normalized_name = normalizePypiName(e.name);
  if (spec_at != std::string_view::npos) {
    std::string_view spec = rest.substr(spec_at);
    while (!spec.empty() && spec.front() == ' ') spec.remove_prefix(1);
    if (!spec.empty()) {
      if (spec.starts_with("~=")) return bad("'~=' is not supported (write >=X,<Y)");
      std::string error;
      auto parsed = parseVersionSpec(spec, error);
      if (!parsed) return bad(error);
      e.spec = std::move(*parsed);
    }
  }
  return e;
}

bool nameMatches(const Rules::Entry& e, Ecosystem eco, std::string_view name) {
  if (e.only && *e.only != eco) return false;
  if (eco == Ecosystem::pypi) return globMatch(e.normalized_name, normalizePypiName(name));
  return globMatch(e.name, name);
}

// Whether the entry's version spec covers `version`; `fail_closed` decides for a version that
// does not parse.
bool specMatches(const Rules::Entry& e, std::string_view version, bool fail_closed) {
  if (e.spec.empty()) return true;
  const auto v = parseVersion(version);
  if (!v) return fail_closed;
  return std::all_of(e.spec.begin(), e.spec.end(),
                     [&](const Constraint& c) { return c.satisfiedBy(*v); });
}

std::string describePackage(std::string_view name, std::string_view version) {
  std::string s = "'" + std::string(name) + "'";
  if (!version.empty()) s += " " + std::string(version);
  return s;
}

bool isSha256Hex(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace

std::string_view ecosystemName(Ecosystem e) { return e == Ecosystem::pypi ? "pypi" : "npm"; }

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

Rules::Rules(RuleSet set, std::vector<Entry> allow, std::vector<Entry> deny,
             std::map<std::string, std::vector<std::string>> pins)
    : set_(std::move(set)),
      allow_(std::move(allow)),
      deny_(std::move(deny)),
      pins_(std::move(pins)) {}

Rules::~Rules() = default;

Verdict Rules::decide(Ecosystem eco, std::string_view name, std::string_view version) const {
  const std::string package = describePackage(name, version);
  for (const Entry& e : deny_) {
    if (!nameMatches(e, eco, name)) continue;
    // The package as a whole is denied only by an entry without a version spec.
    const bool hit = version.empty() ? e.spec.empty() : specMatches(e, version, true);
    if (hit) return {false, e.where, "package " + package + " refused by " + e.where};
  }
  for (const Entry& e : allow_) {
    if (!nameMatches(e, eco, name)) continue;
    if (version.empty() || specMatches(e, version, false))
      return {true, e.where, "package " + package + " allowed by " + e.where};
  }
  const std::string rule = set_.key + ".allow (no entry matches " + package + ")";
  return {false, rule, "package " + package + " refused by " + rule};
}

const std::vector<std::string>* Rules::pinsFor(Ecosystem eco, std::string_view name,
                                               std::string* pin_key) const {
  for (const auto& [pinned, hashes] : pins_) {
    const bool same = eco == Ecosystem::pypi ? normalizePypiName(pinned) == normalizePypiName(name)
                                             : pinned == name;
    if (!same) continue;
    if (pin_key != nullptr) *pin_key = set_.key + ".pins['" + pinned + "']";
    return &hashes;
  }
  return nullptr;
}

Result<std::shared_ptr<const Rules>> compileRules(const RuleSet& set) {
  auto compileList = [&](const std::vector<std::string>& list,
                         std::string_view field) -> Result<std::vector<Rules::Entry>> {
    std::vector<Rules::Entry> out;
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string where =
          set.key + "." + std::string(field) + "[" + std::to_string(i) + "] = '" + list[i] + "'";
      auto entry = parseEntry(list[i], where);
      if (!entry) return Unexpected(std::move(entry.error()));
      out.push_back(std::move(*entry));
    }
    return out;
  };
  auto allow = compileList(set.allow, "allow");
  if (!allow) return Unexpected(std::move(allow.error()));
  auto deny = compileList(set.deny, "deny");
  if (!deny) return Unexpected(std::move(deny.error()));
  std::map<std::string, std::vector<std::string>> pins;
  for (const auto& [name, hashes] : set.pins) {
    const std::string where = set.key + ".pins['" + name + "']";
    if (name.empty()) return fail(where + ": package name missing");
    auto& out = pins[name];
    for (size_t i = 0; i < hashes.size(); ++i) {
      std::string hex = hashes[i];
      std::transform(hex.begin(), hex.end(), hex.begin(),
                     [](char c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; });
      if (!isSha256Hex(hex))
        return fail(where + "[" + std::to_string(i) + "] = '" + hashes[i] +
                    "': not a sha256 (64 hex digits)");
      out.push_back(std::move(hex));
    }
  }
  for (uint64_t limit : {set.max_file_bytes, set.max_sandbox_bytes})
    if (limit == 0) return fail(set.key + ": max_file_bytes and max_sandbox_bytes must be > 0");
  return std::make_shared<const Rules>(set, std::move(*allow), std::move(*deny), std::move(pins));
}

}  // namespace airlock::packages
