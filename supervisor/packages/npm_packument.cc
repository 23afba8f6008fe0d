#include "supervisor/packages/npm_packument.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <set>

namespace airlock::packages {

Result<RewrittenPackument> rewritePackument(
    std::string_view upstream_json, std::string_view tarball_base,
    const std::function<bool(const std::string& version)>& allowed) {
  nlohmann::json doc = nlohmann::json::parse(upstream_json, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) return fail("packument is not a JSON object");
  auto versions = doc.find("versions");
  if (versions == doc.end() || !versions->is_object())
    return fail("packument has no \"versions\" object");
  RewrittenPackument out;
  std::set<std::string> refused;
  for (auto& [version, manifest] : versions->items()) {
    if (!manifest.is_object()) return fail("packument version '" + version + "' is not an object");
    NpmTarball tarball;
    tarball.version = version;
    if (auto dist = manifest.find("dist"); dist != manifest.end() && dist->is_object()) {
      tarball.url = dist->value("tarball", "");
      tarball.integrity = dist->value("integrity", "");
      tarball.shasum = dist->value("shasum", "");
      (*dist)["tarball"] = std::string(tarball_base) + version + ".tgz";
    }
    out.tarballs.push_back(std::move(tarball));
    if (!allowed(version)) refused.insert(version);
  }
  if (!refused.empty() && refused.size() == versions->size()) {
    out.kept_all_refused = true;
    refused.clear();
  }
  for (const std::string& version : refused) versions->erase(version);
  if (auto tags = doc.find("dist-tags"); tags != doc.end() && tags->is_object()) {
    for (auto it = tags->begin(); it != tags->end();) {
      if (!it->is_string() || refused.count(it->get<std::string>()) != 0)
        it = tags->erase(it);
      else
        ++it;
    }
  }
  if (auto time = doc.find("time"); time != doc.end() && time->is_object())
    for (const std::string& version : refused) time->erase(version);
  out.body = doc.dump();
  return out;
}

std::string sha512FromIntegrity(std::string_view integrity) {
  size_t pos = 0;
  while (pos < integrity.size()) {
    while (pos < integrity.size() && integrity[pos] == ' ') ++pos;
    size_t end = integrity.find(' ', pos);
    if (end == std::string_view::npos) end = integrity.size();
    std::string_view entry = integrity.substr(pos, end - pos);
    if (entry.starts_with("sha512-")) {
      entry.remove_prefix(7);
      return std::string(entry.substr(0, entry.find('?')));  // SRI options follow a '?'
    }
    pos = end;
  }
  return "";
}

std::string npmPathSegment(std::string_view name) {
  std::string out;
  for (char c : name) out += c == '/' ? std::string("%2f") : std::string(1, c);
  return out;
}

bool plausibleNpmName(std::string_view name) {
  if (name.empty() || name.size() > 214) return false;
  auto plainPart = [](std::string_view part) {
    if (part.empty() || part.front() == '.' || part.front() == '_') return false;
    return std::all_of(part.begin(), part.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_' ||
             c == '~';
    });
  };
  if (name.front() == '@') {
    const size_t slash = name.find('/');
    if (slash == std::string_view::npos) return false;
    return plainPart(name.substr(1, slash - 1)) && plainPart(name.substr(slash + 1));
  }
  return plainPart(name);
}

}  // namespace airlock::packages
