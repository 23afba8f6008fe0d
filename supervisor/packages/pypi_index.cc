#include "supervisor/packages/pypi_index.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

#include "supervisor/packages/rules.h"

namespace airlock::packages {
namespace {

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }
bool space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }

// Position of `needle` in `hay` from `from`, ignoring ASCII case.
size_t findNoCase(std::string_view hay, std::string_view needle, size_t from) {
  if (needle.size() > hay.size()) return std::string_view::npos;
  for (size_t i = from; i + needle.size() <= hay.size(); ++i) {
    bool same = true;
    for (size_t j = 0; j < needle.size() && same; ++j) same = lower(hay[i + j]) == needle[j];
    if (same) return i;
  }
  return std::string_view::npos;
}

void appendUtf8(std::string& out, uint32_t cp) {
  if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string trimmed(std::string_view s) {
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return std::string(s);
}

bool endsWithNoCase(std::string_view s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  for (size_t i = 0; i < suffix.size(); ++i)
    if (lower(s[s.size() - suffix.size() + i]) != suffix[i]) return false;
  return true;
}

}  // namespace

std::string htmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string htmlUnescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    const size_t semi = s.find(';', i);
    if (semi == std::string_view::npos || semi - i > 10) {
      out += '&';
      continue;
    }
    const std::string_view name = s.substr(i + 1, semi - i - 1);
    if (name == "amp")
      out += '&';
    else if (name == "lt")
      out += '<';
    else if (name == "gt")
      out += '>';
    else if (name == "quot")
      out += '"';
    else if (name == "apos")
      out += '\'';
    else if (name.size() >= 2 && name[0] == '#') {
      const bool hex = name[1] == 'x' || name[1] == 'X';
      uint32_t cp = 0;
      bool ok = name.size() > (hex ? 2u : 1u);
      for (char c : name.substr(hex ? 2 : 1)) {
        const int d = std::isdigit(static_cast<unsigned char>(c))           ? c - '0'
                      : hex && std::isxdigit(static_cast<unsigned char>(c)) ? lower(c) - 'a' + 10
                                                                            : -1;
        if (d < 0 || cp > 0x10FFFF) ok = false;
        if (!ok) break;
        cp = cp * (hex ? 16 : 10) + static_cast<uint32_t>(d);
      }
      if (!ok) {
        out += '&';
        continue;
      }
      appendUtf8(out, cp);
    } else {
      out += '&';
      continue;
    }
    i = semi;
  }
  return out;
}

std::vector<IndexLink> parseIndexLinks(std::string_view html) {
  std::vector<IndexLink> links;
  size_t pos = 0;
  while ((pos = findNoCase(html, "<a", pos)) != std::string_view::npos) {
    pos += 2;
    if (pos >= html.size() || !(space(html[pos]) || html[pos] == '>')) continue;
    // Attributes up to the tag's end.
    std::string href;
    bool has_href = false;
    IndexLink link;
    while (pos < html.size() && html[pos] != '>') {
      if (space(html[pos]) || html[pos] == '/') {
        ++pos;
        continue;
      }
      const size_t name_start = pos;
      while (pos < html.size() && !space(html[pos]) && html[pos] != '=' && html[pos] != '>') ++pos;
      std::string name(html.substr(name_start, pos - name_start));
      std::transform(name.begin(), name.end(), name.begin(), lower);
      while (pos < html.size() && space(html[pos])) ++pos;
      std::string value;
      bool has_value = false;
      if (pos < html.size() && html[pos] == '=') {
        has_value = true;
        ++pos;
        while (pos < html.size() && space(html[pos])) ++pos;
        if (pos < html.size() && (html[pos] == '"' || html[pos] == '\'')) {
          const char quote = html[pos++];
          const size_t end = html.find(quote, pos);
          if (end == std::string_view::npos) return links;  // an unterminated tag ends the page
          value = htmlUnescape(html.substr(pos, end - pos));
          pos = end + 1;
        } else {
          const size_t start = pos;
          while (pos < html.size() && !space(html[pos]) && html[pos] != '>') ++pos;
          value = htmlUnescape(html.substr(start, pos - start));
        }
      }
      if (name == "href") {
        href = value;
        has_href = true;
      } else if (name == "data-requires-python") {
        link.requires_python = value;
      } else if (name == "data-yanked") {
        link.yanked = true;
        link.yanked_reason = has_value ? value : "";
      }
    }
    if (pos >= html.size()) break;
    ++pos;  // '>'
    const size_t close = findNoCase(html, "</a", pos);
    if (close == std::string_view::npos) break;
    link.filename = trimmed(htmlUnescape(html.substr(pos, close - pos)));
    pos = close + 3;
    if (!has_href || link.filename.empty()) continue;
    if (const size_t hash = href.find('#'); hash != std::string::npos) {
      const std::string fragment = href.substr(hash + 1);
      href.resize(hash);
      if (fragment.starts_with("sha256=")) {
        link.sha256 = fragment.substr(7);
        std::transform(link.sha256.begin(), link.sha256.end(), link.sha256.begin(), lower);
      }
    }
    link.href = std::move(href);
    links.push_back(std::move(link));
  }
  return links;
}

