// The port proxy (docs/api.md, "Ports"): `ANY /v1/sandboxes/{sb}/ports/{port}/{path...}` and
// `ANY /v1/ports/{token}/{path...}` relay HTTP, and WebSocket after an Upgrade, to a server the
// sandbox listens on, through a port stream of its agent (supervisor/sandbox/agent/port_stream.h).
//
// How: the request header is rewritten (target path, Host, X-Forwarded-*, and Connection: close
// unless it is an Upgrade; the tenant's Authorization never reaches the sandbox) and sent, then
// the request thread relays bytes both ways, unparsed, until the sandbox's server closes its
// side (an HTTP answer ends there, so each proxied request has a connection of its own) or the
// client leaves. Bodies stream both ways under the stream's flow control, so nothing is held
// beyond one window. A connection without traffic for the server's io_timeout is closed.
#pragma once

#include <string>

#include "supervisor/api/handlers.h"

namespace airlock::api {

struct PortProxyTarget {
  sandbox::Caller caller;
  std::string sandbox;
  std::string port;  // as in the path; checked here
  std::string path;  // the rest of the path, raw, starting with '/'
  // The prefix the client used ("/v1/sandboxes/sb/ports/8000"), sent as X-Forwarded-Prefix;
  // empty for links, whose token stays out of the sandbox.
  std::string prefix;
  bool strip_authorization = true;  // the tenant's token: never forwarded
};

// Answers the request: a 4xx/5xx JSON error when the stream cannot open (403 ports off, 502
// nothing listening, naming the port), else the relayed answer.
void proxyPort(sandbox::Service& service, const PortProxyTarget& target, const Request& req,
               Exchange& ex);

// POST /v1/sandboxes/{sb}/ports/{port}/link: {"path": "/v1/ports/<token>/", "port": N}.
void createPortLink(sandbox::Service& service, const sandbox::Caller& caller, const std::string& sb,
                    const std::string& port, Exchange& ex);

}  // namespace airlock::api
