#include "url.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace airlock::transfer_http {
namespace {

// Longer paths are cut in messages: a display is for people, and fits the ABI's 512 bytes.
constexpr size_t kMaxDisplayPath = 300;
constexpr std::string_view kEllipsis = "\xE2\x80\xA6";  // "…"

[[noreturn]] void bad(const std::string& why) { throw std::invalid_argument(why); }

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

std::string lowered(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lower(c);
  return out;
}

bool isAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isHex(char c) { return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
int hexValue(char c) {
  if (isDigit(c)) return c - '0';
  return lower(c) - 'a' + 10;
}
bool isUnreserved(char c) {
  return isAlpha(c) || isDigit(c) || c == '-' || c == '.' || c == '_' || c == '~';
}
// Characters a path or query may carry as they are (RFC 3986 pchar, '/' and '?').
bool isUriChar(char c) {
  return isUnreserved(c) || std::string_view("!$&'()*+,;=:@/?").find(c) != std::string_view::npos;
}

std::string percentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && isHex(s[i + 1]) && isHex(s[i + 2])) {
      out += static_cast<char>(hexValue(s[i + 1]) * 16 + hexValue(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// What may go into a request line: control characters are refused; spaces, non-ASCII bytes and
// characters URIs do not allow are percent-encoded, as browsers do. In a path, escapes of
// unreserved characters are decoded ("%2E" is '.', which dot-segment removal must see) and the
// others get uppercase hex, so "%2f" and "%2F" compare equal.
std::string cleanComponent(std::string_view s, bool is_path) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const auto u = static_cast<unsigned char>(s[i]);
    if (u < 0x20 || u == 0x7f) bad("a control character in the URL");
    if (s[i] == '%' && i + 2 < s.size() && isHex(s[i + 1]) && isHex(s[i + 2])) {
      const char decoded = static_cast<char>(hexValue(s[i + 1]) * 16 + hexValue(s[i + 2]));
      if (is_path && isUnreserved(decoded)) {
        out += decoded;
      } else if (is_path) {
        out += '%';
        out += static_cast<char>(std::toupper(static_cast<unsigned char>(s[i + 1])));
        out += static_cast<char>(std::toupper(static_cast<unsigned char>(s[i + 2])));
      } else {
        out.append(s.substr(i, 3));  // a query's bytes are signed as they are
      }
      i += 2;
    } else if (isUriChar(s[i]) && !(is_path && s[i] == '?')) {
      out += s[i];
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

// RFC 3986 section 5.2.4, on a path starting with '/'.
std::string removeDotSegments(std::string in) {
  std::string out;
  auto popSegment = [&out] {
    const size_t slash = out.rfind('/');
    out.erase(slash == std::string::npos ? 0 : slash);
  };
  while (!in.empty()) {
    if (in.starts_with("../")) {
      in.erase(0, 3);
    } else if (in.starts_with("./")) {
      in.erase(0, 2);
    } else if (in.starts_with("/./")) {
      in.replace(0, 3, "/");
    } else if (in == "/.") {
      in = "/";
    } else if (in.starts_with("/../")) {
      in.replace(0, 4, "/");
      popSegment();
    } else if (in == "/..") {
      in = "/";
      popSegment();
    } else if (in == "." || in == "..") {
      in.clear();
    } else {
      const size_t end = in.find('/', in[0] == '/' ? 1 : 0);
      out.append(in, 0, end);
      in.erase(0, end == std::string::npos ? in.size() : end);
    }
  }
  return out.empty() ? "/" : out;
}

std::string normalizePath(std::string_view raw) {
  std::string path = cleanComponent(raw, /*is_path=*/true);
  if (path.empty() || path[0] != '/') path.insert(0, "/");
  return removeDotSegments(std::move(path));
}

// A registered name: letters, digits, '-', '_' and dots between non-empty labels. One trailing
// dot (the DNS root) is dropped: it is the same host, and TLS names carry none.
std::string checkedName(std::string_view host) {
  std::string h = lowered(host);
  if (h.ends_with('.')) h.pop_back();
  if (h.empty()) bad("no host");
  for (char c : h)
    if (!(isAlpha(c) || isDigit(c) || c == '-' || c == '_' || c == '.'))
      bad(std::string("a host with the character '") + (c == '%' ? "%" : std::string(1, c)) +
          "' (only names and IP literals)");
  if (h.starts_with('.') || h.find("..") != std::string::npos) bad("a host with an empty label");
  return h;
}

std::string canonicalIpv6(std::string_view literal) {
  if (literal.find('%') != std::string_view::npos) bad("an IPv6 zone in the host");
  std::string s(literal);
  in6_addr a{};
  if (inet_pton(AF_INET6, s.c_str(), &a) != 1) bad("an invalid IPv6 literal");
  char buf[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, &a, buf, sizeof buf);
  return buf;
}

uint16_t parsePort(std::string_view s, uint16_t fallback) {
  if (s.empty()) return fallback;
  if (s.size() > 5 || !std::all_of(s.begin(), s.end(), isDigit)) bad("an invalid port");
  const int port = std::stoi(std::string(s));
  if (port < 1 || port > 65535) bad("a port out of range");
  return static_cast<uint16_t>(port);
}

struct HostPort {
  std::string host;
  bool ipv6 = false;
  std::string port;  // as written, "" when none
};

HostPort splitHostPort(std::string_view hp) {
  HostPort out;
  if (hp.starts_with('[')) {
    const size_t close = hp.find(']');
    if (close == std::string_view::npos) bad("an IPv6 literal without its ']'");
    out.host = canonicalIpv6(hp.substr(1, close - 1));
    out.ipv6 = true;
    std::string_view rest = hp.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') bad("characters after the IPv6 literal");
      out.port = rest.substr(1);
    }
    return out;
  }
  const size_t colon = hp.find(':');
  out.host = hp.substr(0, colon);
  if (colon != std::string_view::npos) {
    out.port = hp.substr(colon + 1);  // "host:" is the default port (RFC 3986 3.2.3)
  }
  return out;
}

// "http" or "https" from "scheme://rest"; `rest` gets what follows "://".
std::string splitScheme(std::string_view text, std::string_view& rest) {
  const size_t sep = text.find("://");
  if (sep == std::string_view::npos) bad("not an absolute URL (scheme://host/...)");
  std::string scheme = lowered(text.substr(0, sep));
  if (scheme != "http" && scheme != "https") bad("the scheme is not http or https");
  rest = text.substr(sep + 3);
  return scheme;
}

// Cuts a display to a readable length without splitting a UTF-8 sequence.
std::string capped(std::string s) {
  if (s.size() <= kMaxDisplayPath) return s;
  size_t cut = kMaxDisplayPath;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  s.resize(cut);
  s += kEllipsis;
  return s;
}

bool validSchemeName(std::string_view s) {
  if (s.empty() || !isAlpha(s[0])) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return isAlpha(c) || isDigit(c) || c == '+' || c == '-' || c == '.';
  });
}

}  // namespace

std::string Url::target() const { return has_query ? path + "?" + query : path; }

std::string Url::authority() const {
  std::string a = ipv6_literal ? "[" + host + "]" : host;
  if (port != defaultPort()) a += ":" + std::to_string(port);
  return a;
}

std::string Url::display() const {
  std::string d = capped(scheme + "://" + authority() + path);
  if (has_query) d += "?" + std::string(kEllipsis);
  return d;
}

std::string Url::withoutUserinfo() const { return scheme + "://" + authority() + target(); }

Url parseUrl(std::string_view text) {
  Url url;
  std::string_view rest;
  url.scheme = splitScheme(text, rest);
  if (const size_t hash = rest.find('#'); hash != std::string_view::npos)
    rest = rest.substr(0, hash);
  const size_t auth_end = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, auth_end);
  rest = auth_end == std::string_view::npos ? std::string_view() : rest.substr(auth_end);

