// The grammar of [profiles.<name>.packages] allow and deny entries. It lives in the policy
// library so a bad entry is a policy error with its file position; the package proxy
// (supervisor/packages/rules.h) decides with the same parsed entries.
//
// Entries: "pandas", "requests>=2", "requests>=2,<3", "numpy==1.26.4", "@types/*", "pypi:tqdm",
// "npm:left-pad". A name may hold '*' anywhere (any run of characters). An ecosystem prefix
// restricts the entry to that ecosystem; without one it applies to both. PyPI names compare
// PEP 503-normalized (lowercase, runs of '-', '_', '.' as one '-'), on both sides; npm names
// exactly. Versions compare as package_version.h describes.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/policy/package_version.h"
#include "airlock/result.h"

namespace airlock::policy {

enum class PackageEcosystem { pypi, npm };

struct PackageRule {
  std::string text;  // as written
  std::optional<PackageEcosystem> only;
  std::string name;              // the pattern as written (npm compares it)
  std::string normalized_name;   // the pattern PEP 503-normalized (PyPI compares it)
  std::vector<Constraint> spec;  // empty: every version

  // Errors say what is wrong, without the key: "version missing after '>='".
  static Result<PackageRule> parse(std::string_view entry);

  bool matchesName(PackageEcosystem ecosystem, std::string_view package) const;
  // Whether the spec covers `version`; `fail_closed` decides for a version that does not parse
  // (a deny entry says yes, so it never fails open; an allow entry says no).
  bool matchesVersion(std::string_view version, bool fail_closed) const;
};

// PEP 503: lowercase, each run of '-', '_' and '.' becomes one '-'.
std::string normalizePypiName(std::string_view name);

// packages.pins values: "sha256:HEX[, sha256:HEX...]" -> the lowercase hex digests.
Result<std::vector<std::string>> parsePins(std::string_view value);

}  // namespace airlock::policy
