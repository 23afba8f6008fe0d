// Checks of [profiles.<name>.packages] and [packages], and the ways they loosen the defaults.
#include <algorithm>
#include <cctype>

#include "airlock/policy/package_rule.h"
#include "airlock/policy/policy.h"
#include "check.h"

namespace airlock::policy {
namespace {

using detail::Problem;
using detail::q;
using detail::range;
using Check = std::optional<Problem>;

constexpr uint64_t kMaxMiB = uint64_t{1} << 20;

// "http://host[:port]/path" or "https://...": the upstreams are fetched by the supervisor.
bool httpUrl(std::string_view url) {
  for (std::string_view scheme : {"http://", "https://"}) {
    if (url.starts_with(scheme) && url.size() > scheme.size() && url[scheme.size()] != '/' &&
        url.find_first_of(" \t\r\n") == std::string_view::npos)
      return true;
  }
  return false;
}

}  // namespace

namespace detail {

std::optional<Problem> checkPackages(const Packages& p) {
  for (auto [list, key] : {std::pair{&p.allow, "packages.allow"}, {&p.deny, "packages.deny"}}) {
    for (size_t i = 0; i < list->size(); ++i) {
      const std::string entry_key = std::string(key) + "[" + std::to_string(i) + "]";
      auto rule = PackageRule::parse((*list)[i]);
      if (!rule)
        return Problem{entry_key,
                       entry_key + " = " + q((*list)[i]) + ": " + rule.error().message()};
    }
  }
  if (Check c = range("packages.max_file_mb", p.max_file_mb, 1, kMaxMiB)) return c;
  if (Check c = range("packages.max_sandbox_mb", p.max_sandbox_mb, 1, kMaxMiB)) return c;
  if (p.max_file_mb > p.max_sandbox_mb)
    return Problem{"packages.max_file_mb",
                   "packages.max_file_mb = " + std::to_string(p.max_file_mb) +
                       ": above packages.max_sandbox_mb = " + std::to_string(p.max_sandbox_mb) +
                       ", so no file that large could ever be served",
                   "packages.max_sandbox_mb"};
  for (const auto& [name, hashes] : p.pins) {
    const std::string key = "packages.pins." + name;
    if (name.empty()) return Problem{key, "packages.pins: a package name may not be empty"};
    auto parsed = parsePins(hashes);
    if (!parsed) return Problem{key, key + " = " + q(hashes) + ": " + parsed.error().message()};
  }
  return std::nullopt;
}

std::optional<Problem> checkPackageSettings(const PackageSettings& s) {
  if (!httpUrl(s.pypi_index))
    return Problem{"packages.pypi_index", "packages.pypi_index = " + q(s.pypi_index) +
                                              ": must be an http:// or https:// URL"};
  if (!httpUrl(s.npm_registry))
    return Problem{"packages.npm_registry", "packages.npm_registry = " + q(s.npm_registry) +
                                                ": must be an http:// or https:// URL"};
  if (s.cache_dir.empty() || s.cache_dir.front() != '/' ||
      s.cache_dir.find("/../") != std::string::npos || s.cache_dir.ends_with("/..") ||
      s.cache_dir.find_first_not_of('/') == std::string::npos)
    return Problem{"packages.cache_dir",
                   "packages.cache_dir = " + q(s.cache_dir) +
                       ": must be an absolute path without '..', and not '/'"};
  if (!s.ca_file.empty() && s.ca_file.front() != '/')
    return Problem{"packages.ca_file",
                   "packages.ca_file = " + q(s.ca_file) + ": must be an absolute path or ''"};
  if (Check c = range("packages.timeout_s", s.timeout_s, 1, 3600)) return c;
  return range("packages.port", s.port, 1, 65535);
}

std::vector<std::string> packagesRelaxations(const Packages& p) {
  std::vector<std::string> out;
  if (!p.enabled()) return out;
  std::string list;
  for (const auto& a : p.allow) list += (list.empty() ? "" : ", ") + a;
  out.push_back("packages.allow = [" + list +
                "]: sandboxes may install these packages through the package proxy (its "
                "upstreams see the names asked for)");
  if (p.sdists)
    out.push_back("packages.sdists = true: source distributions run their setup code at install");
  return out;
}

}  // namespace detail
}  // namespace airlock::policy
