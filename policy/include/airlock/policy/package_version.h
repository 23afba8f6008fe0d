// The small version comparator package rules use: enough of PEP 440 and semver to order the
// versions PyPI and npm publish, without a semver library.
//
// A version is a dotted numeric release ("1.26.4"; an optional leading 'v'; missing components
// count as 0, so 1.0 == 1.0.0), then any number of suffixes, each a word and an optional number,
// with '.', '-' or '_' allowed around them: "a1", "b2", "rc1", ".dev0", "-beta.1", ".post1".
// Suffixes compare in order, a missing one counting as the release itself:
//   dev < any other word (alpha, a, canary, next, ...) < beta, b < rc, c, pre, preview
//   < (the release) < post, r, rev
// so 1.0.dev0 < 1.0a1 < 1.0b2 < 1.0rc1 < 1.0 < 1.0.post1, 1.0.0-alpha < 1.0.0-alpha.1 <
// 1.0.0-beta < 1.0.0, and 1.0a1.dev0 < 1.0a1. Unknown words of the same rank compare by their
// text. Local versions and build metadata ("+cpu", "+build.5") are ignored. Epochs ("1!2.0") and
// anything else are not versions: parseVersion returns nothing, and rules treat them as such
// (docs in package_rule.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace airlock::policy {

struct Version {
  struct Suffix {
    int rank = 0;     // see above; the release itself is kReleaseRank
    std::string tag;  // the word, lowercase; compared only between equal ranks
    uint64_t number = 0;
  };
  static constexpr int kReleaseRank = 4;
  std::vector<uint64_t> release;
  std::vector<Suffix> suffixes;
};

std::optional<Version> parseVersion(std::string_view text);

// <0, 0 or >0 as a sorts before, with or after b.
int compareVersions(const Version& a, const Version& b);

// One comparison of a version spec: ">=2", "!=1.3.0".
struct Constraint {
  enum class Op { eq, ne, ge, le, gt, lt };
  Op op = Op::eq;
  Version version;
  bool satisfiedBy(const Version& v) const;
};

// "==1.26.4", ">=2,<3": a comma list meaning all of them. Returns the error text ("version
// missing after '>='") through `error` when the spec does not parse.
std::optional<std::vector<Constraint>> parseVersionSpec(std::string_view text, std::string& error);

}  // namespace airlock::policy