  if (const size_t at = authority.rfind('@'); at != std::string_view::npos) {
    std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    url.has_userinfo = true;
    const size_t colon = userinfo.find(':');
    url.user = percentDecode(userinfo.substr(0, colon));
    if (colon != std::string_view::npos) url.password = percentDecode(userinfo.substr(colon + 1));
  }
  for (char c : authority)
    if (static_cast<unsigned char>(c) < 0x21 || c == 0x7f)
      bad("a space or control character in the host");
  HostPort hp = splitHostPort(authority);
  url.ipv6_literal = hp.ipv6;
  url.host = hp.ipv6 ? hp.host : checkedName(hp.host);
  url.port = parsePort(hp.port, url.defaultPort());

  const size_t q = rest.find('?');
  url.path = normalizePath(rest.substr(0, q));
  if (q != std::string_view::npos) {
    url.has_query = true;
    url.query = cleanComponent(rest.substr(q + 1), /*is_path=*/false);
  }
  return url;
}

std::string redact(std::string_view location) {
  std::string out;
  std::string_view rest = location;
  const size_t sep = location.find("://");
  if (sep != std::string_view::npos &&
      location.substr(0, sep).find_first_of("/?#") == std::string_view::npos) {
    std::string_view after = location.substr(sep + 3);
    const size_t auth_end = after.find_first_of("/?#");
    std::string_view authority = after.substr(0, auth_end);
    if (const size_t at = authority.rfind('@'); at != std::string_view::npos)
      authority = authority.substr(at + 1);
    out.append(location.substr(0, sep + 3)).append(authority);
    rest = auth_end == std::string_view::npos ? std::string_view() : after.substr(auth_end);
  }
  if (const size_t hash = rest.find('#'); hash != std::string_view::npos)
    rest = rest.substr(0, hash);
  const size_t q = rest.find('?');
  out.append(rest.substr(0, q));
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  out = capped(std::move(out));
  if (q != std::string_view::npos) out += "?" + std::string(kEllipsis);
  return out;
}

