#include "supervisor/api/router.h"

#include <array>

namespace airlock::api {
namespace {

constexpr std::array kRoutes = {
    Route{"GET", "/healthz", RouteId::kHealthz},
    Route{"GET", "/metrics", RouteId::kMetrics},
    Route{"GET", "/v1/openapi.json", RouteId::kOpenApi},
    Route{"GET", "/ui", RouteId::kStatusPage},
    Route{"GET", "/ui/{asset}", RouteId::kStatusPageAsset},
    Route{"POST", "/v1/runs", RouteId::kRun},
    Route{"GET", "/v1/sandboxes", RouteId::kListSandboxes},
    Route{"POST", "/v1/sandboxes", RouteId::kCreateSandbox},
    Route{"GET", "/v1/sandboxes/{sb}", RouteId::kGetSandbox},
    Route{"DELETE", "/v1/sandboxes/{sb}", RouteId::kDestroySandbox},
    Route{"GET", "/v1/sandboxes/{sb}/metrics", RouteId::kSandboxMetrics},
    Route{"POST", "/v1/sandboxes/{sb}/keepalive", RouteId::kKeepAlive},
    Route{"GET", "/v1/sandboxes/{sb}/network", RouteId::kGetNetwork},
    Route{"PUT", "/v1/sandboxes/{sb}/network", RouteId::kSetNetwork},
    Route{"POST", "/v1/sandboxes/{sb}/commands", RouteId::kRunCommand},
    Route{"GET", "/v1/sandboxes/{sb}/commands", RouteId::kListCommands},
    Route{"GET", "/v1/sandboxes/{sb}/commands/{cid}/events", RouteId::kCommandEvents},
    Route{"POST", "/v1/sandboxes/{sb}/commands/{cid}/stdin", RouteId::kCommandStdin},
    Route{"POST", "/v1/sandboxes/{sb}/commands/{cid}/signal", RouteId::kCommandSignal},
    Route{"DELETE", "/v1/sandboxes/{sb}/commands/{cid}", RouteId::kKillCommand},
    Route{"POST", "/v1/sandboxes/{sb}/code", RouteId::kRunCode},
    Route{"POST", "/v1/sandboxes/{sb}/contexts", RouteId::kCreateContext},
    Route{"GET", "/v1/sandboxes/{sb}/contexts", RouteId::kListContexts},
    Route{"POST", "/v1/sandboxes/{sb}/contexts/{ctx}/restart", RouteId::kRestartContext},
    Route{"DELETE", "/v1/sandboxes/{sb}/contexts/{ctx}", RouteId::kDestroyContext},
    Route{"GET", "/v1/sandboxes/{sb}/contexts/{ctx}/runs/{run}/events", RouteId::kRunEvents},
    Route{"PUT", "/v1/sandboxes/{sb}/files", RouteId::kPutFile},
    Route{"GET", "/v1/sandboxes/{sb}/files", RouteId::kGetFile},
    Route{"POST", "/v1/sandboxes/{sb}/files/write", RouteId::kWriteFile},
    Route{"POST", "/v1/sandboxes/{sb}/files/read", RouteId::kReadFile},
    Route{"GET", "/v1/sandboxes/{sb}/files/list", RouteId::kListFiles},
    Route{"GET", "/v1/sandboxes/{sb}/files/stat", RouteId::kStatFile},
    Route{"POST", "/v1/sandboxes/{sb}/files/mkdir", RouteId::kMakeDirectory},
    Route{"POST", "/v1/sandboxes/{sb}/files/remove", RouteId::kRemoveFile},
    Route{"POST", "/v1/sandboxes/{sb}/files/rename", RouteId::kRenameFile},
    Route{"POST", "/v1/sandboxes/{sb}/transfers", RouteId::kStartTransfer},
    Route{"GET", "/v1/sandboxes/{sb}/transfers", RouteId::kListTransfers},
    Route{"DELETE", "/v1/sandboxes/{sb}/transfers/{tid}", RouteId::kCancelTransfer},
    Route{"PUT", "/v1/sandboxes/{sb}/archive", RouteId::kPutArchive},
    Route{"GET", "/v1/sandboxes/{sb}/archive", RouteId::kGetArchive},
    Route{"GET", "/v1/workspaces", RouteId::kListWorkspaces},
    Route{"DELETE", "/v1/workspaces/{name}", RouteId::kDeleteWorkspace},
    Route{"GET", "/v1/reviews", RouteId::kListReviews},
    Route{"POST", "/v1/reviews/{rid}/approve", RouteId::kApproveReview},
    Route{"POST", "/v1/reviews/{rid}/reject", RouteId::kRejectReview},
    Route{"POST", "/v1/sandboxes/{sb}/ports/{port}/link", RouteId::kCreatePortLink},
    Route{"*", "/v1/sandboxes/{sb}/ports/{port}/{path}", RouteId::kProxyPort, true},
    Route{"*", "/v1/ports/{token}/{path}", RouteId::kProxyPortLink, true},
};

std::vector<std::string_view> splitPath(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t i = 1;  // skip the leading '/'
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    parts.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return parts;
}

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Matches literal segments exactly and {name} segments against one non-empty segment; with
// `rest`, the last {name} takes whatever follows, raw.
bool matchPattern(std::string_view pattern, bool rest, const std::vector<std::string_view>& parts,
                  std::map<std::string, std::string>& params, std::string& error) {
  auto pat = splitPath(pattern);
  std::map<std::string, std::string> found;
  if (rest) {
    if (parts.size() + 1 < pat.size()) return false;
    std::string tail;
    for (size_t i = pat.size() - 1; i < parts.size(); ++i) {
      tail += '/';
      tail += parts[i];
    }
    if (tail.empty()) tail = "/";
    std::string_view last = pat.back();
    found.emplace(std::string(last.substr(1, last.size() - 2)), std::move(tail));
    pat.pop_back();
  } else if (pat.size() != parts.size()) {
    return false;
  }
  for (size_t i = 0; i < pat.size(); ++i) {
    if (pat[i].size() > 2 && pat[i].front() == '{' && pat[i].back() == '}') {
      if (parts[i].empty()) return false;
      std::string decoded;
      if (!percentDecode(parts[i], false, decoded) || decoded.find('/') != std::string::npos ||
          decoded.find('\0') != std::string::npos) {
        error = "bad path segment '" + std::string(parts[i]) + "'";
        return false;
      }
      found.emplace(std::string(pat[i].substr(1, pat[i].size() - 2)), std::move(decoded));
    } else if (pat[i] != parts[i]) {
      return false;
    }
  }
  params = std::move(found);
  return true;
}

}  // namespace

std::span<const Route> routeTable() { return kRoutes; }

bool percentDecode(std::string_view in, bool plus_is_space, std::string& out) {
  out.clear();
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      int hi = hexValue(in[i + 1]);
      int lo = hexValue(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return true;
}

bool parseQuery(std::string_view query, std::vector<std::pair<std::string, std::string>>& out,
                std::string& error) {
  out.clear();
  size_t i = 0;
  while (i < query.size()) {
    size_t j = query.find('&', i);
    if (j == std::string_view::npos) j = query.size();
    std::string_view item = query.substr(i, j - i);
    i = j + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    std::string key, value;
    std::string_view raw_key = item.substr(0, eq);
    std::string_view raw_value = eq == std::string_view::npos ? "" : item.substr(eq + 1);
    if (!percentDecode(raw_key, true, key) || !percentDecode(raw_value, true, value)) {
      error = "bad percent-escape in query parameter '" + std::string(item) + "'";
      return false;
    }
    out.emplace_back(std::move(key), std::move(value));
  }
  return true;
}

RouteMatch matchRoute(std::string_view method, std::string_view path) {
  RouteMatch m;
  if (path.empty() || path.front() != '/') {
    m.status = RouteMatch::Status::kBadPath;
    m.error = "request target must be an absolute path";
    return m;
  }
  auto parts = splitPath(path);
  for (const Route& r : kRoutes) {
    std::map<std::string, std::string> params;
    std::string error;
    if (!matchPattern(r.pattern, r.rest, parts, params, error)) {
      if (!error.empty()) {
        m.status = RouteMatch::Status::kBadPath;
        m.error = error;
        return m;
      }
      continue;
    }
    if (method == r.method || std::string_view(r.method) == "*") {
      m.status = RouteMatch::Status::kFound;
      m.route = &r;
      m.params = std::move(params);
      m.allow.clear();
      return m;
    }
    if (!m.allow.empty()) m.allow += ", ";
    m.allow += r.method;
    m.status = RouteMatch::Status::kMethodNotAllowed;
  }
  return m;
}

}  // namespace airlock::api
