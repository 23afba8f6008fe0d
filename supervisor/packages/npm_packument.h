// npm packuments as pure functions on strings: which versions the sandbox sees and where their
// tarballs come from (the proxy, never the registry directly).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "airlock/result.h"

namespace airlock::packages {

// Where one version's tarball lives upstream and how to verify it.
struct NpmTarball {
  std::string version;
  std::string url;        // dist.tarball, as upstream wrote it
  std::string integrity;  // dist.integrity: "sha512-<base64>" (possibly among other SRI entries)
  std::string shasum;     // dist.shasum: sha1 hex
};

struct RewrittenPackument {
  std::string body;                  // the JSON the sandbox gets
  std::vector<NpmTarball> tarballs;  // every version upstream lists, refused ones included
  bool kept_all_refused = false;     // the rules refused every version, so all were kept
};

// Keeps the versions `allowed` admits (all of them when it admits none, so that npm asks for
// one and the download then fails with the rule's message rather than a vague "no matching
// version"), drops dist-tags and "time" entries of the versions removed, and points every
// dist.tarball at `tarball_base` + version + ".tgz". Fails on JSON that is not a packument.
Result<RewrittenPackument> rewritePackument(
    std::string_view upstream_json, std::string_view tarball_base,
    const std::function<bool(const std::string& version)>& allowed);

// The sha512 of an SRI "integrity" list ("sha512-<base64> sha1-..."), or "" when it has none.
std::string sha512FromIntegrity(std::string_view integrity);

// "@scope/name" -> "@scope%2fname": a package name as one path segment.
std::string npmPathSegment(std::string_view name);

// Whether `name` is an npm package name the proxy passes upstream: "name" or "@scope/name",
// made of lowercase or uppercase letters, digits, '-', '.', '_' and '~', not starting with '.'
// or '_'.
bool plausibleNpmName(std::string_view name);

}  // namespace airlock::packages
