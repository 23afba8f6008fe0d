// The grammar of [profiles.<name>.packages] allow and deny entries, and the version order they
// compare with. It lives in the policy library so a bad entry is a policy error with its file
// position; the package proxy (supervisor/packages/) decides with the same parsed rules.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "airlock/result.h"

namespace airlock::policy {

enum class PackageEcosystem { any, pypi, npm };

// One allow or deny entry:
//   [pypi:|npm:]NAME[SPEC[,SPEC...]]   SPEC: ==V !=V >=V <=V >V <V
// NAME may hold '*' (any run of characters): "@types/*", "django-*". PyPI names compare
// PEP 503-normalized (case-insensitive, runs of - _ . are one '-'); npm names exactly.
struct PackageRule {
  struct Constraint {
    std::string op;  // "==", "!=", ">=", "<=", ">", "<"
    std::string version;
  };
  std::string text;  // the entry as written
  PackageEcosystem ecosystem = PackageEcosystem::any;
  std::string name;  // as written, without the ecosystem prefix
  std::vector<Constraint> constraints;

  static Result<PackageRule> parse(std::string_view entry);

  bool matchesName(PackageEcosystem ecosystem, std::string_view package) const;
  // Whether `version` meets every constraint; an entry without constraints matches every
  // version, and "" (the package as a whole) matches only an entry without constraints.
  bool matchesVersion(std::string_view version) const;
};

// PEP 503: lowercase, each run of '-', '_' and '.' replaced by one '-'.
std::string normalizePypiName(std::string_view name);

// Orders versions the way PyPI and npm mostly agree on: dot-separated release numbers compared
// numerically (missing ones are 0: 1.0 == 1.0.0), then a pre-release (a1, b2, rc1, .dev0,
// -beta.1, -rc.2: anything after the release numbers) before the release itself, pre-releases
// compared as text. Local versions ("+cu118") and build metadata are ignored. <0, 0, >0.
int compareVersions(std::string_view a, std::string_view b);

// packages.pins values: "sha256:HEX[, sha256:HEX...]" -> the lowercase hex digests.
Result<std::vector<std::string>> parsePins(std::string_view value);

}  // namespace airlock::policy
