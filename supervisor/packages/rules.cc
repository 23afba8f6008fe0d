#include "supervisor/packages/rules.h"

#include <algorithm>

namespace airlock::packages {

namespace {

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
    if (!e.rule.matchesName(eco, name)) continue;
    // The package as a whole is denied only by an entry without a version spec.
    const bool hit = version.empty() ? e.rule.spec.empty() : e.rule.matchesVersion(version, true);
    if (hit) return {false, e.where, "package " + package + " refused by " + e.where};
  }
  for (const Entry& e : allow_) {
    if (!e.rule.matchesName(eco, name)) continue;
    if (version.empty() || e.rule.matchesVersion(version, false))
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
      auto rule = policy::PackageRule::parse(list[i]);
      if (!rule) return fail(where + ": " + rule.error().message());
      out.push_back({std::move(*rule), where});
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
