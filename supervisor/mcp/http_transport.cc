#include "supervisor/mcp/http_transport.h"
#include "supervisor/log/log.h"

#include <sys/random.h>

#include <algorithm>
#include <vector>

#include "airlock/policy/policy.h"
#include "supervisor/mcp/mcp_server.h"
#include "supervisor/mcp/sandbox_tools.h"

namespace airlock::mcp {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kServerError = -32000;  // the code MCP's SDKs use for transport-level refusals

// A transport-level refusal as MCP clients expect it: a JSON-RPC error without an id.
void refuse(api::Exchange& ex, int status, const std::string& message) {
  ex.respond(status, "application/json",
             rpcErrorResponse(nullptr, {kServerError, message, nullptr}).dump());
}

// 32 random bytes as hex: the session id is the only thing tying requests to a session, so it
// must be unguessable (it is also bound to the tenant).
std::string newSessionId() {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id;
  for (unsigned char b : bytes) {
    id += kHex[b >> 4];
    id += kHex[b & 15];
  }
  return id;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The host of an Origin ("https://host:port" → "host"), lowercase.
std::string originHost(const std::string& origin) {
  std::string rest = lower(origin);
  auto scheme = rest.find("://");
  if (scheme == std::string::npos) return "";
  rest = rest.substr(scheme + 3);
  if (!rest.empty() && rest.front() == '[') return rest.substr(0, rest.find(']') + 1);
  return rest.substr(0, rest.find_first_of(":/"));
}

std::string hostOnly(const std::string& host_header) {
  std::string h = lower(host_header);
  if (!h.empty() && h.front() == '[') return h.substr(0, h.find(']') + 1);
  return h.substr(0, h.find(':'));
}

// DNS rebinding defence (the spec's "MUST validate Origin"): a browser page may only reach /mcp
// when its origin is this server itself or a loopback name. Clients that are not browsers send
// no Origin.
bool originAllowed(const api::Request& req) {
  if (req.origin.empty()) return true;
  std::string host = originHost(req.origin);
  if (host.empty()) return false;
  if (host == "localhost" || host == "127.0.0.1" || host == "[::1]") return true;
  return !req.host.empty() && host == hostOnly(req.host);
}

bool accepts(const std::string& accept, std::string_view type) {
  return accept.empty() || lower(accept).find(type) != std::string::npos ||
         accept.find("*/*") != std::string::npos;
}

}  // namespace

struct HttpTransport::Session {
  Session(std::string session_id, std::string owner, SessionOptions options)
      : id(std::move(session_id)), tenant(std::move(owner)), tools(std::move(options)) {}
  const std::string id;
  const std::string tenant;
  std::mutex mu;  // one message at a time: SandboxTools and McpServer are not thread-safe
  SandboxTools tools;
  McpServer server{[this](const std::string& name, const Json& arguments) {
    return tools.call(name, arguments);
  }};
  Clock::time_point last_used = Clock::now();  // under HttpTransport::mu_
  size_t busy = 0;                             // requests in progress, under HttpTransport::mu_
};

HttpTransport::HttpTransport(const api::TokenTable& tokens, HttpTransportOptions options)
    : tokens_(tokens), options_(std::move(options)) {
  sweeper_ = std::thread([this] { sweep(); });
}

HttpTransport::~HttpTransport() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  sweeper_.join();
  // The server that owns this transport has stopped, and the supervisor ends every sandbox on
  // its way out: the sessions' sandboxes are forgotten, not ended through a socket that is gone.
  for (auto& [id, session] : sessions_) {
    std::lock_guard lock(session->mu);
    session->tools.detachAll();
  }
  sessions_.clear();
}

