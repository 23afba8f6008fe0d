// Which packages a sandbox may install: a profile's allow and deny lists, limits and pins,
// compiled once and asked per package (index level) and per version (file level).
//
// The entries' grammar and version order are the policy's (airlock/policy/package_rule.h), so a
// bad entry is already a policy error with its file position.
//
// Deciding:
//   - a deny entry whose name matches refuses: without a version spec, the package as a whole
//     and every version; with one, only the versions it matches (and any version that does not
//     parse, so a deny never fails open);
//   - otherwise an allow entry whose name matches (and, for a version, whose spec matches it)
//     admits; asked about the package as a whole (version ""), the name alone decides;
//   - nothing matching: refused. An empty allow list admits nothing.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/policy/package_rule.h"
#include "airlock/result.h"

namespace airlock::packages {

using Ecosystem = policy::PackageEcosystem;
using policy::normalizePypiName;

std::string_view ecosystemName(Ecosystem e);  // "pypi", "npm"

// A profile's package rules as the policy states them.
struct RuleSet {
  std::vector<std::string> allow;              // see above; empty: nothing allowed
  std::vector<std::string> deny;               // same syntax; deny wins over allow
  uint64_t max_file_bytes = 100ull << 20;      // one wheel/sdist/tarball
  uint64_t max_sandbox_bytes = 1024ull << 20;  // total served to one sandbox
  bool sdists = false;  // PyPI source distributions (they run setup.py when installed)
  // package name -> the sha256 (hex) its files may have; a pinned package's files must match one.
  std::map<std::string, std::vector<std::string>> pins;
  std::string key;  // where these rules live, for messages: "profiles.data-science.packages"
};

struct Verdict {
  bool allowed = false;
  // The rule that decided: "profiles.x.packages.deny[0] = 'evil*'", or
  // "profiles.x.packages.allow (no entry matches 'foo')".
  std::string rule;
  // One human line: "package 'foo' 1.0 refused by <rule>" or "package 'foo' allowed by <rule>".
  std::string reason;
};

class Rules {
 public:
  // One allow or deny entry, and how the policy names it for messages.
  struct Entry {
    policy::PackageRule rule;
    std::string where;  // "profiles.x.packages.deny[0] = 'evil*'"
  };
  Rules(RuleSet set, std::vector<Entry> allow, std::vector<Entry> deny,
        std::map<std::string, std::vector<std::string>> pins);
  ~Rules();

  // version "": the package as a whole (a PyPI project page, an npm packument).
  Verdict decide(Ecosystem ecosystem, std::string_view name, std::string_view version) const;

  uint64_t maxFileBytes() const { return set_.max_file_bytes; }
  uint64_t maxSandboxBytes() const { return set_.max_sandbox_bytes; }
  bool sdists() const { return set_.sdists; }
  const std::string& key() const { return set_.key; }
  // The pinned sha256 (lowercase hex) of a package, or nullptr when it is not pinned; `pin_key`
  // receives how the policy names the pin ("profiles.x.packages.pins['numpy']").
  const std::vector<std::string>* pinsFor(Ecosystem ecosystem, std::string_view name,
                                          std::string* pin_key = nullptr) const;

 private:
  RuleSet set_;
  std::vector<Entry> allow_, deny_;
  std::map<std::string, std::vector<std::string>> pins_;  // as written (keys), lowercase hex
};

// Parses every entry. Errors name the key and the entry:
// "profiles.x.packages.allow[2] = 'requests>=': version missing after '>='".
Result<std::shared_ptr<const Rules>> compileRules(const RuleSet& set);

}  // namespace airlock::packages
