// Checks of [profiles.<name>.transfer] and [transfer], and the ways they loosen the defaults.
#include <algorithm>

#include "airlock/policy/net_rule.h"
#include "airlock/policy/policy.h"
#include "check.h"

namespace airlock::policy {
namespace {

using detail::Problem;
using detail::q;
using detail::range;
using Check = std::optional<Problem>;

constexpr uint64_t kMaxMiB = uint64_t{1} << 24;

Check checkLimits(const std::string& table, const TransferLimits& l) {
  for (Check c : {range(table + ".max_mb", l.max_mb, 1, kMaxMiB),
                  range(table + ".sandbox_max_mb", l.sandbox_max_mb, 1, kMaxMiB),
                  range(table + ".max_files", l.max_files, 1, 100'000'000),
                  range(table + ".max_depth", l.max_depth, 1, 4096),
                  range(table + ".max_ratio", l.max_ratio, 1, 1'000'000)}) {
    if (c) return c;
  }
  if (l.sandbox_max_mb < l.max_mb) {
    return Problem{table + ".sandbox_max_mb",
                   table + ".sandbox_max_mb = " + std::to_string(l.sandbox_max_mb) + ": below " +
                       table + ".max_mb = " + std::to_string(l.max_mb) +
                       ": one transfer could never use its own cap",
                   table + ".max_mb"};
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> urlPatternProblem(std::string_view pattern) {
  std::string_view rest;
  if (pattern.starts_with("https://")) {
    rest = pattern.substr(8);
  } else if (pattern.starts_with("http://")) {
    rest = pattern.substr(7);
  } else {
    return "must start with https:// or http://";
  }
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (authority.find('@') != std::string_view::npos) return "must not carry credentials";
  if (pattern.find_first_of("?#") != std::string_view::npos)
    return "must not have a query or a fragment (it matches by scheme, host, port and path)";
  if (pattern.find_first_of(" \t\r\n") != std::string_view::npos) return "contains whitespace";
  std::string_view host = authority;
  if (host.starts_with("[")) {  // [v6]:port
    const size_t close = host.find(']');
    if (close == std::string_view::npos) return "an IPv6 host needs its closing ']'";
    std::string_view port = host.substr(close + 1);
    host = host.substr(1, close - 1);
    if (!port.empty() && !port.starts_with(":")) return "unexpected text after ']'";
    authority = port.empty() ? "" : port.substr(1);
  } else if (const size_t colon = host.rfind(':'); colon != std::string_view::npos) {
    authority = host.substr(colon + 1);
    host = host.substr(0, colon);
  } else {
    authority = "";
  }
  if (host.empty() || host == "*." || host == "*") return "needs a host";
  if (host.find('*') != std::string_view::npos &&
      (!host.starts_with("*.") || host.substr(2).find('*') != std::string_view::npos))
    return "a wildcard may only be the first label (*.example.com)";
  if (!authority.empty()) {
    if (!std::all_of(authority.begin(), authority.end(),
                     [](char c) { return c >= '0' && c <= '9'; }) ||
        authority.size() > 5 || std::stoul(std::string(authority)) == 0 ||
        std::stoul(std::string(authority)) > 65535)
      return "port " + q(authority) + " is not a number from 1 to 65535";
  }
  return std::nullopt;
}

namespace detail {

std::optional<Problem> checkTransfer(const Transfer& t) {
  for (size_t i = 0; i < t.plugins.size(); ++i) {
    if (t.plugins[i].empty())
      return Problem{"transfer.plugins", "transfer.plugins[" + std::to_string(i) + "] is empty"};
  }
  for (Check c :
       {checkLimits("transfer.archive", t.archive), checkLimits("transfer.http", t.http.limits),
        checkLimits("transfer.hostdir", t.hostdir.limits)}) {
    if (c) return c;
  }
  const TransferHttp& h = t.http;
  for (size_t i = 0; i < h.allow.size(); ++i) {
    if (auto why = urlPatternProblem(h.allow[i]))
      return Problem{"transfer.http.allow", "transfer.http.allow[" + std::to_string(i) +
                                                "] = " + q(h.allow[i]) + ": " + *why};
  }
  for (size_t i = 0; i < h.allow_private.size(); ++i) {
    if (auto c = Cidr::parse(h.allow_private[i]); !c)
      return Problem{"transfer.http.allow_private",
                     "transfer.http.allow_private[" + std::to_string(i) +
                         "] = " + q(h.allow_private[i]) + ": " + c.error().message()};
  }
  for (Check c : {range("transfer.http.redirects", h.redirects, 0, 20),
                  range("transfer.http.connect_timeout_s", h.connect_timeout_s, 1, 600),
                  range("transfer.http.idle_timeout_s", h.idle_timeout_s, 1, 3600),
                  range("transfer.http.timeout_s", h.timeout_s, 1, 86400)}) {
    if (c) return c;
  }
  if (!h.ca_file.empty() && h.ca_file.front() != '/')
    return Problem{"transfer.http.ca_file",
                   "transfer.http.ca_file = " + q(h.ca_file) + ": must be an absolute path"};
  for (size_t i = 0; i < t.hostdir.roots.size(); ++i) {
    if (t.hostdir.roots[i].empty())
      return Problem{"transfer.hostdir.roots",
                     "transfer.hostdir.roots[" + std::to_string(i) + "] is empty"};
  }
  return std::nullopt;
}

std::optional<Problem> checkTransferSettings(const Policy& policy) {
  const TransferSettings& s = policy.transfer;
  for (const auto& [name, path] : s.roots) {
    const std::string key = "transfer.roots." + name;
    if (name.empty() || name.find_first_of("/:*") != std::string::npos)
      return Problem{key, "transfer.roots: root name " + q(name) +
                              " may not be empty or contain '/', ':' or '*'"};
    if (path.empty() || path.front() != '/' || path.find("/../") != std::string::npos ||
        path.ends_with("/.."))
      return Problem{key, key + " = " + q(path) + ": must be an absolute path without '..'"};
    if (path == "/") return Problem{key, key + " = '/': the whole host cannot be a root"};
  }
  for (const auto& name : s.writable_roots) {
    if (!s.roots.contains(name))
      return Problem{"transfer.writable_roots",
                     "transfer.writable_roots: " + q(name) + " is not a root of [transfer.roots]"};
  }
  if (s.spool_dir.empty() || s.spool_dir.front() != '/')
    return Problem{"transfer.spool_dir",
                   "transfer.spool_dir = " + q(s.spool_dir) + ": must be an absolute path"};
  for (const auto& [pname, profile] : policy.profiles) {
    for (const auto& root : profile.transfer.hostdir.roots) {
      if (root != "*" && !s.roots.contains(root))
        return Problem{"profiles." + pname + ".transfer.hostdir.roots",
                       "profile " + q(pname) + ": transfer.hostdir.roots: " + q(root) +
                           " is not a root of [transfer.roots]"};
    }
  }
  return std::nullopt;
}

std::vector<std::string> transferRelaxations(const Transfer& t) {
  std::vector<std::string> out;
  for (const auto& url : t.http.allow) {
    out.push_back("transfer.http.allow: transfers may fetch from and upload to " + q(url));
  }
  for (const auto& cidr : t.http.allow_private) {
    out.push_back("transfer.http.allow_private: URLs may reach " + q(cidr) +
                  " inside the protected ranges (private, loopback, link-local, metadata)");
  }
  if (!t.http.ca_file.empty())
    out.push_back("transfer.http.ca_file = " + q(t.http.ca_file) +
                  ": its CAs are trusted besides the system's");
  const Transfer defaults;
  auto limits = [&](const std::string& table, const TransferLimits& l, const TransferLimits& d) {
    auto above = [&](const char* key, uint64_t v, uint64_t dv) {
      if (v > dv)
        out.push_back(table + "." + key + " = " + std::to_string(v) + ": above the default " +
                      std::to_string(dv));
    };
    above("max_mb", l.max_mb, d.max_mb);
    above("sandbox_max_mb", l.sandbox_max_mb, d.sandbox_max_mb);
    above("max_files", l.max_files, d.max_files);
    above("max_depth", l.max_depth, d.max_depth);
    above("max_ratio", l.max_ratio, d.max_ratio);
  };
  limits("transfer.archive", t.archive, defaults.archive);
  limits("transfer.http", t.http.limits, defaults.http.limits);
  limits("transfer.hostdir", t.hostdir.limits, defaults.hostdir.limits);
  return out;
}

}  // namespace detail
}  // namespace airlock::policy
