// MCP's Streamable HTTP transport (protocol 2025-03-26 and later) at `/mcp` of `airlock serve`.
//
// POST carries JSON-RPC messages and is answered with application/json (or one text/event-stream
// event when the client accepts only that): the same McpServer and SandboxTools as `airlock mcp`
// on stdio, one pair per session. `initialize` opens a session and its answer carries the
// `Mcp-Session-Id` every later request must send; DELETE ends it. GET answers 405: this server
// sends no messages of its own.
//
// Authorization is the API's: a tenant's bearer token, required over TCP; a Unix socket peer
// without one is tenant "default". A session belongs to the tenant that opened it, and its tools
// act for that tenant by calling the API on the server's own Unix socket with the caller's token,
// so every quota, profile and review rule applies exactly as over REST.
//
// Sessions are bounded per tenant and end after `idle_timeout` without a request; ending one
// ends its sandboxes (the default one and those made with create_sandbox).
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "supervisor/api/auth.h"
#include "supervisor/api/handlers.h"

namespace airlock::mcp {

struct HttpTransportOptions {
  std::string socket_path;  // the server's Unix socket, where session tools call the API
  size_t max_sessions_per_tenant = 16;
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(30)};
  size_t max_body = 8 << 20;  // largest JSON-RPC POST body
  // A fleet node's name: session ids begin "<node>_", so a proxy routes a session's requests
  // (Mcp-Session-Id) to the node that holds it. "": a single host.
  std::string node;
};

class HttpTransport {
 public:
  HttpTransport(const api::TokenTable& tokens, HttpTransportOptions options);
  ~HttpTransport();  // drops every session, leaving its sandboxes to the supervisor's shutdown
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // Answers one request to /mcp. Returns the route label for metrics.
  std::string handle(const api::Request& req, api::Exchange& ex, bool draining);

 private:
  struct Session;
  void post(const api::Request& req, api::Exchange& ex, const std::string& tenant);
  void remove(const api::Request& req, api::Exchange& ex, const std::string& tenant);
  std::shared_ptr<Session> find(const std::string& id, const std::string& tenant);
  void sweep();

  const api::TokenTable& tokens_;
  HttpTransportOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::map<std::string, std::shared_ptr<Session>> sessions_;  // by id
  std::thread sweeper_;
};

}  // namespace airlock::mcp
