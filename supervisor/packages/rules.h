// Which packages a sandbox may install: a profile's allow and deny lists, limits and pins,
// compiled once and asked per package (index level) and per version (file level).
//
// Entries: "pandas", "requests>=2", "requests>=2,<3", "numpy==1.26.4", "@types/*", "pypi:tqdm",
// "npm:left-pad". A name may hold '*' anywhere (any run of characters). An ecosystem prefix
// restricts the entry to that ecosystem; without one it applies to both. PyPI names compare
// PEP 503-normalized (lowercase, runs of '-', '_', '.' as one '-'), on both sides; npm names
// exactly. Versions compare as version.h describes.
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

#include "airlock/result.h"
#include "supervisor/packages/version.h"

namespace airlock::packages {

enum class Ecosystem { pypi, npm };

std::string_view ecosystemName(Ecosystem e);  // "pypi", "npm"

// PEP 503: lowercase, each run of '-', '_' and '.' becomes one '-'.
std::string normalizePypiName(std::string_view name);

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
  struct Entry;  // one compiled allow or deny entry (rules.cc)
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
