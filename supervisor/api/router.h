// The route table of docs/api.md and the matcher that maps a method and path onto it.
//
// The table is data so that the OpenAPI test and the metrics labels read the same list the
// dispatcher uses; a route added here without a handler or an OpenAPI entry fails a unit test.
#pragma once

#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace airlock::api {

enum class RouteId {
  kHealthz,
  kMetrics,
  kOpenApi,
  kStatusPage,       // GET /ui: the read-only status page (status_page.h)
  kStatusPageAsset,  // GET /ui/{asset}: its script and stylesheet
  kRun,
  kListSandboxes,
  kCreateSandbox,
  kGetSandbox,
  kSandboxMetrics,
  kDestroySandbox,
  kKeepAlive,
  kGetNetwork,
  kSetNetwork,
  kRunCommand,
  kListCommands,
  kCommandEvents,
  kCommandStdin,
  kCommandSignal,
  kKillCommand,
  kRunCode,
  kCreateContext,
  kListContexts,
  kRestartContext,
  kDestroyContext,
  kRunEvents,
  kPutFile,
  kGetFile,
  kWriteFile,
  kReadFile,
  kListFiles,
  kStatFile,
  kMakeDirectory,
  kRemoveFile,
  kRenameFile,
  kStartTransfer,
  kListTransfers,
  kCancelTransfer,
  kPutArchive,
  kGetArchive,
  kListWorkspaces,
  kDeleteWorkspace,
  kListReviews,
  kApproveReview,
  kRejectReview,
  kCreatePortLink,
  kProxyPort,
  kProxyPortLink,
};

struct Route {
  const char* method;   // "GET", "POST", "PUT", "DELETE"; "*": any method (kAnyMethods)
  const char* pattern;  // "/v1/sandboxes/{sb}/commands/{cid}/events"
  RouteId id;
  // The last {name} takes the rest of the path: zero or more segments, kept raw (not decoded),
  // as "/a/b%20c" ("/" for none). The port proxy forwards it as the target path.
  bool rest = false;
};

// The methods a "*" route answers (and the OpenAPI document lists for it).
inline constexpr const char* kAnyMethods[] = {"GET",   "HEAD",   "POST",   "PUT",
                                              "PATCH", "DELETE", "OPTIONS"};

// Every route, in docs/api.md order.
std::span<const Route> routeTable();

struct RouteMatch {
  enum class Status { kFound, kNotFound, kMethodNotAllowed, kBadPath };
  Status status = Status::kNotFound;
  const Route* route = nullptr;               // kFound
  std::map<std::string, std::string> params;  // {sb}, {cid}, {ctx}, {tid}, percent-decoded
  std::string allow;                          // kMethodNotAllowed: "GET, DELETE"
  std::string error;                          // kBadPath: what was wrong
};

// `path` is the request target without its query string.
RouteMatch matchRoute(std::string_view method, std::string_view path);

// Splits "a=1&b=%2F" into decoded pairs in order ('+' is a space). False on a bad escape.
bool parseQuery(std::string_view query, std::vector<std::pair<std::string, std::string>>& out,
                std::string& error);

// Decodes %XX escapes; false on a truncated or non-hex escape.
bool percentDecode(std::string_view in, bool plus_is_space, std::string& out);

}  // namespace airlock::api