// Ends sessions idle for longer than idle_timeout, checking a few times per timeout.
void HttpTransport::sweep() {
  const auto period = std::clamp<std::chrono::milliseconds>(
      options_.idle_timeout / 4, std::chrono::milliseconds(100), std::chrono::seconds(30));
  std::unique_lock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, period, [this] { return stopping_; });
    std::vector<std::shared_ptr<Session>> idle;
    const auto now = Clock::now();
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      if (it->second->busy == 0 && now - it->second->last_used > options_.idle_timeout) {
        log::info("mcp.session_idle", {{"session", it->first.substr(0, 8)},
                                       {"tenant", it->second->tenant},
                                       {"effect", "ending it"}});
        idle.push_back(std::move(it->second));
        it = sessions_.erase(it);
      } else {
        ++it;
      }
    }
    lock.unlock();
    idle.clear();  // ends their sandboxes without holding the lock
    lock.lock();
  }
}

std::shared_ptr<HttpTransport::Session> HttpTransport::find(const std::string& id,
                                                            const std::string& tenant) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(id);
  // Another tenant's session is "not found" too, so ids cannot be probed across tenants.
  if (it == sessions_.end() || it->second->tenant != tenant) return nullptr;
  return it->second;
}

std::string HttpTransport::handle(const api::Request& req, api::Exchange& ex, bool draining) {
  const std::string label = "/mcp";  // one metrics label, whatever the method
  std::string tenant = "default";
  if (!req.authorization.empty()) {
    auto t = tokens_.tenantFor(req.authorization);
    if (!t) {
      ex.setHeader("WWW-Authenticate", "Bearer");
      refuse(ex, 401, "Unauthorized: the bearer token is not valid");
      return label;
    }
    tenant = *t;
  } else if (req.from_tcp) {
    ex.setHeader("WWW-Authenticate", "Bearer");
    refuse(ex, 401, "Unauthorized: TCP requests need 'Authorization: Bearer <token>'");
    return label;
  }
  if (!originAllowed(req)) {
    refuse(ex, 403,
           "Forbidden: Origin '" + req.origin + "' is neither this server nor a loopback name");
    return label;
  }
  if (draining) {
    ex.setHeader("Retry-After", "1");
    refuse(ex, 503, "the supervisor is shutting down");
    return label;
  }
  if (!req.mcp_protocol_version.empty()) {
    const auto& known = supportedProtocolVersions();
    if (std::find(known.begin(), known.end(), req.mcp_protocol_version) == known.end()) {
      refuse(ex, 400,
             "Bad Request: unsupported MCP-Protocol-Version '" + req.mcp_protocol_version + "'");
      return label;
    }
  }
  if (req.method == "POST") {
    post(req, ex, tenant);
  } else if (req.method == "DELETE") {
    remove(req, ex, tenant);
  } else {
    // GET would open a stream for messages the server starts; this one starts none.
    ex.setHeader("Allow", "POST, DELETE");
    refuse(ex, 405, "Method Not Allowed: /mcp takes POST and DELETE (no server-initiated stream)");
  }
  return label;
}