Url resolveReference(const Url& base, std::string_view ref) {
  // Leading and trailing spaces are not part of a Location (RFC 9110 field values).
  while (!ref.empty() && (ref.front() == ' ' || ref.front() == '\t')) ref.remove_prefix(1);
  while (!ref.empty() && (ref.back() == ' ' || ref.back() == '\t')) ref.remove_suffix(1);
  const size_t first = ref.find_first_of(":/?#");
  if (first != std::string_view::npos && ref[first] == ':' &&
      validSchemeName(ref.substr(0, first))) {
    const std::string scheme = lowered(ref.substr(0, first));
    if (scheme != "http" && scheme != "https") bad("a redirect to a '" + scheme + ":' URL");
    return parseUrl(ref);
  }
  const std::string origin = base.scheme + "://" + base.authority();
  if (ref.starts_with("//")) return parseUrl(base.scheme + ":" + std::string(ref));
  if (ref.starts_with('/')) return parseUrl(origin + std::string(ref));
  if (ref.empty() || ref.starts_with('#')) return parseUrl(base.withoutUserinfo());
  if (ref.starts_with('?')) return parseUrl(origin + base.path + std::string(ref));
  const std::string dir = base.path.substr(0, base.path.rfind('/') + 1);
  return parseUrl(origin + dir + std::string(ref));
}

Pattern parsePattern(std::string_view text) {
  Pattern p;
  p.text = text;
  if (text.find_first_of("?#") != std::string_view::npos)
    bad("a pattern takes no query or fragment");
  std::string_view rest;
  p.scheme = splitScheme(text, rest);
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (authority.find('@') != std::string_view::npos) bad("a pattern takes no userinfo");
  HostPort hp = splitHostPort(authority);
  if (hp.ipv6) {
    p.host = hp.host;
  } else if (hp.host.starts_with("*.")) {
    p.wildcard = true;
    p.host = "." + checkedName(std::string_view(hp.host).substr(2));
  } else {
    if (hp.host.find('*') != std::string::npos)
      bad("'*' only as a whole first label (\"*.example.com\")");
    p.host = checkedName(hp.host);
  }
  p.port = parsePort(hp.port, p.scheme == "https" ? 443 : 80);
  if (slash != std::string_view::npos) p.path_prefix = normalizePath(rest.substr(slash));
  return p;
}

bool Pattern::matches(const Url& url) const {
  if (url.scheme != scheme || url.port != port) return false;
  if (wildcard ? !(url.host.size() > host.size() && url.host.ends_with(host)) : url.host != host)
    return false;
  if (path_prefix.empty() || path_prefix == "/") return true;
  // An encoded '/' or '\' is a separator to some servers and not to others: a prefix cannot be
  // checked across one.
  if (url.path.find("%2F") != std::string::npos || url.path.find("%5C") != std::string::npos)
    return false;
  if (!url.path.starts_with(path_prefix)) return false;
  return path_prefix.ends_with('/') || url.path.size() == path_prefix.size() ||
         url.path[path_prefix.size()] == '/';
}

bool allowed(const std::vector<Pattern>& patterns, const Url& url) {
  return std::any_of(patterns.begin(), patterns.end(),
                     [&](const Pattern& p) { return p.matches(url); });
}

std::string formatOf(std::string_view path) {
  const std::string lower_path = lowered(path);
  const std::pair<const char*, const char*> kinds[] = {
      {".tar.gz", "tar.gz"}, {".tgz", "tar.gz"}, {".tar.zst", "tar.zst"},
      {".tzst", "tar.zst"},  {".tar", "tar"},    {".zip", "zip"}};
  for (const auto& [suffix, format] : kinds)
    if (lower_path.ends_with(suffix)) return format;
  return "tar.gz";
}

std::string basicAuthorization(const std::string& user, const std::string& password) {
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const std::string in = user + ":" + password;
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = (static_cast<unsigned char>(in[i]) << 16) |
                       (static_cast<unsigned char>(in[i + 1]) << 8) |
                       static_cast<unsigned char>(in[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  if (i < in.size()) {
    uint32_t v = static_cast<unsigned char>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<unsigned char>(in[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < in.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return "Basic " + out;
}

}  // namespace airlock::transfer_http