DistFile classifyDistFile(std::string_view project, std::string_view filename) {
  DistFile out;
  if (endsWithNoCase(filename, ".whl")) {
    const std::string_view stem = filename.substr(0, filename.size() - 4);
    const size_t first = stem.find('-');
    if (first == std::string_view::npos) return out;
    const size_t second = stem.find('-', first + 1);
    if (second == std::string_view::npos) return out;
    out.kind = DistKind::wheel;
    out.version = std::string(stem.substr(first + 1, second - first - 1));
    return out;
  }
  static constexpr std::string_view kSdistExtensions[] = {".tar.gz", ".tar.bz2", ".tar.xz", ".tgz",
                                                          ".zip"};
  for (std::string_view ext : kSdistExtensions) {
    if (!endsWithNoCase(filename, ext)) continue;
    const std::string_view stem = filename.substr(0, filename.size() - ext.size());
    out.kind = DistKind::sdist;
    // The name ends at the '-' whose prefix is the project's name, else at the last '-'.
    const std::string wanted = normalizePypiName(project);
    size_t split = std::string_view::npos;
    for (size_t i = stem.find('-'); i != std::string_view::npos; i = stem.find('-', i + 1)) {
      if (normalizePypiName(stem.substr(0, i)) == wanted) {
        split = i;
        break;
      }
    }
    if (split == std::string_view::npos) split = stem.rfind('-');
    if (split != std::string_view::npos) out.version = std::string(stem.substr(split + 1));
    return out;
  }
  return out;
}

bool plausibleDistFilename(std::string_view f) {
  if (f.empty() || f.size() > 255 || f.front() == '.') return false;
  return std::all_of(f.begin(), f.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ||
           c == '+' || c == '!';
  });
}

std::string renderIndexPage(std::string_view project, const std::vector<IndexLink>& links,
                            std::string_view file_base) {
  const std::string name = htmlEscape(project);
  std::string page =
      "<!DOCTYPE html>\n<html>\n<head>\n<meta name=\"pypi:repository-version\" "
      "content=\"1.0\">\n<title>Links for " +
      name + "</title>\n</head>\n<body>\n<h1>Links for " + name + "</h1>\n";
  for (const IndexLink& link : links) {
    std::string href = std::string(file_base) + link.filename;
    if (!link.sha256.empty()) href += "#sha256=" + link.sha256;
    page += "<a href=\"" + htmlEscape(href) + "\"";
    if (!link.requires_python.empty())
      page += " data-requires-python=\"" + htmlEscape(link.requires_python) + "\"";
    if (link.yanked) page += " data-yanked=\"" + htmlEscape(link.yanked_reason) + "\"";
    page += ">" + htmlEscape(link.filename) + "</a><br/>\n";
  }
  page += "</body>\n</html>\n";
  return page;
}

}  // namespace airlock::packages
