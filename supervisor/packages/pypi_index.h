// PEP 503 "simple" project pages as pure functions on strings: reading upstream's anchors,
// telling wheels from sdists and their versions by file name, and writing the page the sandbox
// sees, whose links all point back at the proxy.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace airlock::packages {

// One <a> of a project page, its text and attributes entity-decoded.
struct IndexLink {
  std::string filename;         // the anchor's text
  std::string href;             // as written, without its fragment
  std::string sha256;           // from "#sha256=<hex>" (lowercase), or ""
  std::string requires_python;  // data-requires-python, or ""
  bool yanked = false;
  std::string yanked_reason;  // data-yanked's value ("" for a bare data-yanked)
};

// Every anchor of `html`, tolerantly: attributes quoted with " or ', or not at all; any case;
// anchors without an href or a text are skipped. data-dist-info-metadata / data-core-metadata
// are dropped on purpose: the proxy serves no "<file>.metadata".
std::vector<IndexLink> parseIndexLinks(std::string_view html);

enum class DistKind { wheel, sdist, other };

// What a file name is and the version it carries: a wheel "name-ver(-build)?-py-abi-plat.whl",
// an sdist "name-ver.tar.gz" (.zip, .tar.bz2, .tar.xz, .tgz); `project` (any spelling) finds
// where the name ends in an sdist, whose name may hold '-'. Version "" when none is found.
struct DistFile {
  DistKind kind = DistKind::other;
  std::string version;
};
DistFile classifyDistFile(std::string_view project, std::string_view filename);

// A file name the proxy is willing to look up: PEP 427/625 characters only, no path separator,
// not starting with '.'.
bool plausibleDistFilename(std::string_view filename);

// The page the sandbox gets: one anchor per link, to `file_base` + filename + "#sha256=...".
// `file_base` is "http://<host>/pypi/files/<project>/".
std::string renderIndexPage(std::string_view project, const std::vector<IndexLink>& links,
                            std::string_view file_base);

std::string htmlEscape(std::string_view s);
std::string htmlUnescape(std::string_view s);

}  // namespace airlock::packages