void HttpTransport::post(const api::Request& req, api::Exchange& ex, const std::string& tenant) {
  if (lower(req.content_type).find("application/json") == std::string::npos) {
    refuse(ex, 415, "Unsupported Media Type: POST /mcp takes Content-Type: application/json");
    return;
  }
  const bool json_ok = accepts(req.accept, "application/json");
  if (!json_ok && !accepts(req.accept, "text/event-stream")) {
    refuse(ex, 406, "Not Acceptable: the client must accept application/json or text/event-stream");
    return;
  }
  if (req.content_length && *req.content_length > options_.max_body) {
    refuse(ex, 413,
           "Payload Too Large: the body is over " + std::to_string(options_.max_body) +
               " bytes (server.max_json_body_kb)");
    return;
  }
  std::string body;
  char buf[16384];
  for (;;) {
    auto n = ex.readBody(buf, sizeof buf);
    if (!n) return;  // the client is gone or sent a broken body: nobody to answer
    if (*n == 0) break;
    if (body.size() + *n > options_.max_body) {
      refuse(ex, 413,
             "Payload Too Large: the body is over " + std::to_string(options_.max_body) +
                 " bytes (server.max_json_body_kb)");
      return;
    }
    body.append(buf, *n);
  }

  auto message = Json::parse(body, nullptr, false);
  auto isInitialize = [](const Json& m) {
    return m.is_object() && m.value("method", Json()) == "initialize";
  };
  bool initialize = !message.is_discarded() && isInitialize(message);
  if (message.is_array() && std::any_of(message.begin(), message.end(), isInitialize)) {
    refuse(ex, 400, "Bad Request: initialize must be sent alone, not in a batch");
    return;
  }

  std::shared_ptr<Session> session;
  if (initialize) {
    if (!req.mcp_session_id.empty()) {
      refuse(ex, 400,
             "Bad Request: initialize opens a new session; send it without Mcp-Session-Id");
      return;
    }
    SessionOptions options;
    options.connection.url = "unix://" + options_.socket_path;
    const std::string_view bearer = "Bearer ";
    if (req.authorization.size() > bearer.size())
      options.connection.token = req.authorization.substr(bearer.size());
    std::lock_guard lock(mu_);
    size_t owned = std::count_if(sessions_.begin(), sessions_.end(),
                                 [&](const auto& s) { return s.second->tenant == tenant; });
    if (owned >= options_.max_sessions_per_tenant) {
      ex.setHeader("Retry-After", "1");
      refuse(ex, 429,
             "Too Many Requests: tenant '" + tenant + "' already has " + std::to_string(owned) +
                 " MCP sessions (server.mcp_max_sessions_per_tenant); end one with DELETE /mcp");
      return;
    }
    std::string id = policy::fleetIdPrefix(options_.node) + newSessionId();
    session = std::make_shared<Session>(id, tenant, std::move(options));
    sessions_[id] = session;
  } else {
    if (req.mcp_session_id.empty()) {
      refuse(ex, 400, "Bad Request: Mcp-Session-Id header is required after initialize");
      return;
    }
    session = find(req.mcp_session_id, tenant);
    if (!session) {
      refuse(ex, 404, "Not Found: no MCP session with this Mcp-Session-Id (it ended or idled out)");
      return;
    }
  }

  {
    std::lock_guard lock(mu_);
    ++session->busy;
  }
  std::optional<std::string> answer;
  {
    std::lock_guard lock(session->mu);
    answer = session->server.handleLine(body);
  }
  {
    std::lock_guard lock(mu_);
    --session->busy;
    session->last_used = Clock::now();
  }
  if (initialize && session->server.protocolVersion().empty()) {
    // initialize was refused (bad params): no session came of it, so none is kept or named.
    std::lock_guard lock(mu_);
    sessions_.erase(session->id);
  } else {
    ex.setHeader("Mcp-Session-Id", session->id);
  }
  if (!answer) {
    ex.respond(202, "", "");  // notifications and responses only: accepted, nothing to say
  } else if (json_ok) {
    ex.respond(200, "application/json", std::move(*answer));
  } else {
    ex.setHeader("Cache-Control", "no-store");
    ex.respond(200, "text/event-stream", "event: message\ndata: " + *answer + "\n\n");
  }
}

void HttpTransport::remove(const api::Request& req, api::Exchange& ex, const std::string& tenant) {
  if (req.mcp_session_id.empty()) {
    refuse(ex, 400, "Bad Request: DELETE /mcp needs the Mcp-Session-Id of the session to end");
    return;
  }
  std::shared_ptr<Session> session;
  {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(req.mcp_session_id);
    if (it != sessions_.end() && it->second->tenant == tenant) {
      session = std::move(it->second);
      sessions_.erase(it);
    }
  }
  if (!session) {
    refuse(ex, 404, "Not Found: no MCP session with this Mcp-Session-Id (it ended or idled out)");
    return;
  }
  // Ended before answering, so the client knows its sandboxes are gone when DELETE returns
  // (unless a call of the session is still running: then they end when it returns).
  {
    std::lock_guard lock(session->mu);
    session->tools.endAll();
  }
  session.reset();
  ex.respond(204, "", "");
}

}  // namespace airlock::mcp
