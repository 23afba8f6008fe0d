#include "supervisor/api/handlers.h"

#include <csignal>
#include <cstring>

#include "supervisor/api/openapi.h"
#include "supervisor/api/port_proxy.h"
#include "supervisor/api/request_decoding.h"
#include "supervisor/api/response_encoding.h"
#include "supervisor/api/router.h"
#include "supervisor/api/status_page.h"
#include "supervisor/encoding/base64.h"

namespace airlock::api {

using encoding::base64Decode;
using encoding::base64Encode;
using encoding::isValidUtf8;
namespace {

using sandbox::Caller;
using sandbox::ErrorCode;
using sandbox::ServiceError;
using sandbox::serviceError;
using sandbox::SResult;
using Query = std::vector<std::pair<std::string, std::string>>;

constexpr std::string_view kJson = "application/json";
constexpr std::string_view kNdjson = "application/x-ndjson";

void sendJson(Exchange& ex, int status, const Json& body) {
  ex.respond(status, kJson, dumpJson(body));
}

void sendError(Exchange& ex, const ServiceError& err) {
  ex.respond(sandbox::httpStatus(err.code), kJson, errorBody(err));
}

void sendError(Exchange& ex, ErrorCode code, std::string message) {
  sendError(ex, ServiceError{code, std::move(message)});
}

void sendNoContent(Exchange& ex) { ex.respond(204, "", ""); }

// The whole request body, refused past `limit` bytes (413).
SResult<std::string> readWholeBody(const Request& req, Exchange& ex, size_t limit) {
  auto tooLarge = [&] {
    return serviceError(ErrorCode::kPayloadTooLarge,
                        "request body is over the " + std::to_string(limit) + "-byte limit");
  };
  if (req.content_length && *req.content_length > limit) return tooLarge();
  std::string body;
  if (req.content_length) body.reserve(*req.content_length);
  char buf[16384];
  while (true) {
    auto n = ex.readBody(buf, sizeof buf);
    if (!n) return std::unexpected(n.error());
    if (*n == 0) break;
    if (body.size() + *n > limit) return tooLarge();
    body.append(buf, *n);
  }
  return body;
}

struct QueryArgs {
  std::optional<std::string> path;
  std::optional<std::string> mode;
  std::optional<std::string> format;
  std::map<std::string, std::string> metadata;
};

// Parses the query string, accepting only the parameters `route` takes, and `node` on every
// route: a fleet's proxy routes by it (docs/deploy.md), and it must name this node.
SResult<QueryArgs> parseArgs(RouteId route, const std::string& raw, const std::string& node) {
  Query query;
  std::string error;
  if (!parseQuery(raw, query, error)) return serviceError(ErrorCode::kBadRequest, error);
  bool takes_path = route == RouteId::kPutFile || route == RouteId::kGetFile ||
                    route == RouteId::kListFiles || route == RouteId::kStatFile ||
                    route == RouteId::kPutArchive || route == RouteId::kGetArchive;
  QueryArgs args;
  for (auto& [key, value] : query) {
    if (route == RouteId::kListSandboxes && key.starts_with("metadata.") && key.size() > 9) {
      args.metadata[key.substr(9)] = value;
    } else if (takes_path && key == "path") {
      if (value.empty() || value.front() != '/') {
        return serviceError(
            ErrorCode::kBadRequest,
            "query parameter 'path': must be an absolute path, got '" + value + "'");
      }
      args.path = value;
    } else if (route == RouteId::kPutFile && key == "mode") {
      args.mode = value;
    } else if (route == RouteId::kGetArchive && key == "format") {
      args.format = value;
    } else if (key == "node") {
      if (value != node)
        return serviceError(
            ErrorCode::kBadRequest,
            "query parameter 'node': '" + value + "', but this is " +
                (node.empty() ? "a supervisor without server.node" : "node '" + node + "'"));
    } else {
      return serviceError(ErrorCode::kBadRequest, "unknown query parameter '" + key + "'");
    }
  }
  if (takes_path && !args.path) {
    return serviceError(ErrorCode::kBadRequest, "query parameter 'path' is required");
  }
  return args;
}

// Whether the client asked for event streams as frames (docs/api.md); any other Accept gets
// NDJSON, which every client reads.
bool wantsFrames(const Request& req) { return req.accept.find(kFramesType) != std::string::npos; }

// Writes each event as one NDJSON line (or one frame) as soon as the service produces it.
// Returning destroys the stream, which is how the service learns that a client went away.
void pumpStream(Exchange& ex, std::unique_ptr<sandbox::EventStream> stream,
                std::chrono::milliseconds poll, bool frames) {
  if (!ex.beginStream(200, frames ? kFramesType : kNdjson)) return;
  while (true) {
    auto event = stream->next(sandbox::Clock::now() + poll);
    if (event) {
      if (!ex.writeStream(frames ? eventFrame(*event) : eventLine(*event))) return;
      // A busy stream never waits in next(): look for a hang-up (or stop()) here too.
      if (ex.clientGone()) return ex.abortStream();
      continue;
    }
    if (stream->done()) {
      ex.endStream();
      return;
    }
    if (ex.clientGone()) {
      ex.abortStream();
      return;
    }
  }
}

// Drains a stream into an aggregate for `"stream": false`; nullopt when the client left first.
template <typename Aggregate>
std::optional<Aggregate> collect(Exchange& ex, sandbox::EventStream& stream,
                                 std::chrono::milliseconds poll) {
  Aggregate agg;
  while (true) {
    auto event = stream.next(sandbox::Clock::now() + poll);
    if (event) {
      agg.add(*event);
      if (ex.clientGone()) return std::nullopt;
      continue;
    }
    if (stream.done()) return agg;
    if (ex.clientGone()) return std::nullopt;
  }
}

}  // namespace

std::string Dispatcher::handle(const Request& req, Exchange& ex, bool draining) {
  RouteMatch match = matchRoute(req.method, req.path);
  std::string label = match.route != nullptr ? match.route->pattern : "unknown";

  // A port link's token is its own authorization, so a browser can open it; an Authorization
  // field there is the sandbox server's (unless it is an airlock token: see below).
  const bool port_link =
      match.status == RouteMatch::Status::kFound && match.route->id == RouteId::kProxyPortLink;
  // The status page's files hold no data: a browser loads them without a token, and the page's
  // script then calls the API with the token the operator enters.
  const bool status_page =
      match.status == RouteMatch::Status::kFound &&
      (match.route->id == RouteId::kStatusPage || match.route->id == RouteId::kStatusPageAsset);
  Caller caller;
  if (port_link || status_page) {
    // No bearer token: the link decides the tenant below; the status page needs none.
  } else if (!req.authorization.empty()) {
    auto tenant = tokens_.tenantFor(req.authorization);
    if (!tenant) {
      ex.setHeader("WWW-Authenticate", "Bearer");
      sendError(ex, ErrorCode::kUnauthorized, "the bearer token is not valid");
      return label;
    }
    caller.tenant = *tenant;
  } else if (req.from_tcp) {
    ex.setHeader("WWW-Authenticate", "Bearer");
    sendError(ex, ErrorCode::kUnauthorized, "TCP requests need 'Authorization: Bearer <token>'");
    return label;
  }

  ex.log_tenant = caller.tenant;  // a port link's tenant is set below, from the link

  switch (match.status) {
    case RouteMatch::Status::kFound:
      break;
    case RouteMatch::Status::kBadPath:
      sendError(ex, ErrorCode::kBadRequest, match.error);
      return label;
    case RouteMatch::Status::kNotFound:
      sendError(ex, ErrorCode::kNotFound, "no route " + req.method + " " + req.path);
      return label;
    case RouteMatch::Status::kMethodNotAllowed:
      ex.setHeader("Allow", match.allow);
      sendError(ex, ErrorCode::kMethodNotAllowed,
                req.method + " is not allowed on " + req.path + "; allowed: " + match.allow);
      return label;
  }

  const RouteId id = match.route->id;
  if (draining) {
    if (id == RouteId::kHealthz) {
      Json health = service_.health();
      health["status"] = "draining";
      health["draining"] = true;
      sendJson(ex, 503, health);
    } else {
      sendError(ex, ErrorCode::kUnavailable, "the supervisor is draining; retry elsewhere");
    }
    return label;
  }

  if (id == RouteId::kProxyPort || id == RouteId::kProxyPortLink) {
    // The query string belongs to the sandbox's server: forwarded as it came.
    PortProxyTarget target;
    target.path = match.params.at("path");
    if (port_link) {
      auto link = service_.resolvePortLink(match.params.at("token"));
      if (!link) return sendError(ex, link.error()), label;
      target.caller = link->caller;
      ex.log_tenant = link->caller.tenant;
      target.sandbox = link->sandbox;
      target.port = std::to_string(link->port);
      // The sandbox server's own credentials pass; an airlock token (an SDK that sends its
      // token everywhere) never reaches the sandbox.
      target.strip_authorization =
          !req.authorization.empty() && tokens_.tenantFor(req.authorization).has_value();
    } else {
      target.caller = caller;
      target.sandbox = match.params.at("sb");
      target.port = match.params.at("port");
      target.prefix = "/v1/sandboxes/" + target.sandbox + "/ports/" + target.port;
    }
    proxyPort(service_, target, req, ex);
    return label;
  }

  auto args = parseArgs(id, req.query, service_.node());
  if (!args) {
    sendError(ex, args.error());
    return label;
  }
  const std::string sb = match.params.count("sb") ? match.params.at("sb") : "";
  const std::string cid = match.params.count("cid") ? match.params.at("cid") : "";
  const std::string ctx = match.params.count("ctx") ? match.params.at("ctx") : "";
  const std::string tid = match.params.count("tid") ? match.params.at("tid") : "";
  const std::string name = match.params.count("name") ? match.params.at("name") : "";
  const std::string rid = match.params.count("rid") ? match.params.at("rid") : "";

  // Decodes the JSON body with `decode`, answering 400/413 itself on failure.
  auto body = [&](auto decode) -> decltype(decode(std::string_view())) {
    auto raw = readWholeBody(req, ex, limits_.max_json_body);
    if (!raw) return std::unexpected(raw.error());
    return decode(*raw);
  };
  // Answers a result without a value: its error, or 204.
  auto answerEmpty = [&](const SResult<>& r) {
    if (!r) return sendError(ex, r.error());
    sendNoContent(ex);
  };
  // Answers `r`: its error, or `ok(value)`.
  auto answer = [&](auto&& r, auto ok) {
    if (!r) return sendError(ex, r.error());
    ok(*r);
  };

  switch (id) {
    case RouteId::kHealthz:
      sendJson(ex, 200, service_.health());
      break;
    case RouteId::kMetrics:
      ex.respond(200, "text/plain; version=0.0.4; charset=utf-8",
                 metrics_.render(service_.metricsText()));
      break;
    case RouteId::kOpenApi:
      ex.respond(200, kJson, std::string(openApiDocument()));
      break;
    case RouteId::kStatusPage:
    case RouteId::kStatusPageAsset: {
      auto file = statusPageFile(id == RouteId::kStatusPage ? "" : match.params.at("asset"));
      if (!file)
        return sendError(ex, ErrorCode::kNotFound, "no status page file " + req.path), label;
      ex.setHeader("Content-Security-Policy", std::string(kStatusPageCsp));
      ex.setHeader("X-Content-Type-Options", "nosniff");
      ex.setHeader("Referrer-Policy", "no-referrer");
      ex.setHeader("Cache-Control", "no-store");
      ex.respond(200, std::string(file->content_type), std::string(file->body));
      break;
    }
    case RouteId::kRun: {
      auto r = body(decodeRun);
      if (!r) return sendError(ex, r.error()), label;
      auto stream = service_.runOneShot(caller, r->spec);
      if (!stream) return sendError(ex, stream.error()), label;
      if (r->stream) {
        pumpStream(ex, std::move(*stream), limits_.stream_poll, wantsFrames(req));
        break;
      }
      auto agg = collect<RunAggregate>(ex, **stream, limits_.stream_poll);
      if (!agg) break;  // the client left; destroying the stream stops the run
      if (!agg->complete())
        return sendError(ex, ErrorCode::kInternal, "run stream ended without a result event"),
               label;
      sendJson(ex, 200, agg->document());
      break;
    }
    case RouteId::kListSandboxes:
      answer(service_.listSandboxes(caller, args->metadata), [&](const auto& list) {
        Json arr = Json::array();
        for (const auto& s : list) arr.push_back(encodeSandbox(s));
        sendJson(ex, 200, {{"sandboxes", arr}});
      });
      break;
    case RouteId::kCreateSandbox: {
      auto spec = body(decodeCreateSandbox);
      if (!spec) return sendError(ex, spec.error()), label;
      answer(service_.createSandbox(caller, *spec),
             [&](const auto& s) { sendJson(ex, 201, encodeSandbox(s)); });
      break;
    }
    case RouteId::kGetSandbox:
      answer(service_.getSandbox(caller, sb),
             [&](const auto& s) { sendJson(ex, 200, encodeSandbox(s)); });
      break;
    case RouteId::kSandboxMetrics:
      answer(service_.sandboxMetrics(caller, sb), [&](const Json& m) { sendJson(ex, 200, m); });
      break;
    case RouteId::kDestroySandbox:
      answerEmpty(service_.destroySandbox(caller, sb));
      break;
    case RouteId::kKeepAlive: {
      auto r = body(decodeKeepAlive);
      if (!r) return sendError(ex, r.error()), label;
      answer(service_.keepAlive(caller, sb, r->keep_alive_s, r->lifetime_s),
             [&](const auto& s) { sendJson(ex, 200, encodeSandbox(s)); });
      break;
    }
    case RouteId::kGetNetwork:
      answer(service_.getNetwork(caller, sb), [&](const auto& n) { sendJson(ex, 200, n); });
      break;
    case RouteId::kSetNetwork: {
      auto rules = body(decodeNetworkRules);
      if (!rules) return sendError(ex, rules.error()), label;
      answer(service_.setNetwork(caller, sb, *rules), [&](const auto& n) { sendJson(ex, 200, n); });
      break;
    }
    case RouteId::kRunCommand: {
      auto r = body(decodeRunCommand);
      if (!r) return sendError(ex, r.error()), label;
      auto stream = service_.runCommand(caller, sb, r->spec);
      if (!stream) return sendError(ex, stream.error()), label;
      if (r->spec.background) {
        auto start = (*stream)->next(sandbox::Clock::now() + std::chrono::seconds(10));
        if (!start) {
          return sendError(ex, ErrorCode::kInternal,
                           "background command: the service sent no start event"),
                 label;
        }
        sendJson(ex, 201,
                 {{"command_id", start->value("command_id", Json())},
                  {"pid", start->value("pid", Json())}});
      } else if (r->stream) {
        pumpStream(ex, std::move(*stream), limits_.stream_poll, wantsFrames(req));
      } else {
        auto agg = collect<CommandAggregate>(ex, **stream, limits_.stream_poll);
        if (!agg) break;  // the client left; destroying the stream kills the command
        if (!agg->complete()) {
          return sendError(ex, ErrorCode::kInternal, "command stream ended without an exit event"),
                 label;
        }
        sendJson(ex, 200, agg->document());
      }
      break;
    }
    case RouteId::kListCommands:
      answer(service_.listCommands(caller, sb), [&](const auto& list) {
        Json arr = Json::array();
        for (const auto& c : list) arr.push_back(encodeCommand(c));
        sendJson(ex, 200, {{"commands", arr}});
      });
      break;
    case RouteId::kCommandEvents: {
      auto stream = service_.attachCommand(caller, sb, cid);
      if (!stream) return sendError(ex, stream.error()), label;
      pumpStream(ex, std::move(*stream), limits_.stream_poll, wantsFrames(req));
      break;
    }
    case RouteId::kCommandStdin: {
      auto r = body(decodeStdin);
      if (!r) return sendError(ex, r.error()), label;
      answerEmpty(service_.sendStdin(caller, sb, cid, std::move(r->data), r->eof));
      break;
    }
    case RouteId::kCommandSignal: {
      auto r = body(decodeSignal);
      if (!r) return sendError(ex, r.error()), label;
      answerEmpty(service_.signalCommand(caller, sb, cid, r->signo));
      break;
    }
    case RouteId::kKillCommand:
      answerEmpty(service_.signalCommand(caller, sb, cid, SIGKILL));
      break;
    case RouteId::kRunCode: {
      auto r = body(decodeRunCode);
      if (!r) return sendError(ex, r.error()), label;
      auto stream = service_.runCode(caller, sb, r->spec);
      if (!stream) return sendError(ex, stream.error()), label;
      if (r->stream) {
        pumpStream(ex, std::move(*stream), limits_.stream_poll, wantsFrames(req));
      } else {
        auto agg = collect<CodeAggregate>(ex, **stream, limits_.stream_poll);
        if (!agg) break;
        if (!agg->complete()) {
          return sendError(ex, ErrorCode::kInternal, "code stream ended without an end event"),
                 label;
        }
        sendJson(ex, 200, agg->document());
      }
      break;
    }
    case RouteId::kCreateContext: {
      auto r = body(decodeCreateContext);
      if (!r) return sendError(ex, r.error()), label;
      answer(service_.createContext(caller, sb, r->language, r->cwd),
             [&](const auto& c) { sendJson(ex, 201, encodeContext(c)); });
      break;
    }
    case RouteId::kListContexts:
      answer(service_.listContexts(caller, sb), [&](const auto& list) {
        Json arr = Json::array();
        for (const auto& c : list) arr.push_back(encodeContext(c));
        sendJson(ex, 200, {{"contexts", arr}});
      });
      break;
    case RouteId::kRestartContext:
      answer(service_.restartContext(caller, sb, ctx),
             [&](const auto& c) { sendJson(ex, 200, encodeContext(c)); });
      break;
    case RouteId::kRunEvents: {
      auto stream = service_.attachRun(caller, sb, ctx, match.params.at("run"));
      if (!stream) return sendError(ex, stream.error()), label;
      pumpStream(ex, std::move(*stream), limits_.stream_poll, wantsFrames(req));
      break;
    }
    case RouteId::kDestroyContext:
      answerEmpty(service_.destroyContext(caller, sb, ctx));
      break;
    case RouteId::kPutFile: {
      uint32_t mode = 0644;
      if (args->mode) {
        auto m = parseOctalMode(*args->mode);
        if (!m) {
          return sendError(ex, ErrorCode::kBadRequest,
                           "query parameter 'mode': expected octal permission bits, got '" +
                               *args->mode + "'"),
                 label;
        }
        mode = *m;
      }
      const uint64_t limit = limits_.max_upload_bytes;
      if (req.content_length && *req.content_length > limit) {
        return sendError(ex, ErrorCode::kPayloadTooLarge,
                         "upload is over the " + std::to_string(limit) + "-byte limit"),
               label;
      }
      uint64_t total = 0;
      std::optional<ServiceError> body_error;
      sandbox::ByteSource source = [&](char* buf, size_t cap) -> SResult<size_t> {
        auto n = ex.readBody(buf, cap);
        if (!n) {
          body_error = n.error();
          return n;
        }
        total += *n;
        if (total > limit) {
          body_error = ServiceError{ErrorCode::kPayloadTooLarge,
                                    "upload is over the " + std::to_string(limit) + "-byte limit"};
          return std::unexpected(*body_error);
        }
        return n;
      };
      auto entry = service_.writeFile(caller, sb, *args->path, mode, source);
      if (!entry) return sendError(ex, body_error ? *body_error : entry.error()), label;
      sendJson(ex, 201, {{"path", *args->path}, {"size", entry->size}});
      break;
    }
    case RouteId::kStartTransfer: {
      auto r = body(decodeTransfer);
      if (!r) return sendError(ex, r.error()), label;
      auto stream = service_.startTransfer(caller, sb, r->spec);
      if (!stream) return sendError(ex, stream.error()), label;
      if (r->stream) {
        pumpStream(ex, std::move(*stream), limits_.stream_poll, wantsFrames(req));
        break;
      }
      // "stream": false: the final record alone, once the transfer ended.
      std::optional<Json> last;
      while (!(*stream)->done()) {
        auto event = (*stream)->next(sandbox::Clock::now() + limits_.stream_poll);
        if (event && event->value("type", "") == "transfer") last = std::move(*event);
        if (!event && ex.clientGone()) break;  // destroying the stream cancels the transfer
      }
      if (!last) break;
      last->erase("type");
      sendJson(ex, 200, *last);
      break;
    }
    case RouteId::kListTransfers:
      answer(service_.listTransfers(caller, sb), [&](const Json& j) { sendJson(ex, 200, j); });
      break;
    case RouteId::kCancelTransfer:
      answerEmpty(service_.cancelTransfer(caller, sb, tid));
      break;
    case RouteId::kPutArchive: {
      const uint64_t limit = limits_.max_upload_bytes;
      if (req.content_length && *req.content_length > limit) {
        return sendError(ex, ErrorCode::kPayloadTooLarge,
                         "upload is over the " + std::to_string(limit) + "-byte limit"),
               label;
      }
      uint64_t total = 0;
      std::optional<ServiceError> body_error;
      sandbox::ByteSource source = [&](char* buf, size_t cap) -> SResult<size_t> {
        auto n = ex.readBody(buf, cap);
        if (!n) {
          body_error = n.error();
          return n;
        }
        total += *n;
        if (total > limit) {
          body_error = ServiceError{ErrorCode::kPayloadTooLarge,
                                    "upload is over the " + std::to_string(limit) + "-byte limit"};
          return std::unexpected(*body_error);
        }
        return n;
      };
      auto record = service_.uploadArchive(caller, sb, *args->path, source);
      if (!record) return sendError(ex, body_error ? *body_error : record.error()), label;
      sendJson(ex, 201, *record);
      break;
    }
    case RouteId::kGetArchive: {
      bool started = false;
      bool sink_failed = false;
      const std::string format = args->format.value_or("tar.gz");
      auto r =
          service_.downloadArchive(caller, sb, *args->path, format, [&](std::string_view chunk) {
            if (!started) started = ex.beginStream(200, "application/octet-stream");
            if (!started || !ex.writeStream(chunk)) sink_failed = true;
            return !sink_failed;
          });
      if (!r && !started) return sendError(ex, r.error()), label;
      if (!r || sink_failed) {
        ex.abortStream();
      } else if (!started) {
        // An empty archive is still an answer (packing always writes at least an end marker).
        ex.respond(200, "application/octet-stream", "");
      } else {
        ex.endStream();
      }
      break;
    }
    case RouteId::kGetFile: {
      bool started = false;
      bool sink_failed = false;
      auto r = service_.readFile(
          caller, sb, *args->path,
          [&](uint64_t) { started = ex.beginStream(200, "application/octet-stream"); },
          [&](std::string_view chunk) {
            if (!started || !ex.writeStream(chunk)) sink_failed = true;
            return !sink_failed;
          });
      if (!r && !started) return sendError(ex, r.error()), label;
      if (!r || sink_failed) {
        ex.abortStream();
      } else {
        ex.endStream();
      }
      break;
    }
    case RouteId::kWriteFile: {
      auto r = body(decodeWriteFile);
      if (!r) return sendError(ex, r.error()), label;
      std::string_view rest = r->content;
      sandbox::ByteSource source = [&](char* buf, size_t cap) -> SResult<size_t> {
        size_t n = std::min(cap, rest.size());
        std::memcpy(buf, rest.data(), n);
        rest.remove_prefix(n);
        return n;
      };
      answer(service_.writeFile(caller, sb, r->path, r->mode, source), [&](const auto& e) {
        sendJson(ex, 201, {{"path", r->path}, {"size", e.size}});
      });
      break;
    }
    case RouteId::kReadFile: {
      auto r = body(decodeReadFile);
      if (!r) return sendError(ex, r.error()), label;
      const size_t cap = limits_.max_json_body;
      std::string content;
      bool too_large = false;
      auto res = service_.readFile(
          caller, sb, r->path, [&](uint64_t size) { too_large = size > cap; },
          [&](std::string_view chunk) {
            if (too_large || content.size() + chunk.size() > cap) {
              too_large = true;
              return false;
            }
            content.append(chunk);
            return true;
          });
      if (too_large) {
        return sendError(ex, ErrorCode::kPayloadTooLarge,
                         "file '" + r->path + "' is over the " + std::to_string(cap) +
                             "-byte limit of JSON reads; use GET /v1/sandboxes/{sb}/files"),
               label;
      }
      if (!res) return sendError(ex, res.error()), label;
      Json doc = {{"path", r->path}, {"size", content.size()}};
      if (r->base64) {
        doc["content_base64"] = base64Encode(content);
      } else {
        putText(doc, "content", content);
      }
      sendJson(ex, 200, doc);
      break;
    }
    case RouteId::kListFiles:
      answer(service_.listFiles(caller, sb, *args->path), [&](const auto& list) {
        Json arr = Json::array();
        for (const auto& e : list) arr.push_back(encodeFileEntry(e, false));
        sendJson(ex, 200, {{"path", *args->path}, {"entries", arr}});
      });
      break;
    case RouteId::kStatFile:
      answer(service_.statFile(caller, sb, *args->path),
             [&](const auto& e) { sendJson(ex, 200, encodeFileEntry(e, true)); });
      break;
    case RouteId::kMakeDirectory: {
      auto r = body(decodeMkdir);
      if (!r) return sendError(ex, r.error()), label;
      auto made = service_.makeDirectory(caller, sb, r->path, r->parents);
      if (!made) return sendError(ex, made.error()), label;
      sendJson(ex, 201, {{"path", r->path}});
      break;
    }
    case RouteId::kRemoveFile: {
      auto r = body(decodeRemove);
      if (!r) return sendError(ex, r.error()), label;
      answerEmpty(service_.removeFile(caller, sb, r->path, r->recursive));
      break;
    }
    case RouteId::kListWorkspaces:
      answer(service_.listWorkspaces(caller), [&](const auto& list) {
        Json arr = Json::array();
        for (const auto& w : list) arr.push_back(encodeWorkspace(w));
        sendJson(ex, 200, {{"workspaces", arr}});
      });
      break;
    case RouteId::kDeleteWorkspace:
      answerEmpty(service_.deleteWorkspace(caller, name));
      break;
    case RouteId::kListReviews:
    case RouteId::kApproveReview:
    case RouteId::kRejectReview: {
      // Deciding what runs is the operator's: the Unix socket, whose access the host controls.
      if (req.from_tcp)
        return sendError(ex, ErrorCode::kForbidden, "approvals are served on the Unix socket only"),
               label;
      if (id == RouteId::kListReviews) {
        answer(service_.listReviews(caller), [&](const auto& list) { sendJson(ex, 200, list); });
        break;
      }
      auto reason = body(decodeReviewDecision);
      if (!reason) return sendError(ex, reason.error()), label;
      answerEmpty(service_.decideReview(caller, rid, id == RouteId::kApproveReview, *reason));
      break;
    }
    case RouteId::kCreatePortLink:
      createPortLink(service_, caller, sb, match.params.at("port"), ex);
      break;
    case RouteId::kProxyPort:
    case RouteId::kProxyPortLink:
      break;  // answered above
    case RouteId::kRenameFile: {
      auto r = body(decodeRename);
      if (!r) return sendError(ex, r.error()), label;
      answerEmpty(service_.renameFile(caller, sb, r->from, r->to));
      break;
    }
  }
  return label;
}

}  // namespace airlock::api
