// URLs for airlock.transfer.http: parsing, the redacted display form, redirect resolution, the
// allow patterns of transfer.http.allow, and the archive format an upload's name asks for.
//
// Parsing is strict on purpose: whatever reaches the request line or the Host header has been
// checked here (no control characters, no spaces, a host made of name characters or an IP
// literal), and the path is normalized (percent-encoded unreserved characters decoded, dot
// segments removed) before any pattern sees it, so "/data/../secret" cannot pass a "/data"
// prefix.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace airlock::transfer_http {

struct Url {
  std::string scheme;  // "http" or "https"
  bool has_userinfo = false;
  std::string user, password;  // percent-decoded
  std::string host;            // lowercase; an IPv6 literal in canonical form, without brackets
  bool ipv6_literal = false;
  uint16_t port = 0;  // the effective port (80 or 443 unless the URL names one)
  std::string path;   // normalized, starts with '/'
  bool has_query = false;
  std::string query;  // without the '?'

  bool tls() const { return scheme == "https"; }
  uint16_t defaultPort() const { return tls() ? 443 : 80; }
  // The request-target: path and query.
  std::string target() const;
  // host[:port] as the Host header and the authority of display() write it.
  std::string authority() const;
  // scheme://authority/path with the query replaced by "?…": no credentials, no signature.
  std::string display() const;
  // The whole URL without userinfo: a base that relative redirects resolve against.
  std::string withoutUserinfo() const;
  bool sameOrigin(const Url& other) const {
    return scheme == other.scheme && host == other.host && port == other.port;
  }
};

// Parses an absolute http:// or https:// URL. Throws std::invalid_argument saying what is wrong
// (never quoting the URL, which may hold credentials).
Url parseUrl(std::string_view text);

// The display form of any location, even one that does not parse: the userinfo removed, any
// query replaced by "?…", any fragment dropped, and capped in length.
std::string redact(std::string_view location);

// Resolves a redirect's Location against the URL that answered (RFC 3986 section 5.2). Throws
// std::invalid_argument for anything but an http(s) URL.
Url resolveReference(const Url& base, std::string_view reference);

// One entry of transfer.http.allow: scheme://host[:port][/path-prefix], where host is a name
// (matched exactly, case-insensitively), "*.suffix" (strict subdomains of suffix only) or an IP
// literal.
struct Pattern {
  std::string text;  // as written, for messages
  std::string scheme;
  std::string host;  // lowercase; for a wildcard, the suffix with its leading dot (".example.com")
  bool wildcard = false;
  uint16_t port = 0;
  std::string path_prefix;  // normalized; "" or "/" matches every path

  bool matches(const Url& url) const;
};

// Throws std::invalid_argument saying what is wrong with the pattern.
Pattern parsePattern(std::string_view text);

// Whether any of `patterns` matches `url`.
bool allowed(const std::vector<Pattern>& patterns, const Url& url);

// The archive format an upload's URL path names: .tar, .tar.gz/.tgz, .tar.zst/.tzst or .zip,
// matched case-insensitively; anything else is "tar.gz".
std::string formatOf(std::string_view path);

// "Basic <base64(user:password)>".
std::string basicAuthorization(const std::string& user, const std::string& password);

}  // namespace airlock::transfer_http
